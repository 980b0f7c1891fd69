"""The CTF manifest and score results read as typed objects (`seisctf.ctf_json`): a real
bundle's manifest and real results read and give back the same JSON, and a malformed one is
InvalidInput naming the file and the field, from the library and from the command line's
checks."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import TINY_LAYOUT, noisy_copy, smooth_wavefield, write_tiny_truth

from seisctf import cli, keys, storage
from seisctf import conventions as cv
from seisctf.ctf_json import CtfManifest, CtfPair, CtfResult
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.scoring import release
from seisctf.scoring.ctf import open_truth, score_ctf, score_validation

SECRET = "manifest-reading-secret"


def _extended_wavefield() -> xr.Dataset:
    """`smooth_wavefield` and six more realisations with the extended roles (pairs 10 and 11),
    on a surface grid: a store whose manifest has every optional key a bundle writes."""
    wavefield = smooth_wavefield()
    roles = ["sweep_train", "sweep_train", "sweep_test", "initial_train", "initial_train"]
    roles.append("initial_test")
    extra = wavefield.isel({cv.REALISATION: list(range(6))}).assign_coords(
        {
            cv.ROLE: (cv.REALISATION, np.array(roles, dtype=object)),
            cv.PARAMETER_VALUE: (cv.REALISATION, [20.0, 60.0, 35.0, np.nan, np.nan, np.nan]),
        }
    )
    extended = xr.concat([wavefield, extra], dim=cv.REALISATION)
    extended.attrs[cv.ATTR_SENSOR_GRID] = {"n_x": 6, "n_y": 8, "spacing_m": 100.0}
    return extended


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    """{kind: bundle folder} of two real bundles: the tiny one, and one with the extended pairs,
    a sensor grid and the public-truth stamp."""
    root = tmp_path_factory.mktemp("manifests")
    write_tiny_truth(root / "tiny", SECRET)
    stamp = {
        cv.PROVENANCE_TRUTH: keys.TRUTH_PUBLIC,
        cv.PROVENANCE_TRUTH_REASON: "its store is marked truth: public",
        "truth_note": cv.PUBLIC_TRUTH_NOTE,
    }
    write_bundle(
        build_bundle(_extended_wavefield(), TINY_LAYOUT, SECRET),
        StoreLocation(root / "extended" / "public.zarr"),
        StoreLocation(root / "extended" / "truth.zarr"),
        SECRET,
        quiet=True,
        manifest_stamp=stamp,
    )
    return {"tiny": root / "tiny", "extended": root / "extended"}


@pytest.mark.parametrize("kind", ["tiny", "extended"])
@pytest.mark.parametrize("group", ["public.zarr", "truth.zarr"])
def test_a_real_manifest_reads_and_gives_back_the_same_json(bundles, kind, group):
    url = str(bundles[kind] / group)
    written = storage.read_attrs(StoreLocation(url))[cv.ATTR_CTF]
    manifest = CtfManifest.from_attrs(storage.read_attrs(StoreLocation(url)), url)
    assert manifest.to_json() == written
    # The same keys in the same order: serialised again, the manifest is byte for byte the same.
    assert json.dumps(manifest.to_json()) == json.dumps(written)
    assert manifest.extra == {} and all(pair.extra == {} for pair in manifest.pairs)


def test_the_typed_manifest_holds_what_the_readers_use(bundles):
    url = str(bundles["extended"] / "truth.zarr")
    manifest, salt, truth = open_truth(StoreLocation(url))
    assert isinstance(manifest, CtfManifest) and salt
    assert [pair.id for pair in manifest.pairs] == list(range(1, 12))
    assert all(
        isinstance(pair, CtfPair) and isinstance(pair, cv.PairSpec) for pair in manifest.pairs
    )
    assert (manifest.k_short, manifest.k_long, manifest.modes) == (20, 20, 16)
    assert manifest.test_shapes() == {name: array.shape for name, array in truth.items()}
    sweep, initial = manifest.pairs[9], manifest.pairs[10]
    assert (sweep.task, initial.task) == ("parametric_sweep", "new_initial_conditions")
    assert sweep.parameters is not None and sweep.parameters.train == (20.0, 60.0)
    assert sweep.parameters.test == 35.0 and initial.parameters is None
    assert manifest.pairs[7].inputs == ("X6train", "X7train", "X8train", "X9train")
    assert manifest.truth == keys.TRUTH_PUBLIC and manifest.truth_note == cv.PUBLIC_TRUTH_NOTE
    assert manifest.sensor_grid == {"n_x": 6, "n_y": 8, "spacing_m": 100.0}
    assert manifest.truth_sha256 is not None and set(manifest.truth_sha256) == set(truth)
    blocks = manifest.truth_sha256_blocks
    assert blocks is not None and blocks.block_rows > 0 and set(blocks.roots) == set(truth)
    assert [name for name, _, _ in cv.scored_metrics(manifest.pairs)] == [
        *cv.SCORE_NAMES,
        *("E13", "E14", "E15", "E16"),
    ]


def test_the_validation_manifest_scores_the_public_targets(bundles):
    url = str(bundles["tiny"] / "public.zarr")
    public = CtfManifest.from_attrs(storage.read_attrs(StoreLocation(url)), url)
    validation = public.validation_manifest(url)
    assert [pair.test for pair in validation.pairs] == [f"X{i}val" for i in range(1, 10)]
    assert validation.test_shapes()["X1val"] == (40, 48)
    assert validation.k_short == min(public.k_short, 40)
    without = CtfManifest.from_json(
        {key: value for key, value in public.to_json().items() if key != "validation"}, url
    )
    with pytest.raises(InvalidInput, match="no validation targets"):
        without.validation_manifest(url)


def test_keys_it_does_not_know_are_kept(bundles):
    url = str(bundles["tiny"] / "truth.zarr")
    written = storage.read_attrs(StoreLocation(url))[cv.ATTR_CTF]
    document = copy.deepcopy(written)
    document["organiser_note"] = {"season": 3}
    document["pairs"][0]["hint"] = "none"
    manifest = CtfManifest.from_json(document, url)
    assert manifest.extra == {"organiser_note": {"season": 3}}
    assert manifest.pairs[0].extra == {"hint": "none"}
    assert manifest.to_json() == document


def _broken(written: dict, change) -> dict:
    document = copy.deepcopy(written)
    change(document)
    return document


MALFORMED = {
    "a pair without its test array": (
        lambda d: d["pairs"][2].pop("test"),
        "manifest field 'pairs[2].test' is missing",
    ),
    "a shape given as text": (
        lambda d: d["pairs"][0].update(shape="100x48"),
        "manifest field 'pairs[0].shape' must be [time steps, sensors]",
    ),
    "k_short as text": (
        lambda d: d.update(k_short="20"),
        "manifest field 'k_short' must be an integer, got '20'",
    ),
    "modes as a boolean": (
        lambda d: d.update(modes=True),
        "manifest field 'modes' must be an integer, got True",
    ),
    "an unknown metric": (
        lambda d: d["pairs"][1].update(metrics=["short"]),
        "manifest field 'pairs[1].metrics' must be a list of short_time",
    ),
    "pairs not a list": (
        lambda d: d.update(pairs={"X1test": [100, 48]}),
        "manifest field 'pairs' must be a list of JSON objects",
    ),
    "a pair not an object": (
        lambda d: d["pairs"].__setitem__(4, "X5test"),
        "field 'pairs[4]' must be a JSON object",
    ),
    "a validation target without its source": (
        lambda d: d["validation"][3].pop("source"),
        "manifest field 'validation[3].source' is missing",
    ),
    "a block root not a string": (
        lambda d: d["truth_sha256_blocks"].update(X1test=7),
        "manifest field 'truth_sha256_blocks.X1test' must be a hex string",
    ),
    "parameters without a name": (
        lambda d: d["pairs"][7]["parameters"].pop("name"),
        "manifest field 'pairs[7].parameters.name' is missing",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_manifest_names_the_file_and_the_field(bundles, case):
    url = str(bundles["tiny"] / "truth.zarr")
    change, problem = MALFORMED[case]
    document = _broken(storage.read_attrs(StoreLocation(url))[cv.ATTR_CTF], change)
    with pytest.raises(InvalidInput) as raised:
        CtfManifest.from_json(document, url)
    assert raised.value.what == url and problem in raised.value.problem


def test_a_group_without_a_manifest_is_refused():
    with pytest.raises(InvalidInput, match="no 'ctf' manifest attr") as raised:
        CtfManifest.from_attrs({cv.ATTR_COMPLETE: True}, "bundle.zarr")
    assert raised.value.what == "bundle.zarr"


def _with_manifest(source: Path, target: Path, change) -> Path:
    """A copy of the bundle group `source` whose stored manifest is changed by `change`."""
    shutil.copytree(source, target)
    metadata = json.loads((target / "zarr.json").read_text())
    change(metadata["attributes"][cv.ATTR_CTF])
    (target / "zarr.json").write_text(json.dumps(metadata))
    return target


def test_a_stored_malformed_manifest_is_refused_by_the_referee_and_the_command_line(
    bundles, tmp_path, capsys
):
    truth = _with_manifest(
        bundles["tiny"] / "truth.zarr",
        tmp_path / "truth.zarr",
        lambda manifest: manifest["pairs"][5].pop("shape"),
    )
    with pytest.raises(InvalidInput, match=r"'pairs\[5\]\.shape' is missing") as raised:
        open_truth(StoreLocation(truth))
    assert raised.value.what == str(truth)
    _, _, values = open_truth(StoreLocation(bundles["tiny"] / "truth.zarr"))
    submission = tmp_path / "noisy.npz"
    np.savez(submission, **noisy_copy({n: a.compute() for n, a in values.items()}, 1, 0.3))
    argv = ["score", "ctf", "--truth", str(truth), "--submission", str(submission), "--quiet"]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert str(truth) in err and "manifest field 'pairs[5].shape' is missing" in err


# --- results ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(bundles) -> dict[str, dict]:
    """{kind: a real result's JSON object}: scored against the tiny and the extended truth, and
    against the tiny bundle's validation targets."""
    found = {}
    for kind in ("tiny", "extended"):
        truth = StoreLocation(bundles[kind] / "truth.zarr")
        _, _, values = open_truth(truth)
        submission = noisy_copy({n: a.compute() for n, a in values.items()}, 2, 0.3)
        (found[kind],) = score_ctf(truth, {f"noisy-{kind}": submission}, quiet=True)
    public = str(bundles["tiny"] / "public.zarr")
    targets = CtfManifest.from_attrs(storage.read_attrs(StoreLocation(public)), public)
    zeros = {
        name: np.zeros(shape)
        for name, shape in targets.validation_manifest(public).test_shapes().items()
    }
    (found["validation"],) = score_validation(StoreLocation(public), {"zeros": zeros}, quiet=True)
    # As a results file holds them.
    return {kind: json.loads(json.dumps(result)) for kind, result in found.items()}


@pytest.mark.parametrize("kind", ["tiny", "extended", "validation"])
def test_a_real_result_reads_and_gives_back_the_same_json(results, kind):
    written = results[kind]
    scored = CtfResult.from_json(written, "scores.json")
    assert scored.to_json() == written
    assert json.dumps(scored.to_json()) == json.dumps(written)
    assert scored.extra == {} and scored.scores == written["scores"]


def test_the_typed_result_holds_what_the_readers_use(results):
    tiny, extended = (CtfResult.from_json(results[k], "scores.json") for k in ("tiny", "extended"))
    assert tiny.truth_sha256_verified is True and tiny.convention == "reference"
    assert tiny.metrics is not None and tiny.metrics["E3"] == cv.METRIC_RECON
    public = tiny.public_part()
    assert public is not None and set(public.scores) == set(cv.SCORE_NAMES)
    assert tiny.split and tiny.parts is not None and set(tiny.parts) == {"public", "private"}
    assert tiny.extended_avg_score is None and tiny.truth is None
    assert extended.extended_avg_score is not None and "E16" in extended.scores
    assert extended.truth == keys.TRUTH_PUBLIC and extended.truth_note == cv.PUBLIC_TRUTH_NOTE
    validation = CtfResult.from_json(results["validation"], "scores.json")
    assert validation.validation is True and validation.truth_sha256_verified is None


MALFORMED_RESULTS = {
    "a score as text": (
        lambda r: r["scores"].update(E3="12.5"),
        "result field 'scores.E3' must be a number, got '12.5'",
    ),
    "no name": (lambda r: r.pop("name"), "result field 'name' is missing"),
    "a part without scores": (
        lambda r: r["parts"]["public"].pop("scores"),
        "result field 'parts.public.scores' is missing",
    ),
    "an unknown metric": (
        lambda r: r["metrics"].update(E1="short"),
        "result field 'metrics' must be an object of short_time",
    ),
    "verified as text": (
        lambda r: r.update(truth_sha256_verified="yes"),
        "result field 'truth_sha256_verified' must be true, false or null",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_RESULTS))
def test_a_malformed_result_names_the_field(results, case):
    change, problem = MALFORMED_RESULTS[case]
    with pytest.raises(InvalidInput) as raised:
        CtfResult.from_json(_broken(results["tiny"], change), "scores.json")
    assert raised.value.what == "scores.json" and problem in raised.value.problem


def test_the_public_score_reads_the_result_through_its_type(results):
    public = CtfResult.from_json(results["tiny"], "scores.json").public_part()
    assert public is not None
    kept = [public.scores[f"E{i}"] for i in (1, 3, 5, 7, 9, 11, 12)]  # short-time, reconstruction
    assert release.public_score(results["tiny"]) == pytest.approx(np.mean(kept))
    broken = _broken(results["tiny"], lambda r: r["parts"]["public"]["scores"].update(E1=[1]))
    with pytest.raises(InvalidInput, match=r"'parts\.public\.scores\.E1' must be a number"):
        release.public_score(broken)
