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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dask.array as da
import numpy as np

from seisctf import conventions as cv
from seisctf.baselines.zoo.denoise import choose_denoiser
from seisctf.baselines.zoo.predict import pair_prediction
from seisctf.baselines.zoo.spec import (
    DEFAULT_REDUCED_RANK,
    ZOO_EXTRA,
    Forecast,
    Reconstruct,
    ZooFamily,
)
from seisctf.ctf_json import CtfPair
from seisctf.registry import BASELINES


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
    (`register`); returns the forecast unchanged."""
    if not grid:
        raise TypeError(f"zoo model {name!r}: its grid has no settings")

    def decorate(forecast: Forecast) -> Forecast:
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


def register(model: ZooFamily) -> None:
    """Register `model` as the baseline `model.name`: `seisctf baseline NAME --seed S`."""

    def predict(pair: CtfPair, public: Mapping[str, da.Array], *, seed: int = 0) -> da.Array:
        inputs = [np.asarray(public[name]) for name in pair.inputs]
        denoiser = None
        if cv.METRIC_RECON in pair.metrics:
            arrays = {name: np.asarray(array, dtype=np.float64) for name, array in public.items()}
            denoiser = choose_denoiser(arrays, pair.train[0])
        prediction = pair_prediction(model, pair, inputs, seed, denoiser=denoiser).prediction
        return da.from_array(prediction, chunks=cv.time_space_chunks(*pair.shape))

    predict.__name__ = model.name
    BASELINES.register(
        model.name,
        family=model.family,
        library=model.library,
        extra=None if model.library == "seisctf" else ZOO_EXTRA,
        seeded=model.seeded,
        model=model,
    )(predict)
