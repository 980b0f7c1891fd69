"""The hostile input corpus (tests/data/bad/, written by tests/data/make_bad_inputs.py, listed in
its CASES.md) through the real command line on a real shared Dask cluster: every case exits with
code 3 and one line naming its input, without a traceback, leaves no complete output, and the
cluster keeps its workers.

The cases run in one interpreter (tests/cli_batch.py: `seisctf.cli.main` per command with its
own file descriptors 1 and 2), so the imports are paid once; a few are also run through
`python -m seisctf.cli` to show the batch gives what a user gets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_tiny_truth
from event_window_fixtures import write_picking_windows

from seisctf import conventions as cv

TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS / "data"))

import make_bad_inputs as corpus  # noqa: E402

BAD = TESTS / "data" / "bad"
CASES = {case.name: case for case in corpus.CASES}
ENTRY_POINT_CASES = ("mseed-truncated.mseed", "ctf-corrupt-chunk.zarr", "recipe-deep.yaml")


def _content(path: Path) -> bytes:
    """A file's bytes; for a readable Parquet file its table (its footer names the writer's
    version, which changes with pyarrow releases while the table does not)."""
    if path.suffix == ".parquet" and path.read_bytes()[-4:] == b"PAR1":
        import pyarrow.parquet as pq

        return repr(pq.read_table(path).to_pydict()).encode()
    return path.read_bytes()


def _listing(root: Path) -> dict[str, bytes]:
    """{relative path: content, or the target of a symlink} of every file under root."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[key] = b"symlink -> " + os.readlink(path).encode()
        elif path.is_file():
            found[key] = _content(path)
    return found


def test_committed_corpus_is_what_the_script_writes(tmp_path):
    fresh = _listing(corpus.write_corpus(tmp_path / "bad"))
    committed = _listing(BAD)
    assert sorted(fresh) == sorted(committed), "re-run tests/data/make_bad_inputs.py"
    changed = [name for name in fresh if fresh[name] != committed[name]]
    assert not changed, f"re-run tests/data/make_bad_inputs.py: {changed} differ"
    assert len(CASES) == len(corpus.CASES) >= 30
    assert [name for name, case in CASES.items() if not case.expect] == []  # a fragment each
    assert all(f"`{name}`" in (BAD / "CASES.md").read_text() for name in CASES)


def _in_place(case: corpus.Case) -> bool:
    """A command given no output path (`split STORE`, `leaderboard --db FILE`): it may only
    change its input, so it runs on a copy, which must stay as the corpus has it."""
    return _output(list(case.command)) is None


def _commands(root: Path, truth: str, picks: str, scheduler: str) -> dict[str, list[str]]:
    commands = {}
    for index, case in enumerate(corpus.CASES):
        source = BAD / case.name
        if _in_place(case):  # the same name, so the message names it as in the corpus
            copied = root / "in-place" / f"{index:02d}" / case.name
            copied.parent.mkdir(parents=True)
            copy = shutil.copytree if source.is_dir() else shutil.copy2
            source = Path(copy(source, copied))
        fill = {
            "input": str(source),
            "support": str(BAD / "support"),
            "out": str(root / "out" / f"{index:02d}-{case.name}"),
            "truth": truth,
            "picks": picks,
        }
        argv = [part.format(**fill) for part in case.command]
        commands[case.name] = [*argv, "--scheduler", scheduler, "--quiet"]
    return commands


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory, dask_cluster):
    """(commands, results, workers): the command and result of every case by case name, run
    against the shared cluster, and its worker processes before the run."""
    root = tmp_path_factory.mktemp("hostile")
    truth, manifest, _ = write_tiny_truth(root / "bundle", "hostile-corpus")
    assert manifest.test_shapes() == corpus.CTF_SHAPES
    picks = str(root / "picks.zarr")
    write_picking_windows(picks)
    commands = _commands(root, truth, picks, dask_cluster.address)
    workers = _worker_processes(dask_cluster.address)
    (root / "commands.json").write_text(json.dumps(list(commands.values())))
    subprocess.run(
        [sys.executable, str(TESTS / "cli_batch.py"), str(root / "commands.json"),
         str(root / "results.jsonl"), "120"],
        check=True, timeout=1200, cwd=root,
    )  # fmt: skip
    lines = (root / "results.jsonl").read_text().splitlines()
    results = dict(zip(commands, (json.loads(line) for line in lines), strict=True))
    return commands, results, workers


def _worker_processes(address: str) -> dict[str, int]:
    """{worker address: process id} of the cluster's workers: a worker that died and was
    restarted by its nanny has a new address and a new process id."""
    from distributed import Client

    with Client(address, set_as_default=False, timeout="30s") as client:
        return client.run(os.getpid)


def _output(command: list[str]) -> Path | None:
    """The output path a command was given (--out, --json or --workdir)."""
    for option in ("--out", "--json", "--workdir"):
        if option in command:
            return Path(command[command.index(option) + 1])
    return None


def complete_outputs(out: Path | None) -> list[str]:
    """What a run left that looks whole: a result file, or a store marked complete."""
    if out is None or not out.exists():
        return []
    if out.is_file():
        return [str(out)]
    left = []
    for path in out.rglob("*"):
        if path.name == "zarr.json":
            attrs = json.loads(path.read_text()).get("attributes", {})
            left += [str(path.parent)] * bool(attrs.get(cv.ATTR_COMPLETE))
        elif path.is_file() and path.suffix in (".json", ".csv", ".parquet", ".png", ".html"):
            left.append(str(path))
    return left


def check_refusal(case: corpus.Case, result: dict, command: list[str]) -> None:
    """Exit code 3, one line naming the input with the case's fragments, no traceback, nothing
    complete written."""
    err = result["stderr"]
    assert result["code"] == 3, (case.name, result["code"], err)
    assert "Traceback" not in err + result["stdout"], err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seisctf: invalid input: "), err
    assert Path(case.name).stem in err, (case.name, err)
    for fragment in case.expect:
        assert fragment in err, (case.name, fragment, err)
    assert complete_outputs(_output(command)) == [], case.name


def in_place_changes(case: corpus.Case, command: list[str]) -> list[str]:
    """For a command given no output path: the files of its input (a copy of the corpus's)
    that differ from the corpus's, and a store's lost completion marker or new `split`."""
    if not _in_place(case):
        return []
    given = Path(next(part for part in command if Path(part).name == case.name))
    before, after = _listing(BAD / case.name), _listing(given) if given.is_dir() else None
    if after is None:
        return [] if _content(given) == _content(BAD / case.name) else [str(given)]
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if (given / "zarr.json").exists():
        meta = json.loads((given / "zarr.json").read_text())
        nodes = meta.get("consolidated_metadata", {}).get("metadata", {})
        changed += ["not complete"] * (meta["attributes"].get(cv.ATTR_COMPLETE) is not True)
        changed += [cv.SPLIT_VAR] * (cv.SPLIT_VAR in nodes or (given / cv.SPLIT_VAR).exists())
    return changed


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_exits_3_naming_it(name, corpus_run):
    commands, results, _ = corpus_run
    check_refusal(CASES[name], results[name], commands[name])
    assert in_place_changes(CASES[name], commands[name]) == [], name


def test_the_cluster_keeps_its_workers(corpus_run, dask_cluster):
    """The same worker processes (addresses and process ids) after the corpus as before it."""
    from distributed import Client

    _, _, before = corpus_run
    assert len(before) == 2
    assert _worker_processes(dask_cluster.address) == before
    with Client(dask_cluster.address, set_as_default=False) as client:
        assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6


@pytest.mark.parametrize("name", ENTRY_POINT_CASES)
def test_the_entry_point_gives_what_the_batch_gives(name, corpus_run, tmp_path):
    """`python -m seisctf.cli` (its own process, fast_exit) answers a case as the batch did."""
    commands, results, _ = corpus_run
    command = commands[name]
    out = _output(command)
    if out is not None:  # a fresh output path, same shape of name
        command = [str(tmp_path / out.name) if part == str(out) else part for part in command]
    run = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *command], capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    check_refusal(CASES[name], {"code": run.returncode, "stdout": run.stdout,
                                "stderr": run.stderr}, command)  # fmt: skip
    assert run.stderr == results[name]["stderr"]
