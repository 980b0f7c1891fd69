"""`seisctf build RECIPE` checks its recipe before any cluster starts, as the other verbs check
their options: its schema and URLs, every local output the recipe writes probed writable (a
read-only --workdir was found only once the cluster had started), and a synthetic source's data
sized from its parameters and refused where it cannot fit (`--yes-really-large` writes anyway).
Run as a user runs them (`python -m seisctf.cli`) with no scheduler reachable
(`test_cli_first_answers.seisctf`): a command that reached for its cluster prints its `dask:`
line and fails there."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from mounts import namespace_requirement, run_read_only
from test_cli_first_answers import (
    NO_SCHEDULER,
    UNPARSABLE_SCHEDULER,
    assert_answered_before_the_cluster,
    seisctf,
)

from seisctf.build.engine import shipped

GLOBAL = shipped("demo-global").read_text()
READ_ONLY = "Read-only file system" if os.geteuid() == 0 else "Permission denied"
# The shipped global recipe with 10^8 sensors: 10 realisations × 3000 steps × 10^8 × 4 bytes.
HUGE_BYTES = 10 * 3000 * 100_000_000 * 4


def recipe(tmp_path, text: str) -> str:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return str(path)


BAD_RECIPES = {
    "schema": (("sensors: 2048", "sensors: many"), ":14: source.synthetic_global.sensors: 'many'"),
    "URL typo": (
        ("url: private/wavefield-global.zarr", "url: s3://demo//typo.zarr"),
        "outputs.store.url: an empty path segment ('//'); did you mean s3://demo/typo.zarr?",
    ),
}


@pytest.mark.parametrize("case", BAD_RECIPES)
def test_a_bad_recipe_is_refused_before_the_cluster(case, tmp_path):
    (old, new), fragment = BAD_RECIPES[case]
    path = recipe(tmp_path, GLOBAL.replace(old, new))
    run, _ = seisctf("build", path, "--workdir", str(tmp_path / "w"))
    assert_answered_before_the_cluster(run, path, fragment)
    assert not (tmp_path / "w").exists()


def test_a_read_only_workdir_is_refused_before_the_cluster(tmp_path):
    if os.geteuid() == 0 and (why := namespace_requirement()):
        pytest.skip(f"a read-only folder needs a read-only bind mount as root: {why}")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    argv = [sys.executable, "-m", "seisctf.cli", "build", str(shipped("demo-global"))]
    env = {**os.environ, "SEISCTF_SCHEDULER": NO_SCHEDULER, "SEISCTF_SECRET": "s" * 32}
    run = run_read_only(read_only, [*argv, "--workdir", str(read_only)], env=env, timeout=120)
    store = read_only / "private/wavefield-global.zarr"
    assert_answered_before_the_cluster(
        run, f"{shipped('demo-global')}: output {store}: cannot write in {read_only}: {READ_ONLY}"
    )
    assert list(read_only.iterdir()) == []


def test_a_synthesis_too_large_is_refused_with_its_estimate(tmp_path):
    if shutil.disk_usage(tmp_path).free >= HUGE_BYTES:
        pytest.skip("this file system has room for the 12 TB the test expects refused")
    path = recipe(tmp_path, GLOBAL.replace("sensors: 2048", "sensors: 100000000"))
    store = tmp_path / "w/private/wavefield-global.zarr"
    build = ["build", path, "--workdir", str(tmp_path / "w")]
    run, _ = seisctf(*build)
    assert_answered_before_the_cluster(
        run,
        f"{store}: the recipe's synthetic_global source writes about 12.0 TB (10 realisations "
        "× 3000 steps × 100000000 sensors × 4 bytes; uncompressed)",
        f"free at {tmp_path}; give --yes-really-large",
    )
    # Forced, it reaches for its cluster, whose address has no port: it stops there.
    forced, _ = seisctf(*build, "--yes-really-large", scheduler=UNPARSABLE_SCHEDULER)
    first, *rest = forced.stderr.strip().splitlines()
    assert first.startswith(f"seisctf: {store}: the recipe's synthetic_global source writes")
    assert first.endswith("writing it (--yes-really-large)")
    assert f"'{UNPARSABLE_SCHEDULER}' is not a Dask scheduler address" in rest[-1]
    assert "Traceback" not in forced.stderr
    assert not store.exists()
