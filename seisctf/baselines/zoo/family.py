"""What a model of the zoo is: a forecaster of (time, features) series from a real library, with
a fixed grid of settings that the hold-out chooses among (`seisctf.baselines.zoo.selection`).

A family module defines its forecast and registers it::

    @zoo_family(
        "bop_dmd",
        family="optimised DMD (BOP-DMD)",
        library="pydmd",
        grid=({"rank": 8}, {"rank": 16}),
        paper="Opt DMD",
    )
    def bop_dmd(series, steps, settings, seed): ...

`forecast(series, steps, settings, seed) -> (steps, features)`: `series` is a list of float64
arrays (time, features), oldest first, each a stretch of the same field (the pair's training
matrices, then its burn-in); the forecast is of the `steps` rows that follow the last series'
last row. Features are sensors, or POD coefficients when the family works in a reduced space
(`reduced_rank`: the number of POD modes of the training arrays it is given; None: the
sensors). `settings` is one entry of `grid`; `seed` seeds every random draw (families with
`seeded=False` must not draw). A forecast may be non-finite (a diverging model): the zoo
records it and submits zeros for it.

`reconstruct(noisy, settings, seed) -> noisy.shape`, if the family has one, denoises a
reconstruction pair's input; without one the zoo's shared denoiser is used
(`seisctf.baselines.zoo.predict`).

The decorator registers the family as a baseline in `seisctf.registry.BASELINES` (the one
registry of baselines: `seisctf baseline NAME` runs it) with its family, library and the extra
that installs the library (`pip install 'seisctf[zoo]'`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from seisctf.errors import InvalidInput

DEFAULT_REDUCED_RANK = 16  # POD modes a reduced family works on (fewer if the data has fewer)
ZOO_EXTRA = "zoo"


class Forecast(Protocol):
    def __call__(
        self, series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
    ) -> np.ndarray: ...


class Reconstruct(Protocol):
    def __call__(self, noisy: np.ndarray, settings: Mapping[str, Any], seed: int) -> np.ndarray: ...


@dataclass(frozen=True)
class ZooFamily:
    """A zoo model: `name` (the baseline's), `family` (what the model is), `library` (the
    distribution implementing it, whose version results record), `module` (what to import to
    check it is installed), `forecast`, `grid` (the settings the hold-out tries, in order: the
    search budget is its length), `seeded`, `reduced_rank`, `reconstruct`, `paper` (the
    family's name in the Seismic Wavefield CTF paper's table, if it has one)."""

    name: str
    family: str
    library: str
    module: str
    forecast: Forecast
    grid: tuple[Mapping[str, Any], ...]
    seeded: bool = False
    reduced_rank: int | None = DEFAULT_REDUCED_RANK
    reconstruct: Reconstruct | None = None
    paper: str | None = None

    def library_version(self) -> str:
        """The installed version of `library` ("unknown" for one without metadata)."""
        try:
            return importlib.metadata.version(self.library)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    def require(self) -> None:
        """Import `module` (what it prints or warns on import swallowed: some libraries
        announce themselves), or fail naming the extra that installs it."""
        try:
            sink = io.StringIO()
            with (
                contextlib.redirect_stdout(sink),
                contextlib.redirect_stderr(sink),
                warnings.catch_warnings(),
            ):
                warnings.simplefilter("ignore")
                importlib.import_module(self.module)
        except ImportError as error:
            raise InvalidInput(
                f"baseline {self.name!r}",
                f"needs {self.library} ({error}); install it with "
                f"`pip install 'seisctf[{ZOO_EXTRA}]'`",
            ) from error


def zoo_family(
    name: str,
    *,
    family: str,
    library: str,
    grid: Sequence[Mapping[str, Any]],
    module: str | None = None,
    seeded: bool = False,
    reduced_rank: int | None = DEFAULT_REDUCED_RANK,
    reconstruct: Reconstruct | None = None,
    paper: str | None = None,
) -> Callable[[Forecast], Forecast]:
    """Decorator: describe `forecast` as the zoo model `name` and register it as a baseline
    (`seisctf.baselines.zoo.predict.register`); returns the forecast unchanged."""
    if not grid:
        raise TypeError(f"zoo model {name!r}: its grid has no settings")

    def decorate(forecast: Forecast) -> Forecast:
        from seisctf.baselines.zoo.predict import register

        register(
            ZooFamily(
                name=name,
                family=family,
                library=library,
                module=module or library,
                forecast=forecast,
                grid=tuple(dict(settings) for settings in grid),
                seeded=seeded,
                reduced_rank=reduced_rank,
                reconstruct=reconstruct,
                paper=paper,
            )
        )
        return forecast

    return decorate
