"""Baseline predictors of a CTF bundle, each a lazy submission in the contract format, each
registered in `seisctf.registry.BASELINES` (other packages add theirs through the
`seisctf.baselines` entry points).

- `zeros`: all zeros (scores exactly 0 on every task).
- `persistence`: the most recent input row repeated (burn-in if the pair has one, else the last
  training matrix); for reconstruction, the noisy input itself.
- `mean`: the per-sensor time mean of the pair's inputs (training matrices and burn-in), repeated.
"""

from __future__ import annotations

from collections.abc import Mapping

import dask.array as da
import numpy as np

from seisctf import conventions as cv
from seisctf import storage
from seisctf.baselines.zoo.budget import FULL
from seisctf.baselines.zoo.runs import model_run, run_all
from seisctf.ctf_json import CtfManifest, CtfPair
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.registry import BASELINES, Baseline


def _inputs(pair: CtfPair, public: Mapping[str, da.Array]) -> list[da.Array]:
    return [public[name] for name in pair.inputs]


def _repeat_row(row: da.Array, shape: tuple[int, int]) -> da.Array:
    return da.broadcast_to(row.reshape(1, -1), shape).rechunk(cv.time_space_chunks(*shape))


@BASELINES.register("zeros")
def zeros(pair: CtfPair, public: Mapping[str, da.Array]) -> da.Array:
    return da.zeros(pair.shape, dtype=np.float32, chunks=cv.time_space_chunks(*pair.shape))


@BASELINES.register("persistence")
def persistence(pair: CtfPair, public: Mapping[str, da.Array]) -> da.Array:
    if cv.METRIC_RECON in pair.metrics:
        return public[pair.train[0]]
    return _repeat_row(_inputs(pair, public)[-1][-1], pair.shape)


@BASELINES.register("mean")
def mean(pair: CtfPair, public: Mapping[str, da.Array]) -> da.Array:
    stacked = da.concatenate(_inputs(pair, public), axis=0)
    return _repeat_row(stacked.mean(axis=0).astype(np.float32), pair.shape)


def _baseline(model: str) -> Baseline:
    if model not in BASELINES:
        raise InvalidInput(f"baseline {model!r}", f"unknown; choose from {BASELINES.names()}")
    return BASELINES[model]


def predict(model: str, public: StoreLocation, seed: int | None = None) -> dict[str, da.Array]:
    """Lazy submission arrays {X1test: …, …} (float32, (time, sensors)) of a baseline for the
    bundle at `public` (`seed`: of a seeded baseline)."""
    baseline = _baseline(model)
    options = {} if seed is None else {"seed": seed}
    manifest = CtfManifest.from_attrs(storage.read_attrs(public), public.url)
    inputs = {name for pair in manifest.pairs for name in pair.inputs}
    arrays = {name: storage.read_array(public, name) for name in inputs}
    return {
        pair.test: baseline.function(pair, arrays, **options).astype(np.float32)
        for pair in manifest.pairs
    }


def write_baseline(
    model: str,
    public: StoreLocation,
    submission: StoreLocation,
    quiet: bool = False,
    seed: int | None = None,
    search: str = FULL,
) -> None:
    """Write a baseline's submission as a zarr group (the contract's submission format); a zoo
    model's as `seisctf baseline zoo` writes it (one task a pair, its record in the attrs;
    `search`: its budget, `seisctf.baselines.zoo.budget`)."""
    baseline = _baseline(model)
    if seed is not None and not baseline.seeded:
        raise InvalidInput(f"baseline {model!r}", "draws no random numbers: give no seed")
    if baseline.model is not None:
        baseline.model.require()
        manifest = CtfManifest.from_attrs(storage.read_attrs(public), public.url)
        run = model_run(baseline.model, seed or 0, manifest, submission, search)
        run_all(public, manifest, [run], quiet=quiet)
        return
    arrays = predict(model, public, seed)
    storage.write_arrays(
        arrays, submission, {"model": model}, label=f"baseline {model}", quiet=quiet
    )
