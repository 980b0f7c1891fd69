"""One registry per extension point: ingests, synthetic sources, transforms and recipe outputs.

A function joins an extension point where it is defined, with a decorator that names it and
declares its options (a JSON-schema object, validated before any work) and its properties::

    @TRANSFORMS.register("taper", options=parameters({"max_percentage": POSITIVE}), cheap=True)
    def taper(data: xr.DataArray, *, max_percentage: float = 0.05) -> xr.DataArray: ...

`seisctf build`, `seisctf ingest` and `seisctf synth` read the same registries, so a new
format, transform or dataset is one module plus its tests and docs (docs/architecture.md).

The registries live here, below every layer, because the layers that fill them sit above the
recipe engine that reads them (transforms and bundles are in `pipeline`, which may import
`recipes`, never the reverse). Looking a name up first imports the registry's plugin packages:
the one dynamic import of the package, listed in `PLUGINS` so a reader sees what it loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from seisctf.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    """A registered function: its name, the function, its options' JSON schema (an object
    schema: `properties`, `required`, `additionalProperties: false`) and its properties (what
    the engine needs to know about it, e.g. `cheap`, `seeded`)."""

    name: str
    function: Callable[..., Any]
    options: Mapping[str, Any]
    properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """The first paragraph of the function's docstring, on one line."""
        first = (self.function.__doc__ or "").strip().split("\n\n")[0]
        return " ".join(first.split())

    def __getattr__(self, name: str) -> Any:
        # Properties read as attributes (`entry.cheap`); an undeclared one is None.
        if name.startswith("__"):
            raise AttributeError(name)
        return self.properties.get(name)


class Registry:
    """Named functions of one extension point (`kind`, e.g. "transform"), filled by the
    decorators in its `plugins` packages."""

    def __init__(self, kind: str, plugins: tuple[str, ...]):
        self.kind = kind
        self.plugins = plugins
        self._entries: dict[str, Entry] = {}
        self._loaded = False

    def register(
        self, name: str, *, options: Mapping[str, Any], **properties: Any
    ) -> Callable[[F], F]:
        """Decorator: register the function under `name` with its options schema and
        properties; the function is returned unchanged."""

        def decorate(function: F) -> F:
            known = self._entries.get(name)
            if known is not None and known.function is not function:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = Entry(name, function, options, dict(properties))
            return function

        return decorate

    def load(self) -> Registry:
        """Import the plugin packages (once), so that every entry is registered."""
        if not self._loaded:
            for package in self.plugins:
                importlib.import_module(package)
            self._loaded = True
        return self

    def __getitem__(self, name: str) -> Entry:
        self.load()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise InvalidInput(self.kind, f"unknown {self.kind} {name!r}; known: {known}") from None

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def entries(self) -> list[Entry]:
        """Every entry, sorted by name."""
        self.load()
        return [self._entries[name] for name in sorted(self._entries)]


# What each registry loads; the packages import their registering modules.
PLUGINS = {
    "ingest": ("seisctf.formats",),
    "synthetic source": ("seisctf.synth",),
    "transform": ("seisctf.pipeline.transforms",),
    "recipe output": ("seisctf.pipeline.bundles", "seisctf.pipeline.picking_output"),
}
INGESTS = Registry("ingest", PLUGINS["ingest"])
SYNTHS = Registry("synthetic source", PLUGINS["synthetic source"])
TRANSFORMS = Registry("transform", PLUGINS["transform"])
OUTPUTS = Registry("recipe output", PLUGINS["recipe output"])
