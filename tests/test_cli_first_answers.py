"""The command line's first answers: a mistake in a verb's inputs (a missing path, a wrong kind
of path, an option combination, a layout or recipe file, a submission's array names or shapes)
is reported before any Dask cluster starts, in one line and with exit code 3, and importing the
command line loads no Dask, xarray, zarr or pandas.

Run as a user runs it (`python -m seisctf.cli`, a subprocess) with `$SEISCTF_SCHEDULER` pointing
at an address where nothing listens: a command that reached for its cluster would fail there
(or wait), and print its "dask:" line; one answered by its check does neither."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import write_tiny_truth

from seisctf import conventions as cv
from seisctf.build.engine import shipped
from seisctf.cli import main

HEAVY_MODULES = ("dask", "distributed", "xarray", "zarr", "pandas", "scipy")
# Nothing listens on the discard port: reaching for the cluster fails, or hangs until timeout.
NO_SCHEDULER = "tcp://127.0.0.1:9"
# An address with no port: reaching for the cluster fails at once, where it parses the address
# (for a command that is meant to get that far: NO_SCHEDULER's wait is 10 s).
UNPARSABLE_SCHEDULER = "no-port"
SECRET = "first-answers-test-secret"
# Below NO_SCHEDULER's 10 s wait, so a command that reached for its cluster exceeds it; alone,
# each answers in about 0.3-0.5 s (3.5 s was seen with the whole suite loading both cores).
MAX_SECONDS = 8.0


def seisctf(
    *argv: str, cwd: Path | None = None, scheduler: str = NO_SCHEDULER
) -> tuple[subprocess.CompletedProcess, float]:
    """Run `python -m seisctf.cli ARGV` with no reachable scheduler (`scheduler` as
    $SEISCTF_SCHEDULER): (result, wall seconds)."""
    env = {**os.environ, "SEISCTF_SCHEDULER": scheduler}
    env.pop("SEISCTF_SECRET", None)
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    return run, time.perf_counter() - started


def assert_answered_before_the_cluster(run: subprocess.CompletedProcess, *fragments: str) -> None:
    """Exit 3, one line naming the fault, no traceback, no cluster banner."""
    assert run.returncode == 3, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seisctf: invalid input: "), run.stderr
    assert "dask:" not in run.stdout + run.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_importing_the_command_line_loads_no_heavy_library():
    code = (
        "import sys; import seisctf.cli as cli; cli.build_parser();"
        f" print([m for m in {HEAVY_MODULES!r} if m in sys.modules])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_an_ingest_client_imports_no_other_ingest_nor_xarray(tmp_path, dask_cluster):
    """`ingest waveforms` imports its own module alone of the registry's (each other ingest
    costs the client's start) and, on an external cluster, neither xarray nor dask.array
    (0.5 s): its client never opens a dataset."""
    import obspy

    records = (
        Path(obspy.__file__).parent
        / "io/mseed/tests/data/BW.BGLD.__.EHE.D.2008.001.first_10_records"
    )
    argv = ["ingest", "waveforms", str(records), "--out", str(tmp_path / "s.zarr"),
            "--scheduler", dask_cluster.address, "--quiet"]  # fmt: skip
    others = ("das.das_files", "quakeml.quakeml_windows", "seisbench.ingest", "stead.ingest")
    unwanted = ("xarray", "dask.array",
                *(f"seisctf.formats.{name}" for name in others))  # fmt: skip
    code = (
        f"import sys; import seisctf.cli as cli; code = cli.main({argv!r});"
        f" print(code, [m for m in {unwanted!r} if m in sys.modules])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip().splitlines()[-1] == "0 []", run.stdout + run.stderr
    assert zarr.open_group(str(tmp_path / "s.zarr"), mode="r").attrs[cv.ATTR_COMPLETE] is True


def test_each_built_in_command_names_its_own_entry_point():
    """`_registered` imports a built-in command's entry alone only where `BUILT_IN` names the
    entry point registering that command (else it loads them all: right, only slower)."""
    from seisctf.cli.ingest import BUILT_IN, COMMANDS
    from seisctf.registry import INGESTS

    assert set(BUILT_IN) == set(COMMANDS)
    assert {command: INGESTS[name].command for command, name in BUILT_IN.items()} == {
        command: command for command in BUILT_IN
    }


def test_score_ctf_on_a_missing_truth_answers_at_once(tmp_path):
    missing = str(tmp_path / "no-such-truth.zarr")
    run, seconds = seisctf("score", "ctf", "--truth", missing, "--submission", "x")
    assert_answered_before_the_cluster(run, missing, "no zarr group found there", "does not exist")
    assert seconds < MAX_SECONDS


def bad_commands(root: Path) -> dict[str, tuple[list[str], list[str]]]:
    """{case: (argv, fragments of its one line)} of mistakes each verb's check catches."""
    missing = str(root / "missing")
    folder = root / "plain-folder"
    folder.mkdir(exist_ok=True)
    a_file = _written(root / "a-file.txt", "text")
    group = root / "group.zarr"  # an empty zarr group
    group.mkdir(exist_ok=True)
    _written(group / "zarr.json", '{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    bundle = ["--public", str(root / "p.zarr"), "--truth", str(root / "t.zarr")]
    return {
        "tasks: missing store": (["tasks", missing, *bundle], [missing, "does not exist"]),
        "tasks: a folder that is no zarr group": (
            ["tasks", str(folder), *bundle],
            [str(folder), "a folder without zarr.json"],
        ),
        "tasks: unknown layout": (
            ["tasks", str(group), "--layout", "huge", *bundle],
            ["layout 'huge'", "not one of ['crustal', 'das', 'seismo']"],
        ),
        "baseline: public is a file": (
            ["baseline", "zeros", "--public", str(a_file), "--out", str(root / "s.zarr")],
            [str(a_file), "a file, not a zarr folder"],
        ),
        "score ctf: --truth and --validation": (
            ["score", "ctf", "--truth", missing, "--validation", "--submission", "x"],
            ["give --truth URL, or --validation with --public URL"],
        ),
        "score ctf: names": (
            ["score", "ctf", "--truth", missing, "--submission", "a", "b", "--name", "one"],
            ["--name", "one distinct name per submission"],
        ),
        "score ctf: missing submission": (
            ["score", "ctf", "--validation", "--public", str(group), "--submission", missing],
            [missing, "not found"],
        ),
        "score picks: missing truth": (
            ["score", "picks", "--truth", missing, "--submission", str(a_file)],
            [missing, "no zarr group found there"],
        ),
        "build: missing recipe": (["build", missing], [missing, "recipe file not found"]),
        "build: a list": (["build", str(_written(root / "list.yaml", "- 1\n"))], ["YAML mapping"]),
        "demo: bad layout file": (
            ["demo", "--layout", str(_written(root / "l.yaml", "train_steps: -1\n"))],
            ["train_steps: expected a whole number >= 1, got -1"],
        ),
        "synth das: unknown layout": (
            ["synth", "das", "--out", str(root / "d.zarr"), "--layout", "nope"],
            ["layout 'nope'", "seismo"],
        ),
        "ingest waveforms: missing file": (
            ["ingest", "waveforms", missing, "--out", str(root / "w.zarr")],
            [missing, "not found"],
        ),
        "ingest waveforms: glob matching nothing": (
            ["ingest", "waveforms", str(root / "*.mseed"), "--out", str(root / "w.zarr")],
            ["*.mseed", "no file matches"],
        ),
        "ingest seisbench: a file for a folder": (
            ["ingest", "seisbench", str(a_file), "--out", str(root / "e.zarr")],
            [str(a_file), "expected a folder"],
        ),
        "export seisbench: missing store": (
            ["export", "seisbench", missing, str(root / "sb")],
            [missing, "no zarr group"],
        ),
        "subset: missing store": (
            ["subset", missing, "--query", "split == 'test'", "--out", str(root / "s.zarr")],
            [missing, "no zarr group"],
        ),
        "pick stalta: missing store": (
            ["pick", "stalta", missing, "--out", str(root / "p.csv")],
            [missing, "no zarr group"],
        ),
        "compare: missing runs": (["compare", missing], [missing, "file not found"]),
        "leaderboard: missing db": (["leaderboard", "--db", missing], [missing, "not found"]),
    }


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "case",
    [
        "tasks: missing store",
        "tasks: a folder that is no zarr group",
        "tasks: unknown layout",
        "baseline: public is a file",
        "score ctf: --truth and --validation",
        "score ctf: names",
        "score ctf: missing submission",
        "score picks: missing truth",
        "build: missing recipe",
        "build: a list",
        "demo: bad layout file",
        "synth das: unknown layout",
        "ingest waveforms: missing file",
        "ingest waveforms: glob matching nothing",
        "ingest seisbench: a file for a folder",
        "export seisbench: missing store",
        "subset: missing store",
        "pick stalta: missing store",
        "compare: missing runs",
        "leaderboard: missing db",
    ],
)
def test_each_verb_checks_its_inputs_before_the_cluster(case, tmp_path):
    argv, fragments = bad_commands(tmp_path)[case]
    run, _ = seisctf(*argv, cwd=tmp_path)
    assert_answered_before_the_cluster(run, *fragments)
    # Nothing was written beside the inputs.
    inputs = {"plain-folder", "a-file.txt", "group.zarr", "list.yaml", "l.yaml"}
    assert {path.name for path in tmp_path.iterdir()} == inputs


@pytest.fixture(scope="module")
def tiny_truth(tmp_path_factory) -> tuple[str, dict[str, tuple[int, ...]]]:
    """A tiny truth group and its test arrays' shapes, read back with zarr."""
    url, _, _ = write_tiny_truth(tmp_path_factory.mktemp("truth"), SECRET)
    group = zarr.open_group(url, mode="r")
    shapes = {name: group[name].shape for name in group.array_keys() if name.endswith("test")}
    return url, shapes


def test_submission_names_are_checked_against_the_truth_before_the_cluster(tiny_truth, tmp_path):
    truth, shapes = tiny_truth
    arrays = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
    del arrays["X3test"]
    arrays["X99test"] = np.zeros((2, 2), np.float32)
    npz = tmp_path / "sub.npz"
    np.savez(npz, **arrays)
    out = tmp_path / "scores.json"
    run, seconds = seisctf(
        "score", "ctf", "--truth", truth, "--submission", str(npz), "--json", str(out)
    )
    assert_answered_before_the_cluster(
        run, str(npz), "missing arrays ['X3test']", "unexpected arrays ['X99test']"
    )
    assert seconds < MAX_SECONDS and not out.exists()


def test_a_zarr_submission_s_shapes_are_checked_before_the_cluster(tiny_truth, tmp_path):
    truth, shapes = tiny_truth
    group = zarr.open_group(str(tmp_path / "sub.zarr"), mode="w")
    for name, shape in shapes.items():
        rows = shape[0] - 1 if name == "X5test" else shape[0]
        group.create_array(name, shape=(rows, *shape[1:]), dtype="float32")
    run, _ = seisctf("score", "ctf", "--truth", truth, "--submission", str(tmp_path / "sub.zarr"))
    rows, columns = shapes["X5test"]
    assert_answered_before_the_cluster(
        run, "X5test", f"shape ({rows - 1}, {columns}), expected ({rows}, {columns})"
    )


def test_a_recipe_holding_a_secret_is_refused_naming_its_line(tmp_path, monkeypatch, capsys):
    """Recipes are made to be shared: a `secret:` in one is refused before any work, with the
    line and the two ways to give a secret."""
    monkeypatch.delenv("SEISCTF_SECRET", raising=False)
    text = shipped("demo-global").read_text() + "secret: a-long-enough-organiser-secret\n"
    recipe = tmp_path / "shared.yaml"
    recipe.write_text(text)
    line = 1 + text.splitlines().index("secret: a-long-enough-organiser-secret")
    out = tmp_path / "out"
    assert main(["build", str(recipe), "--workdir", str(out), "--quiet"]) == 3
    assert capsys.readouterr().err == (
        f"seisctf: invalid input: {recipe}:{line}: secret: a recipe file is made to be shared, so "
        "a secret never lives in one: give it with --secret or $SEISCTF_SECRET (without either, "
        "the build draws one and keeps it with its truth)\n"
    )
    assert not out.exists()


def test_validation_submissions_are_checked_against_the_public_targets(tiny_truth, tmp_path):
    truth, shapes = tiny_truth
    public = str(Path(truth).parent / "public.zarr")
    group = zarr.open_group(public, mode="r")
    targets = sorted(name for name in group.array_keys() if name.endswith("val"))
    assert targets  # the tiny bundle has validation targets
    npz = tmp_path / "test-arrays.npz"  # the test arrays, where the targets belong
    np.savez(npz, **{name: np.zeros(shape, np.float32) for name, shape in shapes.items()})
    run, _ = seisctf("score", "ctf", "--validation", "--public", public, "--submission", str(npz))
    assert_answered_before_the_cluster(run, str(npz), "missing arrays", *targets)
