"""`--cluster FILE.yaml`, `$SEISCTF_CLUSTER` and a recipe's `cluster:` section: any Dask cluster
class built from configuration. A LocalCluster from a file runs the demo with the embedded run's
bytes and keeps its adaptive bounds; the README's SLURM file gives dask-jobqueue's job script with
its options (nothing submitted); bad files are exit 3 naming the file before any work."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import obspy
import pytest
import zarr
from conftest import DEMO_SIZES
from dask.utils import format_bytes, parse_bytes

from seisctf.build.cluster_file import read_cluster_file
from seisctf.cli import build_parser, main
from seisctf.cli._parse import cluster_choice
from seisctf.cluster import configured_cluster, dask_client
from seisctf.cluster_config import CLUSTER_ENV, SCHEDULER_ENV
from seisctf.conventions import ATTR_COMPLETE
from seisctf.worker_memory import EMBEDDED_ENVIRON, PRE_SPAWN_ENVIRON

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--sensors", "64", "--duration", "300"]
ADAPTIVE_LOCAL = """\
class: distributed.LocalCluster
options:
  n_workers: 0
  threads_per_worker: 1
  dashboard_address: "127.0.0.1:0"
adapt: {minimum: 1, maximum: 2}
"""
# In-process workers (threads): a refused option is answered without starting processes.
IN_PROCESS = "class: distributed.LocalCluster\noptions: {processes: false, n_workers: 1}\n"


def seisctf(
    *args: str, env: dict | None = None, timeout_s: float = 900
) -> subprocess.CompletedProcess:
    """The command line in its own process, as users run it."""
    return subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )


def _store_files(root: Path) -> dict[str, bytes]:
    """Every zarr array's values and every zarr.json under root, by relative path."""
    found = {}
    for meta in sorted(root.rglob("zarr.json")):
        relative = str(meta.parent.relative_to(root))
        found[f"{relative}/zarr.json"] = meta.read_bytes()
        node = zarr.open(str(meta.parent), mode="r")
        if isinstance(node, zarr.Array):
            found[relative] = node[...].tobytes()
    return found


def readme_yaml(marker: str) -> str:
    """The README's yaml block that contains `marker`."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    (block,) = [block for block in blocks if marker in block]
    return block


def test_demo_on_a_local_cluster_from_a_file_writes_the_embedded_bytes(tmp_path, embedded_demo):
    """The demo (synth, tasks, three baselines, scores, leaderboard) on an adaptive LocalCluster
    named by `$SEISCTF_CLUSTER` (`--cluster` is read the same way: the other tests): the same
    bytes as on the embedded cluster (conftest's `embedded_demo`, with the same options)."""
    embedded, layout = embedded_demo
    config = tmp_path / "local-cluster.yaml"
    config.write_text(ADAPTIVE_LOCAL)
    demo = ["demo", *DEMO_SIZES, "--layout", layout]
    by_env = seisctf(*demo, "--workdir", str(tmp_path / "env"), env={CLUSTER_ENV: str(config)})
    assert by_env.returncode == 0, by_env.stderr
    assert by_env.stderr.startswith(
        f"dask: distributed.LocalCluster from {config}, adaptive 1-2 workers; dashboard http"
    )
    local, configured = _store_files(embedded), _store_files(tmp_path / "env")
    assert set(local) == set(configured) and len(local) > 60
    assert [name for name in local if local[name] != configured[name]] == []
    for name in ("leaderboard.json",):
        assert json.loads((embedded / name).read_text()) == json.loads(
            (tmp_path / "env" / name).read_text()
        )


def test_adaptive_bounds_are_applied(tmp_path):
    """`adapt: {minimum: 1, maximum: 2}` on a LocalCluster built with no worker: one worker
    comes up, and a graph that asks for more never gets more than two."""
    config_file = tmp_path / "adaptive.yaml"
    config_file.write_text(
        ADAPTIVE_LOCAL.replace("maximum: 2}", "maximum: 2, interval: 200ms, target_duration: 1s}")
    )
    config = read_cluster_file(config_file)
    assert config.adapt == {
        "minimum": 1,
        "maximum": 2,
        "interval": "200ms",
        "target_duration": "1s",
    }
    with dask_client(cluster=config, quiet=True) as client:
        assert type(client.cluster).__name__ == "LocalCluster"
        client.wait_for_workers(1, timeout=120)
        futures = client.map(time.sleep, [0.5] * 20, pure=False)  # 10 s of work for one worker
        counts = []
        while not all(future.done() for future in futures):
            counts.append(len(client.scheduler_info()["workers"]))
            time.sleep(0.1)
        client.gather(futures)
        assert max(counts) == 2 and min(counts) >= 1, counts


def test_the_readme_slurm_file_gives_the_job_script_of_its_options(tmp_path):
    """The README's SLURM block, built (not scaled: no job is submitted) as `--cluster` builds
    it: dask-jobqueue's job script carries its cores, memory, queue, walltime and account, as
    dask-jobqueue's own tests check them, and starts its workers as embedded ones start: this
    python, seisctf.cluster preloaded, the malloc settings exported."""
    path = tmp_path / "slurm.yaml"
    path.write_text(readme_yaml("dask_jobqueue.SLURMCluster"))
    config = read_cluster_file(path)
    assert config.adapt == {"minimum": 0, "maximum": 20}
    options = config.options
    script = slurm_job_script(config)
    memory = parse_bytes(options["memory"])
    per_worker = memory // options["processes"]
    assert script.startswith("#!/usr/bin/env bash\n")
    for line in (
        f"#SBATCH --cpus-per-task={options['cores']}",
        f"#SBATCH --mem={math.ceil(memory / 2**30)}G",
        f"#SBATCH -p {options['queue']}",
        f"#SBATCH -t {options['walltime']}",
        "#SBATCH --account=seis",
    ):
        assert line in script.splitlines(), (line, script)
    assert f"{sys.executable} -m distributed.cli.dask_worker tcp://" in script
    assert f"--nworkers {options['processes']}" in script and "--nthreads 1" in script
    assert f"--memory-limit {format_bytes(per_worker).replace(' ', '')}" in script
    assert script.splitlines()[-1].endswith(" --preload seisctf.cluster")
    assert malloc_exports(script) == {
        "MALLOC_TRIM_THRESHOLD_": str(PRE_SPAWN_ENVIRON["MALLOC_TRIM_THRESHOLD_"]),
        **{name: str(value) for name, value in EMBEDDED_ENVIRON.items()},
    }


def slurm_job_script(config) -> str:
    """The job script of `config`'s cluster, built (not scaled: no job is submitted) as
    `--cluster` builds it."""
    cluster = configured_cluster(dataclasses.replace(config, adapt=None, scale=None))
    try:
        assert cluster.workers == {}  # nothing submitted
        return cluster.job_script()
    finally:
        cluster.close()


def malloc_exports(script: str) -> dict[str, str]:
    """The `export MALLOC_…=VALUE` lines of a job script, by name."""
    found = re.findall(r"^export (MALLOC_\w+)=(\S+)$", script, re.M)
    assert len(found) == len(dict(found)), script
    return dict(found)


def test_a_batch_jobs_python_and_the_users_worker_arguments_and_prologue_are_kept(tmp_path):
    """`python:` is the python the job runs (a path on the compute nodes); the user's own
    `worker_extra_args` and `job_script_prologue` stay, merged with the preload and the malloc
    exports (theirs after ours: their export of a malloc setting wins)."""
    path = tmp_path / "slurm.yaml"
    readme = readme_yaml("dask_jobqueue.SLURMCluster")
    path.write_text(
        readme.replace("adapt: {minimum: 0, maximum: 20}\n", "")  # options: is then last
        + "  worker_extra_args: [--resources, 'GPU=1']\n"
        + "  job_script_prologue: ['module load gcc', 'export MALLOC_ARENA_MAX=4']\n"
        + "python: /cluster/seisctf/venv/bin/python3\n"
    )
    script = slurm_job_script(read_cluster_file(path))
    lines = script.splitlines()
    assert lines[-1].startswith("/cluster/seisctf/venv/bin/python3 -m distributed.cli.dask_worker")
    assert sys.executable not in script
    assert lines[-1].endswith(" --resources GPU=1 --preload seisctf.cluster"), lines[-1]
    assert "module load gcc" in lines
    exports = [line for line in lines if line.startswith("export MALLOC_")]
    assert exports[-1] == "export MALLOC_ARENA_MAX=4" and len(exports) == 4, exports


def test_the_readme_kubernetes_file_is_well_formed_and_refused_without_its_package(tmp_path):
    """The Kubernetes example parses and passes the schema; where dask-kubernetes is not
    installed (it is not a dependency), using it is exit 3 naming the file and the module."""
    path = tmp_path / "kube.yaml"
    path.write_text(readme_yaml("dask_kubernetes.operator.KubeCluster"))
    config = read_cluster_file(path)
    assert config.options["image"] and config.options["n_workers"] == 2
    assert config.adapt == {"minimum": 1, "maximum": 50}
    if importlib.util.find_spec("dask_kubernetes") is not None:
        pytest.skip("dask-kubernetes is installed here (its refusal: the test below)")
    run = seisctf("synth", "global", "--out", str(tmp_path / "w.zarr"), "--cluster", str(path))
    assert run.returncode == 3, run.stderr
    assert run.stderr == (
        f"seisctf: invalid input: {path}: class dask_kubernetes.operator.KubeCluster: no module "
        "'dask_kubernetes' is installed (install the package that provides it, e.g. "
        "dask-jobqueue, dask-kubernetes or coiled)\n"
    )
    assert not (tmp_path / "w.zarr").exists()


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True)
)
BAD_FILES = {
    "no-module": (
        "class: seisctf_no_such_package.Cluster\n",
        ["{file}: class seisctf_no_such_package.Cluster: no module 'seisctf_no_such_package'"],
    ),
    "no-name": (
        "class: distributed.NoSuchCluster\n",
        ["{file}: class distributed.NoSuchCluster: module distributed has no 'NoSuchCluster'"],
    ),
    "not-a-cluster": (
        "class: collections.OrderedDict\n",
        ["{file}: class collections.OrderedDict: not a Dask cluster class"],
    ),
    "not-dotted": (
        "class: LocalCluster\n",
        ["{file}:1: class: 'LocalCluster' is not a dotted name MODULE.CLASS"],
    ),
    "unknown-key": (
        "class: distributed.LocalCluster\nadaptive: {minimum: 1}\n",
        ["{file}:2: adaptive: unknown key(s)", "'adaptive' was unexpected"],
    ),
    "unknown-adapt-key": (
        "class: distributed.LocalCluster\nadapt:\n  minimum: 1\n  maximun: 3\n",
        ["{file}:4: adapt.maximun: unknown key(s)"],
    ),
    "unknown-option": (
        IN_PROCESS.replace("n_workers: 1", "n_workers: 1, bogus_option: 3"),
        ["{file}:2: options.bogus_option: not an option of distributed.LocalCluster"],
    ),
    "adapt-and-scale": (
        "class: distributed.LocalCluster\nadapt: {maximum: 2}\nscale: 2\n",
        ["{file}: give either adapt: or scale:, not both"],
    ),
    "bounds": (
        "class: distributed.LocalCluster\nadapt: {minimum: 3, maximum: 2}\n",
        ["{file}: adapt: minimum 3 is above maximum 2"],
    ),
    "yaml-bomb": (BOMB, ["more than 10000 values once aliases are expanded (a YAML bomb?)"]),
    "python-not-a-batch-job": (
        IN_PROCESS + "python: /usr/bin/python3\n",
        [
            "{file}: python: only a dask-jobqueue class's batch jobs run a python named here; "
            "distributed.LocalCluster starts its workers itself"
        ],
    ),
    "python-twice": (
        "class: dask_jobqueue.SLURMCluster\noptions: {python: /usr/bin/python3}\n"
        "python: /usr/bin/python3\n",
        ["{file}: give either python: or options.python, not both"],
    ),
    "not-a-mapping": ("- distributed.LocalCluster\n", ["{file}:1: a Dask cluster is a mapping"]),
    "missing": (None, ["{file}: file not found"]),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_cluster_file_is_exit_3_naming_it_and_nothing_is_written(case, tmp_path, capsys):
    text, fragments = BAD_FILES[case]
    path = tmp_path / f"{case}.yaml"
    if text is not None:
        path.write_text(text)
    out = tmp_path / "wavefield.zarr"
    code = main(["synth", "global", "--out", str(out), *SMALL, "--cluster", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.startswith("seisctf: invalid input: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment.format(file=path) in err, err
    assert not out.exists()


def test_choice_of_cluster_follows_the_precedence(tmp_path, monkeypatch):
    """--scheduler > --cluster > $SEISCTF_SCHEDULER > $SEISCTF_CLUSTER > the recipe's
    `cluster:`; a file that is not chosen is not read."""
    good, env_file = tmp_path / "good.yaml", tmp_path / "env.yaml"
    good.write_text(IN_PROCESS)
    env_file.write_text(IN_PROCESS.replace("n_workers: 1", "n_workers: 2"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "recipe: 1\nsource:\n  synthetic_global: {sensors: 8, duration_s: 10, seed: 1}\n"
        f"cluster:\n{''.join('  ' + line + chr(10) for line in IN_PROCESS.splitlines())}"
        "outputs:\n  store: {url: w.zarr}\n"
    )
    parser = build_parser()

    def chosen(*argv: str):
        args = parser.parse_args(["build", str(recipe), *argv])
        args.check(args)
        return cluster_choice(args)

    missing = str(tmp_path / "absent.yaml")
    monkeypatch.delenv(SCHEDULER_ENV, raising=False)
    monkeypatch.setenv(CLUSTER_ENV, str(env_file))
    assert chosen("--scheduler", "tcp://127.0.0.1:1", "--cluster", missing) is None
    assert chosen("--cluster", str(good)).where == str(good)
    assert chosen().where == str(env_file)
    monkeypatch.setenv(SCHEDULER_ENV, "tcp://127.0.0.1:1")
    assert chosen() is None
    monkeypatch.delenv(SCHEDULER_ENV)
    monkeypatch.delenv(CLUSTER_ENV)
    from_recipe = chosen()
    assert from_recipe.where == f"{recipe}:4" and from_recipe.options == {
        "processes": False,
        "n_workers": 1,
    }
    assert from_recipe.option_where == {
        "processes": f"{recipe}:6",
        "n_workers": f"{recipe}:6",
    }


def test_build_runs_on_the_recipes_cluster_and_refuses_a_bad_section(tmp_path, capsys):
    """`seisctf build` starts the cluster of the recipe's `cluster:` (its `dask:` line names the
    recipe's line) and writes what the embedded cluster writes; an unknown option in the section
    is exit 3 naming its line, nothing written (refused before any cluster starts: run in this
    process, as the bad cluster files are)."""
    body = "source:\n  synthetic_global: {sensors: 16, duration_s: 60, seed: 3}\n"
    cluster = "cluster:\n  class: distributed.LocalCluster\n  options: {n_workers: 1}\n"
    for name, text in (("plain", body), ("clustered", body + cluster)):
        (tmp_path / f"{name}.yaml").write_text(
            f"recipe: 1\n{text}outputs:\n  store: {{url: w.zarr}}\n"
        )
    plain = seisctf("build", str(tmp_path / "plain.yaml"), "--workdir", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr.startswith("dask: embedded LocalCluster, ")
    recipe = tmp_path / "clustered.yaml"
    clustered = seisctf("build", str(recipe), "--workdir", str(tmp_path / "clustered"))
    assert clustered.returncode == 0, clustered.stderr
    # (The class's own warnings may come first: this LocalCluster keeps its default dashboard
    # port, perhaps taken.)
    announced = f"dask: distributed.LocalCluster from {recipe}:4; dashboard http"
    assert any(line.startswith(announced) for line in clustered.stderr.splitlines())
    written = _store_files(tmp_path / "clustered" / "w.zarr")
    reference = _store_files(tmp_path / "plain" / "w.zarr")
    assert written.keys() == reference.keys() and len(written) > 10
    differing = [key for key in written if written[key] != reference[key]]
    assert differing == [], differing  # the provenance records no cluster
    bad = tmp_path / "bad.yaml"
    # (Threads, no dashboard port that may be taken: the message is the only line.)
    no_workerz = "processes: false, dashboard_address: '127.0.0.1:0', n_workerz: 1"
    bad.write_text(
        f"recipe: 1\n{body}{cluster.replace('n_workers: 1', no_workerz)}"
        "outputs:\n  store: {url: bad.zarr}\n"
    )
    capsys.readouterr()
    code = main(["build", str(bad), "--workdir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err == (
        f"seisctf: invalid input: {bad}:6: options.n_workerz: not an option of "
        "distributed.LocalCluster (did you mean n_workers?)\n"
    )
    assert not (tmp_path / "bad.zarr").exists()


def test_scale_gives_that_many_workers_and_the_cluster_is_closed_at_the_end(tmp_path):
    path = tmp_path / "scaled.yaml"
    path.write_text(IN_PROCESS.replace("n_workers: 1", "n_workers: 0") + "scale: 2\n")
    config = read_cluster_file(path)
    assert (
        config.scale == 2
        and config.describe() == f"distributed.LocalCluster from {path}, 2 workers"
    )
    with dask_client(cluster=config, quiet=True) as client:
        client.wait_for_workers(2, timeout=60)
        assert len(client.scheduler_info()["workers"]) == 2
        cluster = client.cluster
    assert cluster.status.name == "closed" and client.status == "closed"


# A batch system that refuses every job, as `sbatch` does for a wrong account or partition.
SBATCH_REFUSAL = (
    "sbatch: error: Batch job submission failed: Invalid account or account/partition "
    "combination specified"
)
MSEED = (
    Path(obspy.__file__).parent / "clients/filesystem/tests/data/tsindex_data/CU/2018/001"
    / "CU.TGUH.00.BHZ.2018.001_first_minute.mseed"
)  # fmt: skip


def fake_slurm(folder: Path, accept_first: bool = False) -> dict[str, str]:
    """`sbatch` and `scancel` programs in `folder` that refuse every job (`sbatch` says
    SBATCH_REFUSAL, exit 1), or accept the first one only (job 4242, which never runs); the
    environment that puts them first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    accept = (
        f'if mkdir "{folder}/submitted" 2>/dev/null; then echo "Submitted batch job 4242"; '
        "exit 0; fi\n"
        if accept_first
        else ""
    )
    programs = {
        "sbatch": f"#!/bin/sh\n{accept}echo '{SBATCH_REFUSAL}' >&2\nexit 1\n",
        "scancel": "#!/bin/sh\nexit 0\n",
    }
    for name, script in programs.items():
        (folder / name).write_text(script)
        (folder / name).chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def readme_slurm(how: str) -> str:
    """The README's SLURM file, its scheduler's dashboard on a free port (8787 may be taken),
    with `scale: N` for `how == "scale N"`, else as it is (adaptive from 0 to 20 workers)."""
    text = readme_yaml("dask_jobqueue.SLURMCluster").replace(
        "options:\n", "options:\n  scheduler_options: {dashboard_address: ':0'}\n"
    )
    if how.startswith("scale "):
        text = text.replace("adapt: {minimum: 0, maximum: 20}", f"scale: {how.split()[1]}")
    return text


def assert_one_line_refusal(run: subprocess.CompletedProcess, message: str) -> None:
    """Exit 3; stderr is `message` as `seisctf: invalid input: …`, after at most the `dask:`
    line, and no traceback."""
    lines = run.stderr.splitlines()
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert lines[-1] == f"seisctf: invalid input: {message}", run.stderr
    assert all(line.startswith("dask: ") for line in lines[:-1]), run.stderr


@pytest.mark.parametrize("how", ["readme", "scale 2"])
def test_a_cluster_whose_batch_system_refuses_every_job_fails_in_one_line(how, tmp_path):
    """The README's SLURM file (adaptive from 0 workers: the first job is asked for when the
    work starts), or with `scale: 2` (one job of 8 workers, asked for at once), where `sbatch`
    refuses every job:
    exit 3 within a minute, one line naming the file with sbatch's own reason, the store not
    marked complete. (Before, distributed logged a 40-line traceback per try, forever.)"""
    path = tmp_path / "slurm.yaml"
    path.write_text(readme_slurm(how))
    out = tmp_path / "ingested.zarr"
    started = time.monotonic()
    run = seisctf("ingest", "waveforms", str(MSEED), "--out", str(out), "--cluster", str(path),
                  env=fake_slurm(tmp_path / "bin"), timeout_s=120)  # fmt: skip
    assert time.monotonic() - started < 60
    assert_one_line_refusal(
        run,
        f"{path}: dask_jobqueue.SLURMCluster could not start a worker: `sbatch` failed (exit "
        f"code 1): {SBATCH_REFUSAL}",
    )
    assert not out.exists() or ATTR_COMPLETE not in zarr.open_group(str(out), mode="r").attrs


def test_a_refused_job_among_accepted_ones_is_one_line_and_the_command_goes_on(tmp_path):
    """`scale: 16` (two jobs of 8 workers) where `sbatch` accepts the first job and refuses
    the second: one line says so and the command waits for its job (queued here for ever), as
    on a busy cluster."""
    path = tmp_path / "slurm.yaml"
    path.write_text(readme_slurm("scale 16"))
    log = tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "waveforms", str(MSEED)]
    command += ["--out", str(tmp_path / "out.zarr"), "--cluster", str(path)]
    environment = {**os.environ, **fake_slurm(tmp_path / "bin", accept_first=True)}
    with open(log, "w") as stderr:
        process = subprocess.Popen(command, stderr=stderr, env=environment)
    try:
        deadline = time.monotonic() + 60
        while "going on" not in log.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            time.sleep(0.2)
        time.sleep(2)  # nothing more comes, and the command still waits
        assert process.poll() is None, log.read_text()
    finally:
        process.kill()
        process.wait()
    lines = log.read_text().splitlines()
    refused = [line for line in lines if " could not start " in line]
    assert refused == [
        "dask: dask_jobqueue.SLURMCluster could not start a worker (`sbatch` failed (exit code "
        f"1): {SBATCH_REFUSAL}); going on with 1 started"
    ], lines
    others = [line for line in lines if line not in refused and not line.startswith("scan: ")]
    assert len(others) == 1, lines
    assert others[0].startswith(f"dask: dask_jobqueue.SLURMCluster from {path}, 16 workers;")


@pytest.mark.skipif(
    importlib.util.find_spec("dask_kubernetes") is None,
    reason="dask-kubernetes is not installed (not a dependency of seisctf): its refusal without "
    "a kubeconfig cannot be run here",
)
def test_a_kubernetes_cluster_without_credentials_fails_in_one_line(tmp_path):
    """The README's Kubernetes file where no kubeconfig exists (KUBECONFIG names a missing
    file): exit 3 within a minute, one line with the Kubernetes client's reason; the options
    are not blamed."""
    path = tmp_path / "kube.yaml"
    path.write_text(readme_yaml("dask_kubernetes.operator.KubeCluster"))
    no_kubeconfig = {"KUBECONFIG": str(tmp_path / "missing-kubeconfig"), "HOME": str(tmp_path)}
    started = time.monotonic()
    run = seisctf("ingest", "waveforms", str(MSEED), "--out", str(tmp_path / "out.zarr"),
                  "--cluster", str(path), env=no_kubeconfig, timeout_s=120)  # fmt: skip
    assert time.monotonic() - started < 60
    assert_one_line_refusal(
        run,
        f"{path}: dask_kubernetes.operator.KubeCluster could not start: ValueError: Unable to "
        "find valid credentials",
    )


def test_an_option_typo_of_a_local_cluster_of_processes_is_one_line_before_any_worker(tmp_path):
    """A misspelt worker option of a LocalCluster of worker processes is refused from the
    signatures before any worker starts: stderr is the one line (each worker used to print
    its traceback first), with the option it resembles."""
    path = tmp_path / "typo.yaml"
    path.write_text(
        "class: distributed.LocalCluster\n"
        "options:\n  n_workers: 2\n  threads_per_worker: 1\n  memory_limt: 1GB\n"
    )
    run = seisctf("ingest", "waveforms", str(MSEED), "--out", str(tmp_path / "out.zarr"),
                  "--cluster", str(path))  # fmt: skip
    assert run.returncode == 3, run.stderr
    assert run.stderr == (
        f"seisctf: invalid input: {path}:5: options.memory_limt: not an option of "
        "distributed.LocalCluster (did you mean memory_limit?)\n"
    )
