"""The secret comes one way (`keys.resolve_secret`) and a truth anyone can regenerate is marked
and refused as a challenge's truth: through the real command line, on small generated stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import TINY_LAYOUT_YAML

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.build import engine
from seisctf.cli import main
from seisctf.cluster import SCHEDULER_ENV
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

SECRET = "public-truth-test-secret-0123456789"
OTHER_SECRET = "another-organiser-secret-9876543210"
EXIT_INVALID_INPUT = 3
SMALL = ["--sensors", "48", "--duration", "300", "--quiet"]


@pytest.fixture(autouse=True)
def shared_cluster(dask_cluster, monkeypatch) -> None:
    """Every command here runs on the session's Dask cluster ($SEISCTF_SCHEDULER), not on an
    embedded one started per command: the secrets are drawn and resolved by the command itself.
    A result that hung on a worker's state would break the equalities between runs below."""
    monkeypatch.setenv(SCHEDULER_ENV, dask_cluster.address)


@pytest.fixture(scope="module")
def layout_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("layout") / "tiny.yaml"
    path.write_text(TINY_LAYOUT_YAML)
    return str(path)


def synth(out: Path, *options: str) -> np.ndarray:
    assert main(["synth", "global", "--out", str(out), *SMALL, *options]) == 0
    return zarr.open_group(str(out), mode="r")["u"][...]


def provenance(url: Path) -> dict:
    return storage.read_attrs(StoreLocation(url))[cv.ATTR_PROVENANCE]


def tasks(store: Path, root: Path, layout: str, *options: str) -> int:
    public, truth = root / "public.zarr", root / "truth.zarr"
    argv = ["tasks", str(store), "--public", str(public), "--truth", str(truth)]
    return main([*argv, "--layout", layout, "--quiet", *options])


# --- the resolver's order ------------------------------------------------------------------------


def test_the_secret_comes_from_the_flag_then_the_environment_then_kept_then_default_then_drawn(
    monkeypatch,
):
    monkeypatch.delenv(keys.SECRET_ENV, raising=False)
    drawn = [keys.resolve_secret(None) for _ in range(2)]
    assert all(secret.drawn and len(secret.value) == 64 for secret in drawn)
    assert drawn[0].value != drawn[1].value  # fresh random bits, never a fixed default
    assert keys.resolve_secret(None, default=keys.DEMO_SECRET).origin == "published"
    assert keys.resolve_secret(None, kept="k" * 30, default=keys.DEMO_SECRET).origin == "kept"
    monkeypatch.setenv(keys.SECRET_ENV, OTHER_SECRET)
    from_env = keys.resolve_secret(None, kept="k" * 30, default=keys.DEMO_SECRET)
    assert (from_env.value, from_env.origin) == (OTHER_SECRET, "$SEISCTF_SECRET")
    given = keys.resolve_secret(SECRET, kept="k" * 30, default=keys.DEMO_SECRET)
    assert (given.value, given.origin) == (SECRET, "--secret") and not given.public
    assert SECRET not in repr(given) and SECRET not in str(given)
    assert keys.resolve_secret(keys.DEMO_SECRET).public  # however the published one is given
    monkeypatch.setenv(keys.SECRET_ENV, "short")
    with pytest.raises(InvalidInput, match=r"\$SEISCTF_SECRET"):
        keys.resolve_secret(None)


def test_synth_without_a_secret_draws_one_per_run_and_keeps_it_in_its_store(tmp_path, monkeypatch):
    """Two people typing the same public command get two different wavefields (no seed 0), and
    each store keeps the secret it was drawn from; a given secret is not written anywhere."""
    monkeypatch.delenv(keys.SECRET_ENV, raising=False)
    first, second = synth(tmp_path / "a.zarr"), synth(tmp_path / "b.zarr")
    assert not np.allclose(first, second)
    kept = storage.read_attrs(StoreLocation(tmp_path / "a.zarr"))[cv.ATTR_CTF_SECRET]
    assert len(kept) == 64
    assert provenance(tmp_path / "a.zarr")[cv.PROVENANCE_TRUTH] == keys.TRUTH_HIDDEN
    # The kept secret regenerates the store: it is the one the seeds came from.
    np.testing.assert_array_equal(synth(tmp_path / "again.zarr", "--secret", kept), first)
    assert cv.ATTR_CTF_SECRET not in storage.read_attrs(StoreLocation(tmp_path / "again.zarr"))

    monkeypatch.setenv(keys.SECRET_ENV, OTHER_SECRET)
    from_env = synth(tmp_path / "env.zarr")
    np.testing.assert_array_equal(synth(tmp_path / "env2.zarr"), from_env)
    flag = synth(tmp_path / "flag.zarr", "--secret", SECRET)  # the flag beats the environment
    assert not np.allclose(flag, from_env)
    monkeypatch.setenv(keys.SECRET_ENV, SECRET)
    np.testing.assert_array_equal(synth(tmp_path / "flag-env.zarr"), flag)


# --- public truth: marked, refused, stamped on request ----------------------------------------


def test_a_store_from_an_explicit_seed_is_refused_by_tasks_unless_public_truth(
    tmp_path, layout_file, capsys
):
    store = tmp_path / "seeded.zarr"
    seeded = synth(store, "--seed", "7")
    np.testing.assert_array_equal(synth(tmp_path / "seeded-again.zarr", "--seed", "7"), seeded)
    recorded = provenance(store)
    assert recorded[cv.PROVENANCE_TRUTH] == keys.TRUTH_PUBLIC
    assert "explicit seed" in recorded[cv.PROVENANCE_TRUTH_REASON]
    assert "7" not in recorded[cv.PROVENANCE_TRUTH_REASON]
    capsys.readouterr()

    refused = tmp_path / "refused"
    assert tasks(store, refused, layout_file) == EXIT_INVALID_INPUT
    error = capsys.readouterr().err
    assert f"{store}: its truth is public (generated from an explicit seed" in error
    assert "--public-truth" in error and "--secret" in error
    assert not refused.exists() or not any(refused.iterdir())  # nothing written

    taught = tmp_path / "teaching"
    assert tasks(store, taught, layout_file, "--public-truth") == 0
    for group in ("public.zarr", "truth.zarr"):
        manifest = storage.read_attrs(StoreLocation(taught / group))[cv.ATTR_CTF]
        assert manifest[cv.PROVENANCE_TRUTH] == keys.TRUTH_PUBLIC
        assert manifest["truth_note"] == cv.PUBLIC_TRUTH_NOTE
    pages = score_and_render(taught)
    assert all(cv.PUBLIC_TRUTH_NOTE in text for text in pages.values()), sorted(pages)


def score_and_render(root: Path) -> dict[str, str]:
    """The zeros baseline of the bundle in `root` scored into a leaderboard, rendered in both
    views: every page's text, and the printed table, by name."""
    zeros, db = root / "zeros.zarr", root / "lb.sqlite"
    assert main(["baseline", "zeros", "--public", str(root / "public.zarr"), "--out", str(zeros),
                 "--quiet"]) == 0  # fmt: skip
    truth = str(root / "truth.zarr")
    assert main(["score", "ctf", "--truth", truth, "--submission", str(zeros), "--db", str(db),
                 "--json", str(root / "scores.json"), "--quiet"]) == 0  # fmt: skip
    pages = {}
    for view in ([], ["--final"]):
        site = root / f"site{''.join(view)}"
        assert main(["leaderboard", "--db", str(db), "--html", str(site), *view]) == 0
        pages |= {f"{site.name}/{page.name}": page.read_text() for page in site.glob("*.html")}
    return pages


def test_a_store_from_a_secret_gives_an_unstamped_bundle(tmp_path, layout_file, monkeypatch):
    monkeypatch.delenv(keys.SECRET_ENV, raising=False)
    store = tmp_path / "hidden.zarr"
    synth(store, "--secret", SECRET)
    assert tasks(store, tmp_path, layout_file) == 0
    manifest = storage.read_attrs(StoreLocation(tmp_path / "public.zarr"))[cv.ATTR_CTF]
    assert cv.PROVENANCE_TRUTH not in manifest and "truth_note" not in manifest
    pages = score_and_render(tmp_path)
    assert len(pages) == 4 and not any(cv.PUBLIC_TRUTH_NOTE in text for text in pages.values())
    truth_attrs = storage.read_attrs(StoreLocation(tmp_path / "truth.zarr"))
    assert len(truth_attrs[cv.ATTR_CTF_SECRET]) == 64  # tasks drew its own secret and kept it
    # ... and the bundle's secret as the published one makes it public again.
    assert tasks(store, tmp_path / "demo", layout_file, "--secret", keys.DEMO_SECRET) == 3


def recipe(layout: str, source: str) -> str:
    return (
        f"recipe: 1\nsource:\n{source}splits:\n  ctf:\n    layout: {layout}\n"
        "outputs:\n  ctf_bundle:\n    public: public.zarr\n    truth: truth.zarr\n"
    )


def test_build_refuses_a_public_source_unless_public_truth(tmp_path, layout_file, monkeypatch):
    """A recipe's explicit generator seed, and a `store` source whose store is marked public,
    are refused by `build` (exit 3 naming the recipe); `--public-truth` stamps the bundle."""
    monkeypatch.delenv(keys.SECRET_ENV, raising=False)
    seeded = tmp_path / "seeded.yaml"
    seeded.write_text(
        recipe(
            layout_file, "  synthetic_global:\n    sensors: 48\n    duration_s: 300\n    seed: 3\n"
        )  # fmt: skip
    )
    out = tmp_path / "out"
    argv = ["build", str(seeded), "--workdir", str(out), "--quiet"]
    assert main(argv) == EXIT_INVALID_INPUT
    assert not (out / "public.zarr").exists()
    assert main([*argv, "--public-truth"]) == 0
    manifest = storage.read_attrs(StoreLocation(out / "public.zarr"))[cv.ATTR_CTF]
    assert manifest["truth_note"] == cv.PUBLIC_TRUTH_NOTE

    store = tmp_path / "public-store.zarr"
    synth(store, "--seed", "5")
    from_store = tmp_path / "from-store.yaml"
    from_store.write_text(recipe(layout_file, f"  store:\n    url: {store}\n"))
    with pytest.raises(InvalidInput, match="its truth is public"):
        engine.build_file(from_store, workdir=tmp_path / "o2", quiet=True)
    built = engine.build_file(from_store, workdir=tmp_path / "o3", quiet=True, public_truth=True)
    assert built.secret.drawn
    assert (
        storage.read_attrs(StoreLocation(tmp_path / "o3" / "public.zarr"))[cv.ATTR_CTF][
            cv.PROVENANCE_TRUTH
        ]
        == keys.TRUTH_PUBLIC
    )
