"""One registry per extension point: ingests, synthetic sources, transforms, recipe outputs,
metrics and baselines; each plugin a typed object (`Ingest`, `Synth`, `Transform`, `Output`,
`Metric`, `Baseline`).

A function joins an extension point where it is defined, with a decorator that names it and
declares its options (by default the dataclass of its keyword-only parameters, else an options
dataclass: `seisctf.options`; their JSON schema is checked before any work) and its typed
properties::

    @TRANSFORMS.register("taper", cheap=True)
    def taper(
        data: xr.DataArray, *, max_percentage: Annotated[float, spec(maximum=0.5)] = 0.05
    ) -> xr.DataArray: ...

A property the plugin's class does not declare is a TypeError where it is registered.

Discovery is by entry points, as xarray finds its backends: each installed distribution names
its plugins in an entry-point group (`ENTRY_POINT_GROUPS`: `seisctf.ingests`,
`seisctf.synths`, `seisctf.transforms`, `seisctf.outputs`, `seisctf.metrics`,
`seisctf.baselines`), one entry point
per plugin, its name the plugin's and its value the module that registers it (or `module:attr`,
an object of the plugin's class). seisctf's own plugins are listed the same way in its
pyproject.toml. Looking a name up imports only that plugin's module; listing every plugin
imports them all; `names()` reads the installed metadata alone (`seisctf --help`).

The registries live here, below every layer, because the layers that fill them sit above the
recipe engine that reads them (transforms and bundles are in `pipeline`, which may import
`build`, never the reverse).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Generic, TypeVar

from seisctf.errors import InvalidInput
from seisctf.options import LOCATION_SCHEMA, options_from_signature, options_schema

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Plugin:
    """A registered function: its name, the function and its options' JSON schema (an object
    schema: `properties`, `required`, `additionalProperties: false`); `options_type` is the
    options dataclass the schema was made from, if any (`seisctf.options`)."""

    name: str
    function: Callable[..., Any]
    options: Mapping[str, Any]
    options_type: type | None = field(default=None, kw_only=True)

    @property
    def summary(self) -> str:
        """The first paragraph of the function's docstring, on one line."""
        first = (self.function.__doc__ or "").strip().split("\n\n")[0]
        return " ".join(first.split())


@dataclass(frozen=True)
class Ingest(Plugin):
    """A recipe source that ingests raw files: `function(context, **options) -> xr.Dataset`
    writes `context.source_url` (`seisctf.formats.shared.source`). `command`: its
    `seisctf ingest COMMAND` (default: its name); `cli`: the plain function that command runs
    when seisctf declares the command's flags itself (else the flags come from the options);
    `event_windows`: it writes an event-window store (a `picking` output can take it)."""

    command: str | None = None
    help: str | None = None
    cli: Callable[..., Any] | None = None
    event_windows: bool = False


@dataclass(frozen=True)
class Synth(Plugin):
    """A synthetic recipe source: `function(context, *, seed, **options) -> xr.Dataset`."""


@dataclass(frozen=True)
class Transform(Plugin):
    """A recipe transform, `function(data: xr.DataArray, **options) -> xr.DataArray`, identical
    for any chunking. `cheap`: re-reading its input is cheaper than checkpointing it; `seeded`:
    it draws noise (given `seed` and `variable`); `two_pass`: it reads its input twice (a level,
    a mean); `level_window(array, **options)`: the trace levels it needs, summed while a
    checkpoint is written (given as `trace_rms`); `prepare(context, options)`: options
    completed from the build's context."""

    cheap: bool = False
    seeded: bool = False
    two_pass: bool = False
    level_window: Callable[..., Any] | None = None
    prepare: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Output(Plugin):
    """A recipe output, `function(recipe, context, dataset: () -> xr.Dataset) -> None`.
    `private`: the option naming its private URL; `withheld`: it holds truth (the build draws a
    secret); `check(recipe)`: checks of the recipe before any work."""

    private: str | None = None
    withheld: bool = False
    check: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Metric(Plugin):
    """A score of a CTF task besides E1..E12 (`seisctf score ctf --metric NAME`):
    `function(truth, submission) -> float | None` (or a Dask scalar), both float64 Dask arrays
    (time, sensors) of the rows the task's E score reads; reported as returned (None, or not
    finite: unscorable), in the organiser's result only."""


@dataclass(frozen=True)
class Baseline(Plugin):
    """A CTF baseline (`seisctf baseline NAME`): `function(pair, public, **options) ->
    dask.array` predicts one pair's test array (float32, `pair.shape`) from the public arrays
    (`{name: dask array}`) the pair names (`pair`: a `ctf_json.CtfPair`, its `inputs` the
    training matrices and burn-in). Declared, not yet read by the command: `family`, the model
    family ("linear autoregression"); `library`, the distribution that implements it; `extra`,
    the optional dependencies it needs (`pip install seisctf[EXTRA]`); `seeded`, it draws
    random numbers (given `seed`); `model`, a zoo model's description
    (`seisctf.baselines.zoo.family.ZooFamily`), None for the others."""

    family: str = "reference"
    library: str = "seisctf"
    extra: str | None = None
    seeded: bool = False
    model: Any = None


P = TypeVar("P", bound=Plugin)

# The entry-point group of each extension point.
ENTRY_POINT_GROUPS = {
    "ingest": "seisctf.ingests",
    "synthetic source": "seisctf.synths",
    "transform": "seisctf.transforms",
    "recipe output": "seisctf.outputs",
    "metric": "seisctf.metrics",
    "baseline": "seisctf.baselines",
}


class Registry(Generic[P]):
    """Named plugins of one extension point (`kind`, e.g. "transform"), each an object of
    `plugin_class`, found through the entry points of `group` (by default the kind's)."""

    def __init__(
        self,
        kind: str,
        plugin_class: type[P],
        group: str | None = None,
        injected: tuple[str, ...] = (),
        optional: tuple[str, ...] = (),
        common: Mapping[str, Any] | None = None,
    ):
        self.kind = kind
        self.plugin_class = plugin_class
        self.group = group or ENTRY_POINT_GROUPS[kind]
        # What the engine passes a plugin besides a recipe's options, and the options it
        # supplies when a recipe leaves them out (`options_from_signature`).
        self.injected, self.optional = injected, optional
        # Options every plugin of the kind takes, which the engine reads and never passes on
        # (an ingest's `store`): added to each plugin's schema.
        self.common = dict(common or {})
        self._entries: dict[str, P] = {}
        self._loaded: set[str] = set()
        self._points: dict[str, importlib.metadata.EntryPoint] | None = None

    def register(
        self, name: str, *, options: type | None = None, **properties: Any
    ) -> Callable[[F], F]:
        """Decorator: register the function under `name` with its options (a dataclass, by
        default that of its keyword-only parameters; its JSON schema is made from it,
        `seisctf.options`) and its properties (fields of `plugin_class`); returns it unchanged."""
        declared = {item.name for item in fields(self.plugin_class)}
        unknown = sorted(set(properties) - declared)
        if unknown:
            raise TypeError(f"{self.kind} {name!r}: no such property {', '.join(unknown)}")

        def decorate(function: F) -> F:
            options_type = options
            if options_type is None:
                options_type = options_from_signature(function, self.injected, self.optional)
            if not (isinstance(options_type, type) and is_dataclass(options_type)):
                raise TypeError(f"{self.kind} {name!r}: options are a dataclass")
            schema = options_schema(options_type)
            accepted = {**self.common, **schema.get("properties", {})}
            schema = {**schema, "properties": accepted}
            self.add(
                self.plugin_class(name, function, schema, options_type=options_type, **properties)
            )
            return function

        return decorate

    def add(self, plugin: P) -> P:
        """Register a plugin object (what an entry point naming an object gives)."""
        known = self._entries.get(plugin.name)
        if known is not None and known.function is not plugin.function:
            raise ValueError(f"{self.kind} {plugin.name!r} is registered twice")
        self._entries[plugin.name] = plugin
        return plugin

    def _entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The installed entry points of `group` by name, read once a process."""
        if self._points is None:
            self._points = self._read_entry_points()
        return self._points

    def _read_entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        found: dict[str, importlib.metadata.EntryPoint] = {}
        for entry_point in importlib.metadata.entry_points(group=self.group):
            other = found.get(entry_point.name)
            if other is not None and other.value != entry_point.value:
                raise InvalidInput(
                    f"{self.kind} {entry_point.name!r}",
                    f"named by two installed packages: {_origin(other)} and "
                    f"{_origin(entry_point)}; uninstall one",
                )
            found[entry_point.name] = entry_point
        return found

    def _load(self, entry_point: importlib.metadata.EntryPoint) -> None:
        if entry_point.name in self._loaded:
            return
        try:
            loaded = entry_point.load()
        except Exception as error:
            raise InvalidInput(
                f"{self.kind} {entry_point.name!r} ({_origin(entry_point)})",
                f"its module cannot be imported: {type(error).__name__}: {error}",
            ) from error
        if isinstance(loaded, self.plugin_class):
            self.add(loaded)
        self._loaded.add(entry_point.name)
        if entry_point.name not in self._entries:
            raise InvalidInput(
                f"{self.kind} {entry_point.name!r} ({_origin(entry_point)})",
                f"its entry point {entry_point.value!r} registers no {self.kind} of that name",
            )

    def load(self) -> Registry[P]:
        """Import every installed plugin of this extension point."""
        for entry_point in self._entry_points().values():
            self._load(entry_point)
        return self

    def names(self) -> list[str]:
        """Every plugin's name, sorted, from the installed metadata (nothing imported)."""
        return sorted(set(self._entry_points()) | set(self._entries))

    def __getitem__(self, name: str) -> P:
        if name not in self._entries:
            entry_point = self._entry_points().get(name)
            if entry_point is None:
                known = ", ".join(self.names())
                raise InvalidInput(self.kind, f"unknown {self.kind} {name!r}; known: {known}")
            self._load(entry_point)
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._entry_points()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def entries(self) -> list[P]:
        """Every plugin, sorted by name (each imported)."""
        self.load()
        return [self._entries[name] for name in sorted(self._entries)]


def installed_names() -> dict[str, list[str]]:
    """{kind: the names of its installed plugins, sorted}, read from the installed metadata in
    one pass (nothing imported)."""
    groups = {group: kind for kind, group in ENTRY_POINT_GROUPS.items()}
    found: dict[str, set[str]] = {kind: set() for kind in ENTRY_POINT_GROUPS}
    for distribution in importlib.metadata.distributions():
        for entry_point in distribution.entry_points:
            if entry_point.group in groups:
                found[groups[entry_point.group]].add(entry_point.name)
    return {kind: sorted(names) for kind, names in found.items()}


def _origin(entry_point: importlib.metadata.EntryPoint) -> str:
    """The distribution that declares an entry point, and its value."""
    dist = entry_point.dist
    package = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "unknown"
    return f"{package}: {entry_point.value}"


INGESTS: Registry[Ingest] = Registry("ingest", Ingest, common={"store": LOCATION_SCHEMA})
SYNTHS: Registry[Synth] = Registry("synthetic source", Synth)
TRANSFORMS: Registry[Transform] = Registry(
    "transform", Transform, injected=("variable", "trace_rms"), optional=("seed",)
)
OUTPUTS: Registry[Output] = Registry("recipe output", Output)
METRICS: Registry[Metric] = Registry("metric", Metric)
BASELINES: Registry[Baseline] = Registry(
    "baseline", Baseline, injected=("pair", "public"), optional=("seed",)
)
REGISTRIES: tuple[Registry[Any], ...] = (INGESTS, SYNTHS, TRANSFORMS, OUTPUTS, METRICS, BASELINES)
