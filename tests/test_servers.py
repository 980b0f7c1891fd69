"""The test servers of tests/servers.py stop with the test run that started them: a run killed
outright (a timeout's SIGKILL, which runs no finaliser) leaves no `dask scheduler`, `dask worker`
or `weed server` behind, where they used to run on for hours."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
from servers import weed_sockets

TESTS = Path(__file__).parent
# A test run in miniature: starts a Dask cluster and an S3 server, prints their process ids and
# waits to be killed.
RUN = """
import json, sys, time
from pathlib import Path
from servers import start_dask_cluster, start_s3
cluster = start_dask_cluster(n_workers=1)
s3 = start_s3(Path(sys.argv[1]))
pids = [process.pid for process in [*cluster.processes, s3.process]]
print(json.dumps({"pids": pids, "ports": s3.ports, "cluster": str(cluster.directory)}), flush=True)
time.sleep(600)
"""


def test_the_servers_of_a_killed_test_run_stop_with_it(tmp_path):
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, str(tmp_path / "s3")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=TESTS,
    )
    try:
        started_servers = json.loads(run.stdout.readline())
        servers = [psutil.Process(pid) for pid in started_servers["pids"]]
        # The worker's nanny runs the worker in a process of its own.
        started = servers + [child for s in servers for child in s.children(recursive=True)]
        assert len(servers) == 3 and len(started) >= 4, started
    finally:
        run.kill()
        run.wait()
    _, alive = psutil.wait_procs(started, timeout=30)
    for process in alive:  # not left running by a failed test either
        with contextlib.suppress(psutil.Error):
            process.kill()
    assert alive == [], [process.cmdline() for process in alive]
    # What the killed run leaves in /tmp: weed's sockets, the cluster's folder.
    for path in weed_sockets(started_servers["ports"]):
        path.unlink(missing_ok=True)
    shutil.rmtree(started_servers["cluster"], ignore_errors=True)
