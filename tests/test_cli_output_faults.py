"""Outputs that cannot be written, through the CLI on real files: a read-only folder (`ingest`,
`baseline`, `score ctf --json`, `leaderboard --html`) is refused before any work, in one line
naming the option, with nothing recorded in the leaderboard; a disk that fills midway is one line
naming the output and its bytes, nothing marked complete, and the same command finishes once
there is room. `score` writes its outputs first and records last, once: a re-run of the same
submission adds no row. Before, each was a 49-line OSError traceback, and `score ctf --json RO
--db lb.sqlite` recorded the entry before failing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import obspy
import pytest
from conftest import noisy_copy, write_tiny_truth
from mounts import namespace_requirement, run_on_tmpfs, run_read_only
from submission_writers import write_npz
from test_cli_first_answers import assert_answered_before_the_cluster
from test_cli_first_answers import seisctf as run_seisctf

import seisctf
from seisctf.cli import EXIT_INVALID_INPUT

SEISCTF = [sys.executable, "-m", "seisctf.cli"]
BALST = Path(obspy.__file__).parent / "io/mseed/tests/data/CH.BALST..LHE.D.2025.314"
SECRET = "output-faults-test-secret-0123456789"
# What the kernel says of a write into a read-only mount (root), or into a folder without write
# permission (any other user, whose folder is made so with chmod).
READ_ONLY = "Read-only file system" if os.geteuid() == 0 else "Permission denied"


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def rows(db: Path) -> int:
    """Entries of a leaderboard, counted with sqlite3 (not seisctf)."""
    with sqlite3.connect(db) as connection:
        return connection.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory, dask_cluster) -> dict[str, Path]:
    """An archive (ObsPy's CH.BALST LHE day), a tiny CTF bundle, a submission, and a
    leaderboard holding the submission's entry (written by `score ctf --db`)."""
    root = tmp_path_factory.mktemp("outputs")
    (root / "archive").mkdir()
    shutil.copy(BALST, root / "archive")
    truth_url, _, truth = write_tiny_truth(root, SECRET)
    submission = write_npz(noisy_copy(truth, seed=1, level=0.1), root / "submission.npz")
    db = root / "lb.sqlite"
    score = [*SEISCTF, "score", "ctf", "--truth", truth_url, "--submission", str(submission)]
    score += ["--db", str(db), "--quiet", "--scheduler", dask_cluster.address]
    run = subprocess.run(score, capture_output=True, text=True)
    assert run.returncode == 0 and rows(db) == 1, run.stderr
    return {
        "archive": root / "archive",
        "truth": Path(truth_url),
        "public": root / "public.zarr",
        "submission": submission,
        "db": db,
    }


# The command (its words; {file} from `files`), and the output option given the read-only folder.
COMMANDS = {
    "ingest": ("ingest waveforms {archive}", "--out", "x.zarr"),
    "baseline": ("baseline persistence --public {public}", "--out", "s.zarr"),
    "score-json": (
        "score ctf --truth {truth} --submission {submission} --db {db}",
        "--json",
        "x.json",
    ),
    "leaderboard-html": ("leaderboard --db {db}", "--html", "site"),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_read_only_output_is_refused_before_any_work(name, files, tmp_path):
    if os.geteuid() == 0 and (why := namespace_requirement()):
        pytest.skip(f"a read-only folder needs a read-only bind mount as root: {why}")
    command, flag, output = COMMANDS[name]
    read_only = tmp_path / "ro"
    read_only.mkdir()
    entries = rows(files["db"])
    argv = [*SEISCTF, *command.format(**files).split(), flag, str(read_only / output), "--quiet"]
    run = run_read_only(read_only, argv, timeout=300)
    assert run.returncode == EXIT_INVALID_INPUT, run.stderr
    line = one_line(run.stderr)
    assert line == (
        f"seisctf: invalid input: {flag} {read_only / output}: cannot write in {read_only}: "
        f"{READ_ONLY}"
    )
    assert list(read_only.iterdir()) == []
    assert rows(files["db"]) == entries  # nothing recorded


def test_score_writes_first_and_records_once(files, tmp_path, dask_cluster):
    """A --json that cannot be written records nothing: the disk fills on the JSON itself (two
    results, over 4 KiB, where one 4 KiB page is left: the folder passes the check, the write
    fails). The same command with room records both entries; run again, it adds no row."""
    if why := namespace_requirement():
        pytest.skip(f"a full disk is a small tmpfs, mounted as root: {why}")
    full, db = tmp_path / "full", tmp_path / "lb.sqlite"
    full.mkdir()
    shutil.copy(files["db"], db)
    entries = rows(db)
    second = write_npz(noisy_copy(dict(np.load(files["submission"])), 2, 0.1), tmp_path / "b.npz")
    score = [*SEISCTF, "score", "ctf", "--truth", str(files["truth"]), "--db", str(db)]
    score += ["--submission", str(files["submission"]), str(second), "--name", "a", "--name", "b"]
    score += ["--quiet", "--scheduler", dask_cluster.address]  # the JSON: written here
    fill = f"head -c 1048576 /dev/zero > {full}/filler 2>/dev/null || true\n"
    fill += f"truncate -s -4096 {full}/filler"
    run = run_on_tmpfs(full, "64k", f'{fill}\n"$@" --json {full}/x.json', score, timeout=300)
    assert run.returncode == EXIT_INVALID_INPUT, run.stderr
    line = one_line(run.stderr)
    assert line.startswith(f"seisctf: no space left on device writing {full}/x.json: ")
    assert rows(db) == entries
    for _ in range(2):
        again = subprocess.run([*score, "--json", str(tmp_path / "x.json")], capture_output=True)
        assert again.returncode == 0, again.stderr
        assert rows(db) == entries + 2
    written = json.loads((tmp_path / "x.json").read_text())
    assert [result["name"] for result in written] == ["a", "b"]
    assert len(json.dumps(written, indent=2)) > 4096  # two pages of the tmpfs


def test_a_full_disk_is_one_line_and_the_store_is_not_complete(files, tmp_path):
    """`ingest` into a 64 KiB tmpfs: one line naming the store and its bytes, the store not
    marked complete; the tmpfs grown to 8 MiB, the same command finishes with obspy's samples."""
    if why := namespace_requirement():
        pytest.skip(f"a full disk is a small tmpfs, mounted as root: {why}")
    full, kept = tmp_path / "full", tmp_path / "kept"
    full.mkdir()
    kept.mkdir()
    ingest = [*SEISCTF, "ingest", "waveforms", str(files["archive"]), "--quiet", "--out"]
    script = f"""
"$@" {full}/x.zarr 2> {kept}/first.err; echo $? > {kept}/first.rc
cp -r {full}/x.zarr {kept}/first.zarr
mount -o remount,size=8m {full}
"$@" {full}/x.zarr 2> {kept}/second.err; echo $? > {kept}/second.rc
cp -r {full}/x.zarr {kept}/second.zarr
"""
    run = run_on_tmpfs(full, "64k", script, ingest, timeout=600)
    assert run.returncode == 0, run.stderr
    first_err = (kept / "first.err").read_text()
    assert (kept / "first.rc").read_text().strip() == str(EXIT_INVALID_INPUT), first_err
    line = one_line(first_err)
    assert line.startswith(f"seisctf: no space left on device writing {full}/x.zarr: ")
    declared = 86343 * 4  # the data array (float32) alone, uncompressed
    assert " bytes on disk so far, its arrays need up to " in line
    needed = int(line.split("need up to ")[1].split(" bytes")[0].replace(",", ""))
    assert declared < needed < 2 * declared
    attrs = json.loads((kept / "first.zarr/zarr.json").read_text())["attributes"]
    assert "seisctf_complete" not in attrs
    assert (kept / "second.rc").read_text().strip() == "0", (kept / "second.err").read_text()
    store = seisctf.open_store(str(kept / "second.zarr"))
    expected = obspy.read(str(BALST))[0].data
    np.testing.assert_array_equal(store["data"].sel(channel="LHE").values[0], expected)


def test_a_leaderboard_on_a_full_disk_is_said_full_not_junk(files, tmp_path, dask_cluster):
    """`--db` on a full tmpfs (4 KiB left): one line naming the database and the disk, not
    'not a seisctf leaderboard database (disk I/O error)'; the database is as it was."""
    if why := namespace_requirement():
        pytest.skip(f"a full disk is a small tmpfs, mounted as root: {why}")
    full, kept = tmp_path / "full", tmp_path / "kept"
    full.mkdir()
    kept.mkdir()
    score = [*SEISCTF, "score", "ctf", "--truth", str(files["truth"]), "--name", "new"]
    score += ["--submission", str(files["submission"]), "--json", str(kept / "x.json"), "--quiet"]
    score += ["--scheduler", dask_cluster.address]
    script = f"""cp {files["db"]} {full}/lb.sqlite
head -c 1048576 /dev/zero > {full}/filler 2>/dev/null || true
truncate -s -4096 {full}/filler
"$@" --db {full}/lb.sqlite; code=$?
cp {full}/lb.sqlite {kept}/lb.sqlite
exit $code"""
    run = run_on_tmpfs(full, "64k", script, score, timeout=300)
    assert run.returncode == EXIT_INVALID_INPUT, run.stderr
    line = one_line(run.stderr)
    assert line.startswith(f"seisctf: no space left on device writing {full}/lb.sqlite: ")
    assert "not a seisctf leaderboard" not in line
    assert rows(kept / "lb.sqlite") == rows(files["db"])
    assert not (kept / "x.json").exists()


LONG_NAME = "a" * 300 + ".zarr"  # above the 255 bytes a name may have (ext4, tmpfs, xfs)
TOO_LONG = {
    "synth": (["synth", "global", "--sensors", "4", "--out", LONG_NAME], "--out"),
    "ingest": (["ingest", "waveforms", str(BALST), "--out", LONG_NAME], "--out"),
    "score-json": (["score", "ctf", "--truth", "t.zarr", "--submission", "s.npz"], "--json"),
    "deep path": (["synth", "global", "--out", "a/" * 2100 + "w.zarr"], "--out"),
}


@pytest.mark.parametrize("case", TOO_LONG)
def test_an_output_name_too_long_is_refused_naming_its_option(case, tmp_path):
    """ENAMETOOLONG was a traceback (a stat of the output): one line naming the option, the
    name's length and the file system's limit, before any cluster, nothing written."""
    argv, flag = TOO_LONG[case]
    if flag == "--json":
        argv = [*argv, "--json", LONG_NAME]
    run, _ = run_seisctf(*argv, cwd=tmp_path)
    value = argv[argv.index(flag) + 1]
    limit = "a name of 305 bytes" if "/" not in value else "a path of"
    assert_answered_before_the_cluster(run, f"{flag} {value}: {limit}", "takes")
    assert not any(tmp_path.iterdir())
