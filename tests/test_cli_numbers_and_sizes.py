"""Numbers and output sizes, answered before any work: a numeric option out of its range
(`synth global --sensors 0`, a negative seed, a NaN rate) and an output that cannot fit where
it goes (above the free space of a local target, or above the stated ceiling of an object
store) are refused in one line with exit 3 before the cluster starts; `--yes-really-large`
writes anyway, printing the estimate.

Run as a user runs them (`python -m seisctf.cli`) with `$SEISCTF_SCHEDULER` at an address where
nothing listens (`test_cli_first_answers.seisctf`): a command that reached for its cluster would
print its `dask:` line and fail there."""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import pytest
from mounts import namespace_requirement, run_on_tmpfs
from test_cli_first_answers import (
    MAX_SECONDS,
    UNPARSABLE_SCHEDULER,
    assert_answered_before_the_cluster,
    seisctf,
)

from seisctf.cli._output_size import UNKNOWN_ROOM_BYTES

# (argv, fragments of the one line): each number is outside its option's range.
OUT_OF_RANGE = {
    "sensors 0": (
        ["synth", "global", "--sensors", "0", "--out", "w.zarr"],
        ["--sensors: expected an integer ≥ 1, got 0"],
    ),
    "negative seed": (
        ["synth", "global", "--seed", "-1", "--out", "w.zarr"],
        ["--seed: expected an integer ≥ 0, got -1"],
    ),
    "NaN duration": (
        ["synth", "global", "--duration", "nan", "--out", "w.zarr"],
        ["--duration: expected a finite number > 0, got nan"],
    ),
    "infinite rate": (
        ["synth", "global", "--rate", "inf", "--out", "w.zarr"],
        ["--rate: expected a finite number > 0, got inf"],
    ),
    "one DAS channel": (
        ["synth", "das", "--channels", "1", "--out", "d.zarr"],
        ["--channels: expected an integer ≥ 2, got 1"],
    ),
    "empty crustal grid": (
        ["synth", "crustal", "--grid", "0", "--out", "c.zarr"],
        ["--grid: expected an integer ≥ 1, got 0"],
    ),
    "negative sweep": (
        ["synth", "crustal", "--parametric", "-1", "--out", "c.zarr"],
        ["--parametric: expected an integer ≥ 0, got -1"],
    ),
    "demo without sensors": (["demo", "--sensors", "0"], ["--sensors: expected an integer ≥ 1"]),
    "CTF rate 0": (
        ["tasks", "w.zarr", "--public", "p.zarr", "--truth", "t.zarr", "--rate", "0"],
        ["--rate: expected a finite number > 0, got 0"],
    ),
    "dev fraction 1": (
        ["split", "w.zarr", "--strategy", "event", "--dev-fraction", "1"],
        ["--dev-fraction: expected a finite number ≥ 0 and < 1, got 1"],
    ),
    "window 0": (
        ["ingest", "quakeml", "c.xml", "--archive", "a", "--out", "o.zarr", "--window", "0"],
        ["--window: expected a finite number > 0, got 0"],
    ),
    "threshold 2": (
        ["score", "picks", "--truth", "w.zarr", "--submission", "p.csv", "--threshold", "2"],
        ["--threshold: expected a finite number ≥ 0 and ≤ 1, got 2"],
    ),
    "level 1": (["compare", "runs.csv", "--level", "1"], ["--level: expected a finite number"]),
}


@pytest.mark.parametrize("case", OUT_OF_RANGE)
def test_a_number_out_of_range_is_refused_before_the_cluster(case, tmp_path):
    argv, fragments = OUT_OF_RANGE[case]
    run, seconds = seisctf(*argv, cwd=tmp_path)
    assert_answered_before_the_cluster(run, *fragments)
    assert seconds < MAX_SECONDS
    assert not any(tmp_path.iterdir())  # nothing written


def test_text_that_is_no_number_is_a_usage_error(tmp_path):
    run, _ = seisctf("synth", "global", "--sensors", "many", "--out", "w.zarr", cwd=tmp_path)
    assert run.returncode == 2
    assert "--sensors: expected an integer ≥ 1, got 'many'" in run.stderr


# 10 realisations x 3000 steps x 10^8 sensors x 4 bytes (float32), the contract's global store.
HUGE = ["synth", "global", "--sensors", "100000000"]
HUGE_BYTES = 10 * 3000 * 100_000_000 * 4
HUGE_ESTIMATE = [
    "synth global writes about 12.0 TB",
    "(10 realisations × 3000 steps × 100000000 sensors × 4 bytes; uncompressed)",
]


def test_a_synthesis_larger_than_the_free_space_is_refused_with_its_estimate(tmp_path):
    if shutil.disk_usage(tmp_path).free >= HUGE_BYTES:
        pytest.skip("this file system has room for the 12 TB the test expects refused")
    out = tmp_path / "huge.zarr"
    run, seconds = seisctf(*HUGE, "--out", str(out))
    assert_answered_before_the_cluster(
        run, str(out), *HUGE_ESTIMATE, f"free at {tmp_path}", "give --yes-really-large"
    )
    assert seconds < MAX_SECONDS
    assert not out.exists()


def test_an_object_store_takes_what_its_ceiling_allows(tmp_path):
    """Nothing is asked of the store: the estimate alone is above the stated ceiling."""
    assert HUGE_BYTES > UNKNOWN_ROOM_BYTES == 100 * 10**9
    run, _ = seisctf(*HUGE, "--out", "s3://no-such-bucket/huge.zarr", cwd=tmp_path)
    assert_answered_before_the_cluster(
        run, "s3://no-such-bucket/huge.zarr", *HUGE_ESTIMATE, "above the 100.0 GB"
    )


def test_the_demo_sizes_every_store_it_synthesises(tmp_path):
    run, _ = seisctf("demo", "--dataset", "all", "--sensors", "100000000", cwd=tmp_path)
    assert_answered_before_the_cluster(
        run,
        "seisctf-demo: demo (its wavefield stores alone) writes about",
        "synth global: 10 realisations × 3000 steps × 100000000 sensors × 4 bytes",
        "synth das: 10 slots × 15200 samples × 100000000 channels × 4 bytes",
        "synth crustal: 3 components × 20 simulations × 600 steps × 100000000 sensors",
    )
    assert not any(tmp_path.iterdir())


def test_the_override_goes_on_printing_the_estimate(tmp_path):
    """With --yes-really-large the command passes its checks and reaches for its cluster (its
    address has no port here: that is where it stops, before any work)."""
    if shutil.disk_usage(tmp_path).free >= HUGE_BYTES:
        pytest.skip("this file system has room for the 12 TB the test expects refused")
    out = tmp_path / "huge.zarr"
    argv = (*HUGE, "--out", str(out), "--yes-really-large")
    run, _ = seisctf(*argv, scheduler=UNPARSABLE_SCHEDULER)
    assert run.returncode == 3, run.stderr
    first, *rest = run.stderr.strip().splitlines()
    assert first.startswith(f"seisctf: {out}: synth global writes about 12.0 TB"), run.stderr
    assert first.endswith("writing it (--yes-really-large)")
    assert f"'{UNPARSABLE_SCHEDULER}' is not a Dask scheduler address" in rest[-1]
    assert "Traceback" not in run.stderr
    assert not out.exists()


@pytest.mark.skipif(namespace_requirement() is not None, reason=str(namespace_requirement()))
def test_the_free_space_is_that_of_the_targets_own_file_system(tmp_path):
    """On a 4 MiB tmpfs: a synthesis of 5.12 MB (10 x 1000 x 128 x 4 bytes) is refused naming
    the tmpfs's free space, before any cluster starts; a small one is written there."""
    small = tmp_path / "small"
    small.mkdir()
    seisctf_command = f"{shlex.quote(sys.executable)} -m seisctf.cli"
    script = (
        f'{seisctf_command} synth global --sensors 128 --duration 1000 --out "$1/big.zarr"\n'
        'echo "big: $?"\n'
        f"{seisctf_command} synth crustal --grid 4 --parametric 0 --initial-conditions 0 "
        '--duration 0.2 --seed 1 --quiet --out "$1/small.zarr"\n'
        'echo "small: $?"\n'
        'ls "$1"\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SEISCTF_SCHEDULER", "SEISCTF_CLUSTER")}
    run = run_on_tmpfs(small, "4m", script, [str(small)], env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[:1] == ["big: 3"], run.stdout + run.stderr
    refusal = [line for line in run.stderr.splitlines() if line.startswith("seisctf:")]
    assert refusal[0].startswith(f"seisctf: invalid input: {small}/big.zarr: synth global ")
    assert "writes about 5.1 MB (10 realisations × 1000 steps × 128 sensors × 4 bytes" in refusal[0]
    assert f"more than the 4.2 MB free at {small};" in refusal[0]
    assert "dask:" not in run.stderr.split("\n", 1)[0]
    written = [f"wrote {small}/small.zarr", "small: 0", "small.zarr"]
    assert run.stdout.splitlines()[1:] == written, run.stdout + run.stderr
