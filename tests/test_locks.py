"""Writer locks (seisctf.locks) through the command line, on a local disk and on S3 (SeaweedFS):
two ingests into one store at once (one writes, the other is refused naming the holder), a
crashed holder's lease taken over, an expired one of another host taken over and a live one
refused, --force-unlock, the scoring outputs and leaderboards, and the holder's renewals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import obspy
import pytest
from conftest import noisy_copy, write_tiny_truth

from seisctf import locks
from seisctf.errors import InvalidInput
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation
from seisctf.scoring import leaderboard
from seisctf.storage import open_dataset

SEISCTF = [sys.executable, "-m", "seisctf.cli"]
TSINDEX = Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data"
ANMO = TSINDEX / "IU/2018/001/IU.ANMO.10.BHZ.2018.001_first_minute.mseed"
TGUH = TSINDEX / "CU/2018/001/CU.TGUH.00.BHZ.2018.001_first_minute.mseed"
STATION_OF = {ANMO: "IU.ANMO.10", TGUH: "CU.TGUH.00"}
# A process holding the writer lock of argv[1] (shared if argv[2] == "shared") with storage
# options argv[3] (JSON) and a lease of argv[4] seconds, until it is killed.
HOLDER = """
import json, signal, sys, time
# Ctrl-C ends the holder whatever this test process's own SIGINT disposition is (a process
# started while SIGINT is ignored keeps it ignored: Python installs its handler only if not).
signal.signal(signal.SIGINT, signal.default_int_handler)
from seisctf.location import StoreLocation
from seisctf.locks import Output, holding
location = StoreLocation.from_url(sys.argv[1], json.loads(sys.argv[3]))
output = Output(location, shared=sys.argv[2] == "shared")
with holding([output], command="test holder", lease_s=float(sys.argv[4])):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture(params=["local", "s3"])
def place(request, tmp_path):
    """Where outputs go: (a folder URL, storage options, the CLI's storage option flags)."""
    if request.param == "local":
        return str(tmp_path), None, []
    server = request.getfixturevalue("s3_server")
    return request.getfixturevalue("s3_bucket"), server.storage_options, server.cli_options()


def ingest(source: Path, out: str, flags: list[str], *extra: str) -> subprocess.Popen:
    argv = [*SEISCTF, "ingest", "waveforms", str(source), "--out", out, "--quiet"]
    return subprocess.Popen(
        [*argv, *flags, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finished(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    assert "Traceback" not in err, err
    return process.returncode, out, err


def hold(output: str, options: dict | None, *, shared: bool = False, lease_s: float = 600):
    """A holder process of `output`'s writer lock, once it holds it."""
    mode = "shared" if shared else "exclusive"
    argv = [sys.executable, "-c", HOLDER, output, mode, json.dumps(options), str(lease_s)]
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def stop(holder: subprocess.Popen, output: str) -> None:
    """Ctrl-C to a holder: it removes its lease as it ends."""
    holder.send_signal(signal.SIGINT)
    try:
        holder.wait(timeout=60)
    except subprocess.TimeoutExpired:
        state = Path(f"/proc/{holder.pid}/status").read_text()
        stack = Path(f"/proc/{holder.pid}/wchan").read_text()
        holder.kill()
        pytest.fail(f"the holder ignored SIGINT for 60 s (waiting in {stack}):\n{state}")
    assert not lock_exists(output, None)


def lock_exists(output: str, options: dict | None) -> bool:
    """Whether any lease of `output`, exclusive or shared, is left beside it."""
    objects, _, lock, _ = locks.lock_location(StoreLocation.from_url(output, options))
    return bool(objects.names(lock.removesuffix(".seisctf-lock") + ".seisctf-"))


def assert_store_holds(out: str, options: dict | None, source: Path) -> None:
    """The store holds `source`'s station alone, `source` alone as input, and its samples as
    obspy reads them."""
    store = open_dataset(StoreLocation(out, options))
    assert list(store["station"].values) == [STATION_OF[source]]
    assert [item["path"] for item in recorded_inputs(StoreLocation(out, options))] == [str(source)]
    expected = obspy.read(str(source))[0].data.astype(np.float32)
    np.testing.assert_array_equal(store["data"].values[0, 0], expected)


def refusal_names_holder(err: str, output: str, pid: int, command: str) -> None:
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"seisctf: invalid input: {output}: another command is writing it")
    assert f"{command} (pid {pid} on host {socket.gethostname()}) since " in err
    assert "lease expiring" in err and "re-run with --force-unlock" in err


def test_two_ingests_into_one_store_one_writes_the_other_is_refused(place):
    """The issue's reproduction: two ingests of different files into one store at once."""
    folder, options, flags = place
    out = f"{folder}/same.zarr"
    runs = {source: ingest(source, out, flags) for source in (ANMO, TGUH)}
    outcomes = {source: finished(process) for source, process in runs.items()}
    assert sorted(code for code, _, _ in outcomes.values()) == [0, 3], outcomes
    winner = next(source for source, (code, _, _) in outcomes.items() if code == 0)
    loser = TGUH if winner == ANMO else ANMO
    refusal_names_holder(outcomes[loser][2], out, runs[winner].pid, "seisctf ingest waveforms")
    assert_store_holds(out, options, winner)
    assert not lock_exists(out, options)


def test_a_crashed_holders_lease_is_taken_over(place):
    folder, options, flags = place
    out = f"{folder}/crashed.zarr"
    holder = hold(out, options)
    holder.send_signal(signal.SIGKILL)  # no chance to remove its lease
    holder.wait()
    assert lock_exists(out, options)
    code, _, err = finished(ingest(ANMO, out, flags))
    assert code == 0, err
    assert f"took over the stale writer lock of {out} from test holder (pid {holder.pid}" in err
    assert_store_holds(out, options, ANMO)
    assert not lock_exists(out, options)


def lease_file(output: Path, host: str, expires_in_s: float) -> Path:
    """A lease as another host's command leaves it (docs/contract.md, Writer locks)."""
    now = time.time()
    stamp = lambda seconds: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))  # noqa: E731
    record = {
        "seisctf_lock": 1,
        "output": str(output),
        "host": host,
        "pid": 4242,
        "pid_namespace": "",
        "command": "seisctf ingest waveforms",
        "started": stamp(now - 3600),
        "renewed": stamp(now - 60),
        "expires": stamp(now + expires_in_s),
        "token": "0123456789abcdef",
    }
    lock = output.parent / f".{output.name}.seisctf-lock"
    lock.write_text(json.dumps(record))
    return lock


def test_another_hosts_lease_is_refused_until_it_expires(tmp_path):
    out = tmp_path / "elsewhere.zarr"
    lock = lease_file(out, "another-host", expires_in_s=300)
    code, _, err = finished(ingest(ANMO, str(out), []))
    assert code == 3
    assert "(pid 4242 on host another-host)" in err and str(lock) in err
    assert not out.exists()
    lease_file(out, "another-host", expires_in_s=-1)
    code, _, err = finished(ingest(ANMO, str(out), []))
    assert code == 0, err
    assert "took over the stale writer lock" in err and "another-host" in err
    assert_store_holds(str(out), None, ANMO)
    assert not lock.exists()


def test_force_unlock_replaces_a_live_holders_lock(tmp_path):
    out, options, flags = str(tmp_path / "forced.zarr"), None, []
    holder = hold(out, options)
    try:
        code, _, err = finished(ingest(ANMO, out, flags))
        assert code == 3
        refusal_names_holder(err, out, holder.pid, "test holder")
        code, _, err = finished(ingest(ANMO, out, flags, "--force-unlock"))
        assert code == 0, err
        assert f"removed the writer lock of {out} held by test holder (pid {holder.pid}" in err
        assert "(--force-unlock)" in err
    finally:
        holder.kill()
        holder.wait()
    assert_store_holds(out, options, ANMO)


@pytest.fixture(scope="module")
def scoring(tmp_path_factory):
    """A tiny truth bundle and a submission to it: (truth URL, submission path)."""
    root = tmp_path_factory.mktemp("scoring")
    truth_url, _, truth = write_tiny_truth(root, "writer-locks-secret")
    submission = root / "noisy.npz"
    np.savez(submission, **noisy_copy(truth, seed=1, level=0.1))
    return truth_url, str(submission)


def run(*argv: str) -> tuple[int, str, str]:
    process = subprocess.Popen([*SEISCTF, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=300)
    assert b"Traceback" not in err, err
    return process.returncode, out.decode(), err.decode()


def test_score_outputs_and_leaderboards_are_locked(scoring, tmp_path):
    """score --json and --plot are written by one command at a time; a leaderboard database
    takes many scorers at once (shared leases) but none while the demo rebuilds it (exclusive),
    and the demo none while a scorer appends; leaderboard --html is one writer's."""
    truth_url, submission = scoring
    score = ["score", "ctf", "--truth", truth_url, "--submission", submission, "--quiet"]
    results, html = tmp_path / "results.json", tmp_path / "site"
    workdir = tmp_path / "demo"
    db = workdir / "leaderboard.sqlite"  # the demo's database
    holder = hold(str(results), None)
    try:
        code, _, err = run(*score, "--json", str(results))
        assert code == 3
        refusal_names_holder(err, str(results), holder.pid, "test holder")
        assert not results.exists()
    finally:
        stop(holder, str(results))
    demo = hold(str(db), None)  # as the demo holds the database it rebuilds
    try:
        code, _, err = run(*score, "--db", str(db))
        assert code == 3
        refusal_names_holder(err, str(db), demo.pid, "test holder")
        assert not db.exists()
    finally:
        stop(demo, str(db))
    scorer = hold(str(db), None, shared=True)  # another scorer appending to the database
    try:
        code, _, err = run(*score, "--db", str(db), "--name", "appended")
        assert code == 0, err
        assert [entry["model"] for entry in leaderboard.entries(db)] == ["appended"]
        code, _, err = run("demo", "--workdir", str(workdir), "--quiet")
        assert code == 3
        refusal_names_holder(err, str(db), scorer.pid, "test holder")
        code, _, err = run("leaderboard", "--db", str(db))  # reading takes no lock
        assert code == 0 and "appended" in _, err
    finally:
        stop(scorer, str(db))
    site = hold(str(html), None)
    try:
        code, _, err = run("leaderboard", "--db", str(db), "--html", str(html))
        assert code == 3
        refusal_names_holder(err, str(html), site.pid, "test holder")
        assert not html.exists()
    finally:
        stop(site, str(html))
    junk = tmp_path / ".site.seisctf-lock"  # a lock object that is no lease: refused until forced
    junk.write_text("not a lease")
    code, _, err = run("leaderboard", "--db", str(db), "--html", str(html))
    assert code == 3 and "a writer whose lock object does not read as a lease" in err
    assert "re-run with --force-unlock" in err and not html.exists()
    code, _, err = run("leaderboard", "--db", str(db), "--html", str(html), "--force-unlock")
    assert code == 0, err
    assert f"removed the writer lock of {html} held by a writer whose lock object" in err
    assert (html / "index.html").is_file() and not junk.exists()


def test_the_holder_renews_its_lease(tmp_path):
    out = tmp_path / "renewed.zarr"
    with locks.holding([locks.Output(StoreLocation(out))], command="test", lease_s=0.4) as (held,):
        first = locks.Lease.from_bytes(Path(held.path).read_bytes())
        time.sleep(0.5)
        later = locks.Lease.from_bytes(Path(held.path).read_bytes())
        assert later.token == first.token and later.started == first.started
        assert later.expires > first.expires
    assert not Path(held.path).exists()


@pytest.mark.parametrize("sigint", ["default", "exits"])
def test_a_lease_taken_over_while_stalled_stops_the_command(tmp_path, sigint):
    """A holder that did not renew in time (stalled) and whose lease another writer took over
    stops at its next renewal, saying so, and leaves the other's lease alone; also when a
    library's SIGINT handler exits instead of raising KeyboardInterrupt (dask_jobqueue.runner
    installs one at import: the command would have ended with exit 0)."""
    out = tmp_path / "stalled.zarr"
    handler = signal.getsignal(signal.SIGINT)
    if sigint == "exits":
        signal.signal(signal.SIGINT, lambda *_: sys.exit())
    try:
        with pytest.raises(InvalidInput, match="another command took over its writer lock"):
            with locks.holding([locks.Output(StoreLocation(out))], command="test", lease_s=0.4) as (
                held,
            ):
                other = locks.new_lease(str(out), "seisctf ingest waveforms")
                Path(held.path).write_bytes(other.to_bytes())
                time.sleep(5)  # interrupted by the renewer within 0.1 s
    finally:
        signal.signal(signal.SIGINT, handler)
    assert locks.Lease.from_bytes(Path(held.path).read_bytes()).token == other.token
    assert os.path.exists(held.path)
