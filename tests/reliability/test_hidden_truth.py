"""Hidden truth: the global and DAS demos (small sizes, the real command line on a shared
cluster, a test secret) give participants nothing that holds truth values or truth statistics,
and the referee refuses a truth that no longer matches its commitment.

What a participant receives: the public bundle (arrays, attrs with the manifest), the docs and
recipes shipped with seisctf, the messages of scoring refused submissions, validation scores and
released scores. Searched for: any run of `RUN` consecutive truth samples (along time or space,
bit-exact, at any offset, in any public array), and in every text the secret, the commitment
salt, the derived seeds and the truth's statistics (mean, RMS, norms of each array and of each
scored window, extremes, per-sensor mean and RMS) written to 8 or more significant digits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import TINY_LAYOUT_YAML

from seisctf import conventions as cv
from seisctf import keys
from seisctf.location import StoreLocation

TESTS = Path(__file__).parents[1]
REPOSITORY = TESTS.parent
SECRET = "hidden-truth-test-secret-2c9e41"
DATASETS = ("global", "das")
SMALL = {"global": ["--sensors", "64", "--duration", "300"], "das": ["--sensors", "64"]}
RUN = 8  # consecutive samples


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "seisctf.cli", *args]


def _arrays(url: Path) -> dict[str, np.ndarray]:
    return {name: array[...] for name, array in zarr.open_group(str(url), mode="r").arrays()}


@pytest.fixture(scope="module")
def demos(tmp_path_factory, dask_cluster) -> dict[str, Path]:
    """The workdir of each demo, built at once by two `seisctf demo` processes."""
    root = tmp_path_factory.mktemp("hidden-truth")
    layout = root / "tiny.yaml"
    layout.write_text(TINY_LAYOUT_YAML)
    options = ["--layout", str(layout), "--secret", SECRET, "--quiet"]
    options += ["--scheduler", dask_cluster.address]
    runs = {
        name: subprocess.Popen(
            _cli("demo", "--dataset", name, "--workdir", str(root / name), *SMALL[name], *options),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in DATASETS
    }
    for name, run in runs.items():
        _, err = run.communicate(timeout=900)
        assert run.returncode == 0, (name, err)
    return {name: root / name for name in DATASETS}


def _paths(workdir: Path, name: str) -> dict[str, Path]:
    return {
        "public": workdir / "public" / f"bundle-{name}.zarr",
        "truth": workdir / "private" / f"truth-{name}.zarr",
        "baseline": workdir / "submissions" / name / "persistence.zarr",
    }


def _bad_submissions(baseline: Path, root: Path) -> list[Path]:
    """Refused submissions made from a baseline: a NaN, a wrong shape, a missing array, an
    integer array, a value of 1e300 (scored after rescaling: its message path differs)."""
    arrays = _arrays(baseline)
    edits = {
        "nan": lambda a: {**a, "X3test": np.where(np.arange(a["X3test"].size).reshape(
            a["X3test"].shape) == 7, np.nan, a["X3test"])},
        "short": lambda a: {**a, "X5test": a["X5test"][:-1]},
        "missing": lambda a: {k: v for k, v in a.items() if k != "X8test"},
        "integer": lambda a: {**a, "X2test": a["X2test"].astype(np.int32)},
        "huge-nan": lambda a: {**a, "X1test": np.full(a["X1test"].shape, 1e300),
                               "X9test": a["X9test"] * np.nan},
    }  # fmt: skip
    paths = []
    for label, edit in edits.items():
        path = root / f"{label}.npz"
        np.savez(path, **edit(arrays))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def participant_view(demos, tmp_path_factory, dask_cluster) -> dict[str, dict]:
    """Per dataset: the public arrays and every text a participant receives, and the results
    of the commands that made them."""
    root = tmp_path_factory.mktemp("participant")
    commands, owners = [], []
    for name, workdir in demos.items():
        paths = _paths(workdir, name)
        public = _arrays(paths["public"])
        validation = root / f"{name}-val.npz"
        np.savez(validation, **{f"X{i}val": 0.5 * public[f"X{i}val"] for i in range(1, 10)})
        common = ["--quiet", "--scheduler", dask_cluster.address]
        commands.append(["score", "ctf", "--validation", "--public", str(paths["public"]),
                         "--submission", str(validation), *common])  # fmt: skip
        commands.append(["score", "ctf", "--truth", str(paths["truth"]), "--submission",
                         str(paths["baseline"]), "--release", "--participant", "p",
                         "--quota-db", str(root / f"{name}-quota.sqlite"), *common])  # fmt: skip
        owners += [name, name]
        (root / name).mkdir()
        for bad in _bad_submissions(paths["baseline"], root / name):
            commands.append(["score", "ctf", "--truth", str(paths["truth"]), "--submission",
                             str(bad), *common])  # fmt: skip
            owners.append(name)
    (root / "commands.json").write_text(json.dumps(commands))
    subprocess.run(
        [sys.executable, str(TESTS / "cli_batch.py"), str(root / "commands.json"),
         str(root / "results.jsonl"), "300"], check=True, timeout=1800,
    )  # fmt: skip
    results = [json.loads(line) for line in (root / "results.jsonl").read_text().splitlines()]
    views = {}
    for name, workdir in demos.items():
        paths = _paths(workdir, name)
        mine = [r for r, owner in zip(results, owners, strict=True) if owner == name]
        metadata = [p.read_text() for p in sorted(paths["public"].rglob("zarr.json"))]
        views[name] = {
            "arrays": _arrays(paths["public"]),
            "results": mine,
            "texts": metadata + [r["stdout"] + r["stderr"] for r in mine],
        }
    return views


def shipped_docs() -> list[str]:
    """What seisctf ships besides code: README, docs, recipes."""
    files = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    recipes = sorted((REPOSITORY / "seisctf" / "build" / "shipped").glob("*.yaml"))
    assert len(recipes) == 3, "the shipped recipes moved: point this at them"
    return [file.read_text() for file in [*files, *recipes]]


# --- the detectors ------------------------------------------------------------------------------


def runs_of(array: np.ndarray, length: int = RUN) -> set[bytes]:
    """Every run of `length` consecutive float32 values along either axis (bit patterns), except
    constant runs (zeros, padding) that any array may hold."""
    values = np.ascontiguousarray(array, dtype=np.float32)
    found: set[bytes] = set()
    for lines in (values.T, values):  # along time (per sensor), along space (per row)
        if lines.shape[1] < length:
            continue
        windows = np.lib.stride_tricks.sliding_window_view(lines, length, axis=1)
        windows = np.ascontiguousarray(windows).reshape(-1, length)
        varied = windows[(windows != windows[:, :1]).any(axis=1)]
        found.update(row.tobytes() for row in varied)
    return found


def significant(text: str) -> int:
    digits = text.split("e")[0].replace("-", "").replace(".", "").lstrip("0")
    return len(digits)


def spellings(value: float) -> set[str]:
    """How a statistic may be written: repr of float64 and float32, %.8g … %.12g; only those
    with 8 or more significant digits (shorter ones occur by chance)."""
    found = {repr(float(value)), repr(float(np.float32(value)))}
    found |= {f"{value:.{digits}g}" for digits in range(8, 13)}
    return {text for text in found if significant(text) >= 8}


def truth_statistics(truth: dict[str, np.ndarray], manifest: dict) -> dict[str, float]:
    """Per truth array: mean, RMS, std, sums, norms, extremes, median, the Frobenius and 2-norms
    of its scored windows (first k_short, last k_long rows), per-sensor mean and RMS."""
    stats: dict[str, float] = {}
    for name, array in truth.items():
        values = array.astype(np.float64)
        whole = {"mean": values.mean(), "rms": np.sqrt((values**2).mean()), "std": values.std(),
                 "sum": values.sum(), "sum_squares": (values**2).sum(),
                 "frobenius": np.linalg.norm(values), "max": values.max(), "min": values.min(),
                 "max_abs": np.abs(values).max(), "median": np.median(values)}  # fmt: skip
        for label, window in (("short", values[: manifest["k_short"]]),
                              ("long", values[-manifest["k_long"] :])):  # fmt: skip
            whole[f"{label}_frobenius"] = np.linalg.norm(window)
            whole[f"{label}_2norm"] = np.linalg.norm(window, 2)
        stats |= {f"{name}.{key}": float(value) for key, value in whole.items()}
        for sensor in range(values.shape[1]):
            column = values[:, sensor]
            stats[f"{name}.mean[{sensor}]"] = float(column.mean())
            stats[f"{name}.rms[{sensor}]"] = float(np.sqrt((column**2).mean()))
    return stats


def secrets_of(truth_url: Path) -> dict[str, str]:
    attrs = dict(zarr.open_group(str(truth_url), mode="r").attrs)
    found = {"secret": SECRET, "salt": attrs[cv.ATTR_CTF_SALT]}
    found["derived salt"] = keys.derive_salt(SECRET)
    for purpose in ("synth/global", "synth/das", *(f"noise/{n}" for n in cv.TRAIN_NAMES)):
        found[purpose] = str(keys.derive_seed(SECRET, purpose))
    if "ctf_secret" in attrs:
        found["ctf_secret"] = str(attrs["ctf_secret"])
    return found


# --- the tests ----------------------------------------------------------------------------------


def test_run_detector_finds_a_planted_truth_run():
    rng = np.random.default_rng(0)
    truth, public = rng.standard_normal((50, 16)), rng.standard_normal((60, 16))
    assert not runs_of(truth) & runs_of(public)
    public[20 : 20 + RUN, 9] = truth[30 : 30 + RUN, 4]  # one sensor's samples, elsewhere
    assert runs_of(truth) & runs_of(public)


@pytest.mark.parametrize("name", DATASETS)
def test_no_public_array_holds_a_run_of_truth_samples(name, demos, participant_view):
    truth = _arrays(_paths(demos[name], name)["truth"])
    public_runs = set().union(*(runs_of(a) for a in participant_view[name]["arrays"].values()))
    assert len(public_runs) > 10_000
    for test_name, array in truth.items():
        assert not runs_of(array) & public_runs, (name, test_name)


@pytest.mark.parametrize("name", DATASETS)
def test_no_text_a_participant_gets_holds_a_secret_or_truth_statistic(
    name, demos, participant_view
):
    paths = _paths(demos[name], name)
    view = participant_view[name]
    codes = [result["code"] for result in view["results"]]
    assert codes == [0, 0, 3, 3, 3, 3, 3], [r["stderr"] for r in view["results"]]
    released = json.loads(view["results"][1]["stdout"])
    assert "raw_scores" not in released and released["truth_sha256_verified"] is True
    texts = "\n".join(view["texts"] + shipped_docs())
    for label, secret in secrets_of(paths["truth"]).items():
        assert secret not in texts, label
    public_attrs = json.dumps(dict(zarr.open_group(str(paths["public"]), mode="r").attrs))
    for word in ('"seed', "secret", "salt"):
        assert word not in public_attrs.lower(), word
    group = zarr.open_group(str(paths["truth"]), mode="r")
    stats = truth_statistics(_arrays(paths["truth"]), dict(group.attrs)[cv.ATTR_CTF])
    leaks = [(label, text) for label, value in stats.items() for text in spellings(value)
             if text in texts]  # fmt: skip
    assert not leaks, leaks[:10]
    assert len(stats) > 1000
    # Positive control: a statistic stored the way a careless writer would is found.
    rms = stats["X1test.rms"]
    for careless in (json.dumps({"rms": rms}), json.dumps({"rms": float(np.float32(rms))})):
        assert any(text in careless for text in spellings(rms)), careless


def test_altered_truth_is_refused_by_the_referee(demos, tmp_path, dask_cluster):
    """One value of X3test moved by one unit in the last place: `score ctf` exits 3 naming it
    and writes nothing; so does a changed salt, or a manifest without commitment."""
    paths = _paths(demos["global"], "global")
    altered = tmp_path / "altered.zarr"
    shutil.copytree(paths["truth"], altered)
    array = zarr.open_array(str(altered / "X3test"), mode="r+")
    array[3, 7] = np.nextafter(array[3, 7], np.float32(np.inf))
    out = tmp_path / "result.json"
    run = subprocess.run(
        _cli("score", "ctf", "--truth", str(altered), "--submission", str(paths["baseline"]),
             "--json", str(out), "--scheduler", dask_cluster.address, "--quiet"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    assert f"{altered}: X3test: does not hash to the published commitment" in run.stderr
    assert "Traceback" not in run.stderr and not out.exists() and run.stdout == ""

    from seisctf import storage
    from seisctf.errors import InvalidInput
    from seisctf.scoring.ctf import score_ctf

    changes = (
        ({cv.ATTR_CTF_SALT: "00" * 16}, "X1test, X2test"),
        ({"drop": "truth_sha256"}, "publishes no truth commitment"),
    )
    for change, message in changes:
        copy = tmp_path / f"copy-{len(message)}.zarr"
        shutil.copytree(paths["truth"], copy)
        group = zarr.open_group(str(copy), mode="r+")
        attrs = dict(group.attrs)
        if "drop" in change:
            manifest = dict(attrs[cv.ATTR_CTF])
            manifest.pop("truth_sha256")
            manifest.pop("truth_sha256_blocks")
            attrs[cv.ATTR_CTF] = manifest
        else:
            attrs |= change
        storage.finish_group(StoreLocation(copy), attrs)
        with pytest.raises(InvalidInput, match=message):
            score_ctf(
                StoreLocation(copy), {"baseline": StoreLocation(paths["baseline"])}, quiet=True
            )
