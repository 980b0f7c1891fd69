"""A Dask cluster described by configuration: any cluster class by its dotted name, the options it
is built with, and how it scales (`--cluster FILE.yaml`, `$SEISCTF_CLUSTER`, a recipe's `cluster:`
section), in the style of dask's own configuration:

    class: dask_jobqueue.SLURMCluster
    options: {cores: 8, memory: 32GB, queue: normal, walltime: "02:00:00"}
    adapt: {minimum: 0, maximum: 20}      # or scale: 4
    python: /opt/seisctf/venv/bin/python  # a batch job's python (default: this one's)

`CLUSTER_SCHEMA` is the document's shape (checked, with its lines, where the YAML is read:
`seisctf.build.cluster_file`); `ClusterConfig.from_mapping` adds what a schema cannot say;
`cluster_class` imports the class and checks that it is a Dask cluster; `make_cluster` builds it
(an option the class does not take is refused naming its line, before anything starts where the
class's signatures say which options it takes; a dask-jobqueue class's job script also carries
the preloads and environment given, `batch_job_options`) and `scale_cluster` scales it or makes it
adaptive; `StartWatch` turns a worker the cluster fails to start (a job its batch system
refused) into one line. Naming a class runs the code of its module: a cluster file is trusted
like a script. Nothing here imports Dask until a cluster is built.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import importlib
import inspect
import logging
import re
import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from seisctf.errors import InvalidInput
from seisctf.wording import counted

# Where a command finds its cluster when no option names one: a scheduler's address, or a
# cluster file (`--scheduler` and `--cluster` win, in that order).
SCHEDULER_ENV = "SEISCTF_SCHEDULER"
CLUSTER_ENV = "SEISCTF_CLUSTER"
DOTTED_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$"
# `Cluster.adapt`'s keywords (distributed.deploy.Adaptive): bounds in workers, durations as
# Dask time strings ("1s", "500ms").
ADAPT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "minimum": {"type": "integer", "minimum": 0},
        "maximum": {"type": "integer", "minimum": 1},
        "interval": {"type": "string", "minLength": 1},
        "target_duration": {"type": "string", "minLength": 1},
        "wait_count": {"type": "integer", "minimum": 1},
    },
}
CLUSTER_SCHEMA = {
    "type": "object",
    "required": ["class"],
    "additionalProperties": False,
    "properties": {
        "class": {"type": "string", "pattern": DOTTED_NAME},
        "options": {"type": "object"},
        "adapt": ADAPT_SCHEMA,
        "scale": {"type": "integer", "minimum": 0},
        "python": {"type": "string", "minLength": 1},
    },
}
# How a constructor names a keyword it does not take (Python's TypeError, dask-jobqueue's
# ValueError).
UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '(?P<name>[^']+)'")
MAX_MESSAGE_CHARS = 400  # of a constructor's own message, quoted in ours
BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
# dask-jobqueue's error for a batch system's command that failed (`sbatch`, `qsub`, `bsub`, …).
JOB_COMMAND_FAILED = re.compile(
    r"Exit code: (?P<code>-?\d+)\s*Command:\s*(?P<command>[^\n]*)\s*stdout:\s*(?P<stdout>.*?)"
    r"\s*stderr:\s*(?P<stderr>.*)",
    re.S,
)


@dataclass(frozen=True)
class ClusterConfig:
    """A checked cluster description. `where`: the file (a recipe's: `FILE:LINE` of its
    `cluster:`) named in errors; `option_where`: `FILE:LINE` of each option."""

    class_path: str
    options: Mapping[str, Any]
    where: str
    adapt: Mapping[str, Any] | None = None
    scale: int | None = None
    option_where: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any], where: str, option_where: Mapping[str, str] | None = None
    ) -> ClusterConfig:
        """A config from a mapping already valid under `CLUSTER_SCHEMA`: `adapt` and `scale`
        exclude each other and adaptive bounds are ordered, else InvalidInput naming `where`."""
        adapt, scale = data.get("adapt"), data.get("scale")
        if adapt is not None and scale is not None:
            raise InvalidInput(where, "give either adapt: or scale:, not both")
        if adapt and adapt.get("minimum", 0) > adapt.get("maximum", float("inf")):
            raise InvalidInput(
                where, f"adapt: minimum {adapt['minimum']} is above maximum {adapt['maximum']}"
            )
        return cls(
            class_path=data["class"],
            options=dict(data.get("options") or {}),
            where=where,
            adapt=None if adapt is None else dict(adapt),
            scale=scale,
            option_where=dict(option_where or {}),
            python=data.get("python"),
        )

    def describe(self) -> str:
        """What the `dask:` line says: `CLASS from FILE, adaptive 0-20 workers`."""
        text = f"{self.class_path} from {self.where}"
        if self.adapt is not None:
            low, high = self.adapt.get("minimum", 0), self.adapt.get("maximum", "any")
            return f"{text}, adaptive {low}-{high} workers"
        if self.scale is not None:
            return f"{text}, {counted(self.scale, 'worker')}"
        return text


def cluster_class(config: ClusterConfig) -> type:
    """The class `config` names, imported; InvalidInput naming the file when its module is not
    installed (or fails to import), has no such name, or it is not a Dask cluster class (a
    subclass of `distributed.deploy.Cluster`)."""
    from distributed.deploy import Cluster

    module_name, _, name = config.class_path.rpartition(".")
    shown = f"class {config.class_path}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        if module_name == missing or module_name.startswith(f"{missing}."):
            raise InvalidInput(
                config.where,
                f"{shown}: no module {missing!r} is installed (install the package that "
                "provides it, e.g. dask-jobqueue, dask-kubernetes or coiled)",
            ) from None
        raise InvalidInput(
            config.where, f"{shown}: importing {module_name} failed: {error}"
        ) from None
    except ImportError as error:
        raise InvalidInput(
            config.where, f"{shown}: importing {module_name} failed: {error}"
        ) from None
    found = getattr(module, name, None)
    if found is None:
        raise InvalidInput(config.where, f"{shown}: module {module_name} has no {name!r}")
    if not (isinstance(found, type) and issubclass(found, Cluster)):
        raise InvalidInput(
            config.where,
            f"{shown}: not a Dask cluster class (a subclass of distributed.deploy.Cluster, e.g. "
            "distributed.LocalCluster or dask_jobqueue.SLURMCluster)",
        )
    return found


def make_cluster(
    config: ClusterConfig, preload: Sequence[str] = (), environ: Mapping[str, Any] | None = None
) -> Any:
    """The cluster, built with `config.options` (not scaled yet); a dask-jobqueue cluster's with
    `batch_job_options` (its workers preload `preload`, its job exports `environ`). An option the
    class (or a class it passes options on to, such as LocalCluster's workers) does not take is
    an InvalidInput naming the option's line: checked against their signatures before anything
    starts where they say (`accepted_options`), else as the constructor refuses it. Any other
    failure to start is an InvalidInput naming the file with the class's own reason (a
    TypeError: the options' fault; anything else, such as no credentials for a Kubernetes
    cluster: the cluster's)."""
    klass = cluster_class(config)
    _check_option_names(config, klass)
    options = batch_job_options(config, klass, preload, environ or {})
    try:
        return klass(**options)
    except Exception as error:
        refused = _refused_option(error, config.options)
        if refused is not None:
            failure = _not_an_option(config, refused, ())
        elif isinstance(error, TypeError):
            failure = InvalidInput(
                config.where,
                f"options: {config.class_path} refused them: {start_failure_reason(error)}",
            )
        else:
            failure = InvalidInput(
                config.where, f"{config.class_path} could not start: {start_failure_reason(error)}"
            )
    # Raised here, without the constructor's error as its context: the half-built cluster that
    # error's frames hold is then collected, and nothing (dask-kubernetes' exit handler) tries
    # to close it again as the command exits.
    gc.collect()
    raise failure


def batch_job_options(
    config: ClusterConfig, klass: type[Any], preload: Sequence[str], environ: Mapping[str, Any]
) -> dict[str, Any]:
    """`config.options` for `klass`; for a dask-jobqueue class (a batch job runs `dask worker`
    on another machine) merged with: `python` from `config.python`, `--preload M` for each of
    `preload` after the user's `worker_extra_args`, and `export NAME=VALUE` for each of
    `environ` before the user's `job_script_prologue` (their own exports come later and win).
    The user's lists are theirs as dask-jobqueue reads them: the option, else its dask config
    (`jobqueue.NAME.worker-extra-args`), else the deprecated `extra` / `env_extra`.
    InvalidInput naming the file for `python:` with another class or with `options.python`."""
    options = dict(config.options)
    core = sys.modules.get("dask_jobqueue.core")
    if core is None or not issubclass(klass, core.JobQueueCluster):
        if config.python is not None:
            raise InvalidInput(
                config.where,
                f"python: only a dask-jobqueue class's batch jobs run a python named here; "
                f"{config.class_path} starts its workers itself",
            )
        return options
    if config.python is not None:
        if "python" in options:
            raise InvalidInput(config.where, "give either python: or options.python, not both")
        options["python"] = config.python
    name = options.get("config_name") or klass.job_cls.default_config_name()
    arguments = _jobqueue_list(options, name, ("worker_extra_args", "extra"))
    for module in preload:
        if not any(arguments[i : i + 2] == ["--preload", module] for i in range(len(arguments))):
            arguments += ["--preload", module]
    exports = [f"export {key}={shlex.quote(str(value))}" for key, value in environ.items()]
    prologue = _jobqueue_list(options, name, ("job_script_prologue", "env_extra"))
    options["worker_extra_args"] = arguments
    options["job_script_prologue"] = exports + prologue
    return options


def _jobqueue_list(options: Mapping[str, Any], config_name: str, names: Sequence[str]) -> list:
    """The list dask-jobqueue would use for option `names[0]` (its deprecated alias
    `names[1]` where that is empty): the option, else `jobqueue.CONFIG_NAME.OPTION-NAME`."""
    import dask

    for option in names:
        value = options.get(option)
        if value is None:
            value = dask.config.get(f"jobqueue.{config_name}.{option.replace('_', '-')}", None)
        if value:
            return list(value)
    return []


def _not_an_option(config: ClusterConfig, name: str, accepted: Iterable[str]) -> InvalidInput:
    """`FILE:LINE: options.NAME: not an option of CLASS`, with the closest accepted name."""
    close = difflib.get_close_matches(name, sorted(accepted), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return InvalidInput(
        config.option_where.get(name, config.where),
        f"options.{name}: not an option of {config.class_path}{hint}",
    )


def _check_option_names(config: ClusterConfig, klass: type) -> None:
    """An option `klass` and the classes it passes options on to do not take, refused before
    anything starts (a LocalCluster's workers would each print its traceback first)."""
    accepted = accepted_options(klass, config.options)
    if accepted is None:
        return
    for name in config.options:
        if name not in accepted:
            raise _not_an_option(config, name, accepted)


def _option_forwards() -> dict[type, Callable[[Mapping[str, Any]], type | None]]:
    """Where the constructors whose `**kwargs` do not go to their base class send them (the
    classes of `distributed`): a LocalCluster to its worker class (a Nanny, whose worker is a
    Worker, unless `processes: false` or another `worker_class`), a Worker to its server."""
    from distributed import LocalCluster, Nanny, Worker
    from distributed.core import Server

    def local_worker(options: Mapping[str, Any]) -> type | None:
        chosen = options.get("worker_class")
        if chosen is not None:
            return chosen if isinstance(chosen, type) else None
        return Nanny if options.get("processes", True) in (True, None) else Worker

    return {LocalCluster: local_worker, Nanny: lambda _: Worker, Worker: lambda _: Server}


def accepted_options(klass: type, options: Mapping[str, Any]) -> set[str] | None:
    """The keywords a LocalCluster (or subclass) built with `options` takes, its workers' and
    their servers' included, read from their constructors' signatures (a subclass's `**kwargs`
    taken to go to its base class); None for other classes, or where some `**kwargs` goes where
    this cannot follow: those refuse an unknown option themselves, before starting anything."""
    from distributed import LocalCluster

    if not issubclass(klass, LocalCluster):
        return None
    return _keywords(klass, options, _option_forwards())


def _keywords(
    klass: type,
    options: Mapping[str, Any],
    forwards: Mapping[type, Callable[[Mapping[str, Any]], type | None]],
) -> set[str] | None:
    """The keywords `klass(...)` takes by name, following `**kwargs` as `accepted_options`."""
    names: set[str] = set()
    for owner in [base for base in klass.__mro__ if "__init__" in vars(base)]:
        parameters = inspect.signature(vars(owner)["__init__"]).parameters.values()
        names |= {p.name for p in parameters if p.kind in BY_NAME} - {"self"}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return names
        if owner in forwards:
            target = forwards[owner](options)
            further = None if target is None else _keywords(target, options, forwards)
            return None if further is None else names | further
    return None


def _refused_option(error: BaseException, options: Mapping[str, Any]) -> str | None:
    """The option an error (or an error it was raised from: a worker that failed to start)
    says is an unexpected keyword, if it is one of `options`."""
    seen: BaseException | None = error
    while seen is not None:
        found = UNEXPECTED_KEYWORD.search(str(seen))
        if found and found["name"] in options:
            return found["name"]
        seen = seen.__cause__ or seen.__context__
    return None


def start_failure_reason(error: BaseException) -> str:
    """Why a cluster or one of its workers did not start, on one line: the failed command and
    its stderr for a batch system's command (dask-jobqueue's `sbatch`, `qsub`, … error), else
    the error's type and message (at most `MAX_MESSAGE_CHARS` of it)."""
    text = str(error)
    command = JOB_COMMAND_FAILED.search(text)
    if command is not None:
        program = command["command"].split()[0] if command["command"].split() else "command"
        said = " ".join((command["stderr"] or command["stdout"]).split())
        return f"`{program}` failed (exit code {command['code']}): {said[:MAX_MESSAGE_CHARS]}"
    return f"{type(error).__name__}: {' '.join(text.split())[:MAX_MESSAGE_CHARS]}"


def scale_cluster(cluster: Any, config: ClusterConfig) -> None:
    """`cluster.adapt(**adapt)` or `cluster.scale(n)` as `config` asks (else as built)."""
    if config.adapt is not None:
        cluster.adapt(**config.adapt)
    elif config.scale is not None:
        cluster.scale(config.scale)


class StartWatch(logging.Filter):
    """A configured cluster's workers that fail to start, while it runs. Such a failure (a batch
    job its `sbatch` refused, a worker process that did not start) happens in the cluster's
    background work, which only logs it, a traceback each time it tries again, while the
    command waits for workers that never come. Here it is not logged: when none of the
    cluster's workers has started, it is raised as an InvalidInput naming the file in the main
    thread (a signal interrupts what it waits for), else one line on stderr says so, once.

    `with StartWatch(config) as watch:` around the cluster's life; set `watch.cluster` once it
    is built, and `watch.disarm()` before closing it. Outside the main thread a failure is only
    kept in `watch.failure`."""

    SIGNAL = signal.SIGUSR1
    # Where asyncio's and tornado's event loops log an exception nobody awaited.
    LOGGERS = ("tornado.application", "asyncio")

    def __init__(self, config: ClusterConfig) -> None:
        super().__init__()
        self.config = config
        self.cluster: Any = None
        self.failure: InvalidInput | None = None
        self.armed = False
        self._warned = False
        self._previous_handler: Any = None
        # Held while the signal is sent: once disarmed, none is on its way (the default action
        # of SIGUSR1, restored at the end, would end the process).
        self._sending = threading.Lock()

    def __enter__(self) -> StartWatch:
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(self.SIGNAL, self._raise_failure)
            self.armed = True
        return self

    def disarm(self) -> None:
        """No failure is raised in the main thread from now on (they are still not logged)."""
        with self._sending:
            self.armed = False

    def __exit__(self, *exc_info: object) -> None:
        self.disarm()
        if self._previous_handler is not None:
            signal.signal(self.SIGNAL, self._previous_handler)
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        """False (not logged) for a worker's failure to start, which is answered instead."""
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return True
        worker = self._worker_not_started(error)
        if worker is None:
            return True
        # Marked failed, as it is: a Dask cluster that is closed asserts that each worker it
        # made is closed or failed, and one left "created" failed that (and the exit waited).
        with contextlib.suppress(AttributeError, TypeError):
            from distributed.core import Status

            worker.status = Status.failed
        reason = start_failure_reason(error)
        running = self._running_workers()
        if running:
            if not self._warned:
                self._warned = True
                print(
                    f"dask: {self.config.class_path} could not start a worker ({reason}); "
                    f"going on with {running} started",
                    file=sys.stderr,
                    flush=True,
                )
        elif self.failure is None:
            self.failure = InvalidInput(
                self.config.where, f"{self.config.class_path} could not start a worker: {reason}"
            )
            with self._sending:
                if self.armed:
                    main = threading.main_thread().ident
                    assert main is not None  # the main thread has started
                    signal.pthread_kill(main, self.SIGNAL)
        return False

    @staticmethod
    def _worker_not_started(error: BaseException) -> Any:
        """The object whose `start` raised `error` while a Dask cluster was starting it (one of
        its workers or batch jobs), else None."""
        from distributed.deploy import Cluster

        cluster_seen = False
        for frame, _ in traceback.walk_tb(error.__traceback__):
            owner = frame.f_locals.get("self")
            if cluster_seen and frame.f_code.co_name == "start" and owner is not None:
                return owner
            cluster_seen = cluster_seen or isinstance(owner, Cluster)
        return None

    def _running_workers(self) -> int:
        """How many of the cluster's workers (or batch jobs) have started."""
        workers = list((getattr(self.cluster, "workers", None) or {}).values())
        return sum(getattr(getattr(w, "status", None), "name", None) == "running" for w in workers)

    def _raise_failure(self, signum: int, frame: Any) -> None:
        if self.armed and self.failure is not None:
            self.armed = False
            raise self.failure
