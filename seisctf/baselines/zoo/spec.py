"""What a zoo model is (`ZooFamily`) and the contract of its forecast and denoiser; the
decorator that registers one is `seisctf.baselines.zoo.family.zoo_family`."""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from seisctf.baselines.zoo.library_calls import import_quietly
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
        """Import `module` (what it prints or warns on import dropped: some libraries announce
        themselves), or fail naming the extra that installs it."""
        try:
            import_quietly(self.module)
        except ImportError as error:
            raise InvalidInput(
                f"baseline {self.name!r}",
                f"needs {self.library} ({error}); install it with "
                f"`pip install 'seisctf[{ZOO_EXTRA}]'`",
            ) from error
