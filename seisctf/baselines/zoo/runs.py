"""`seisctf baseline zoo`: every installed zoo model's submissions for a public CTF bundle, on
the cluster, one Dask task per (model, seed, pair), resumable.

Layout of the output folder (one submission per model and seed, the contract's submission
format)::

    OUT/<model>-seed<seed>.zarr   X1test … (float32, (time, sensors)), attrs `zoo` (below)

A seeded model runs once per seed; a deterministic one once (seed 0). Each task reads its
pair's inputs, predicts (`predict.pair_prediction`) and writes the pair's array, then the
array's attrs `zoo`: the record of how it was made and the run's `fingerprint` (model, seed,
library version, the public manifest). A re-run skips every pair whose array carries the
same fingerprint, so an interrupted zoo finishes where it stopped. Each submission's group
attrs (written last, with its completion marker) hold `model`, `family`, `library`,
`library_version`, `seed`, `seeded`, `search` (`full`, or `quick`: a smoke test, `budget`),
`paper` (the family's name in the CTF paper's table),
`fingerprint` and `pairs` ({test: record}; a record also holds the task's `cpu_seconds`,
`wall_seconds` and the worker's `peak_rss_mib` during it).
"""

from __future__ import annotations

import hashlib
import json
import resource
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dask
import numpy as np
import zarr

from seisctf import conventions as cv
from seisctf import storage
from seisctf.baselines.zoo.budget import FULL
from seisctf.baselines.zoo.denoise import choose_denoiser
from seisctf.baselines.zoo.family import ZooFamily
from seisctf.baselines.zoo.predict import pair_prediction
from seisctf.cluster import compute, peak_memory_bytes, reset_peak_memory
from seisctf.ctf_json import CtfManifest, CtfPair
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.registry import BASELINES


@dataclass(frozen=True)
class ZooRun:
    """One model at one seed: where its submission goes and what identifies its work."""

    model: ZooFamily
    seed: int
    submission: StoreLocation
    fingerprint: str
    search: str = FULL

    @property
    def name(self) -> str:
        """The submission's name: `<model>-seed<seed>`."""
        return f"{self.model.name}-seed{self.seed}"


def zoo_models(names: Sequence[str] | None = None) -> list[ZooFamily]:
    """The zoo models named (default: every registered zoo model whose library is installed)."""
    if names:
        unknown = [name for name in names if name not in BASELINES]
        if unknown:
            raise InvalidInput("--models", f"unknown baseline(s) {', '.join(unknown)}")
        models = [BASELINES[name].model for name in names]
        plain = [name for name, model in zip(names, models, strict=True) if model is None]
        if plain:
            raise InvalidInput("--models", f"not zoo models: {', '.join(plain)}")
        for model in models:
            model.require()
        return models
    found = []
    for baseline in BASELINES.entries():
        if baseline.model is None:
            continue
        try:
            baseline.model.require()
        except InvalidInput:
            continue
        found.append(baseline.model)
    return found


def _manifest_digest(manifest: CtfManifest) -> str:
    return hashlib.sha256(json.dumps(manifest.to_json(), sort_keys=True).encode()).hexdigest()


def model_run(
    model: ZooFamily,
    seed: int,
    manifest: CtfManifest,
    submission: StoreLocation,
    search: str = FULL,
) -> ZooRun:
    """The run of `model` at `seed` on the bundle of `manifest`, written to `submission`, with
    the `search` budget (`budget.FULL`, or `budget.QUICK`: a smoke test)."""
    identity = [model.name, seed, model.library, model.library_version(), search]
    fingerprint = hashlib.sha256(
        json.dumps([*identity, _manifest_digest(manifest)]).encode()
    ).hexdigest()[:32]
    return ZooRun(model, seed, submission, fingerprint, search)


def plan_runs(
    models: Sequence[ZooFamily],
    seeds: Sequence[int],
    manifest: CtfManifest,
    out: StoreLocation,
    search: str = FULL,
) -> list[ZooRun]:
    """A run per seeded model and seed, one per deterministic model (seed 0), each written to
    OUT/<model>-seed<seed>.zarr."""
    return [
        model_run(model, seed, manifest, out / f"{model.name}-seed{seed}.zarr", search)
        for model in models
        for seed in (seeds if model.seeded else (0,))
    ]


def _done_pairs(run: ZooRun) -> set[str]:
    """The pairs whose arrays a previous run of the same fingerprint finished, as the store
    holds them now (its consolidated metadata, written at the end, is not read)."""
    try:
        group = zarr.open_group(
            run.submission.url,
            mode="r",
            storage_options=run.submission.options,
            use_consolidated=False,
        )
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        return set()
    done = set()
    for name, array in group.arrays():
        record = array.attrs.get(cv.ATTR_ZOO)
        if isinstance(record, Mapping) and record.get("fingerprint") == run.fingerprint:
            done.add(name)
    return done


def _cpu_seconds() -> float:
    """CPU seconds this process has used (every thread: a model's library may run its own)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def denoiser_choice(public: StoreLocation, training: Sequence[str], noisy: str) -> str:
    """Task: the shared reconstruction of the input `noisy` (`denoise.choose_denoiser` over the
    bundle's `training` arrays), one for every model of the zoo."""
    arrays = {
        name: np.asarray(storage.read_array(public, name).compute(scheduler="synchronous"))
        for name in training
    }
    return choose_denoiser(arrays, noisy)


def _predict_pair(
    run: ZooRun, pair: CtfPair, public: StoreLocation, denoiser: str | None = None
) -> None:
    """Task: predict `pair` and write its array, its record last (with the worker's CPU seconds
    and peak RSS over the task: a worker runs one task at a time)."""
    reset_peak_memory()
    cpu, wall = _cpu_seconds(), time.perf_counter()
    inputs = [
        np.asarray(storage.read_array(public, name).compute(scheduler="synchronous"))
        for name in pair.inputs
    ]
    prediction = pair_prediction(run.model, pair, inputs, run.seed, run.search, denoiser)
    group = storage.open_group(run.submission, mode="a")
    target = group.create_array(
        pair.test,
        shape=pair.shape,
        chunks=cv.time_space_chunks(*pair.shape),
        dtype=np.float32,
        fill_value=0,
        compressors=cv.data_compressor(),
        config={"write_empty_chunks": True},
        overwrite=True,
    )
    target[...] = prediction.prediction
    target.attrs[cv.ATTR_ZOO] = {
        **prediction.record(),
        "fingerprint": run.fingerprint,
        "cpu_seconds": round(_cpu_seconds() - cpu, 3),
        "wall_seconds": round(time.perf_counter() - wall, 3),
        "peak_rss_mib": round(peak_memory_bytes() / 2**20, 1),
    }


def _finish(run: ZooRun, manifest: CtfManifest) -> None:
    group = storage.open_group(run.submission)
    records = {pair.test: group[pair.test].attrs[cv.ATTR_ZOO] for pair in manifest.pairs}
    model = run.model
    storage.finish_group(
        run.submission,
        {
            cv.ATTR_ZOO: {
                "model": model.name,
                "family": model.family,
                "library": model.library,
                "library_version": model.library_version(),
                "seed": run.seed,
                "seeded": model.seeded,
                "search": run.search,
                "reduced_rank": model.reduced_rank,
                "paper": model.paper,
                "fingerprint": run.fingerprint,
                "pairs": records,
            },
            "model": model.name,
        },
    )


def run_zoo(
    public: StoreLocation,
    out: StoreLocation,
    models: Sequence[ZooFamily],
    seeds: Sequence[int] = (0,),
    quiet: bool = False,
    search: str = FULL,
) -> list[ZooRun]:
    """Write every run's submission under `out` (module doc); the runs, in order."""
    manifest = CtfManifest.from_attrs(storage.read_attrs(public), public.url)
    runs = plan_runs(models, seeds, manifest, out, search)
    run_all(public, manifest, runs, quiet)
    return runs


def run_all(
    public: StoreLocation, manifest: CtfManifest, runs: Sequence[ZooRun], quiet: bool = False
) -> None:
    """Predict every pair of every run not yet done (one Dask task each), then finish each
    run's submission."""
    training = sorted({name for pair in manifest.pairs for name in pair.inputs})
    choices = {  # one task a reconstruction pair, shared by every model without a denoiser
        pair.test: dask.delayed(denoiser_choice, pure=True)(public, training, pair.train[0])
        for pair in manifest.pairs
        if cv.METRIC_RECON in pair.metrics
    }
    tasks = []
    for run in runs:
        done = _done_pairs(run)
        if len(done) == len(manifest.pairs):
            continue
        if not done:
            storage.open_group(run.submission, mode="w")
        for pair in manifest.pairs:
            if pair.test not in done:
                choice = choices.get(pair.test) if run.model.reconstruct is None else None
                task = dask.delayed(_predict_pair, pure=False)(run, pair, public, choice)
                tasks.append(task)
    if tasks:
        compute(tasks, label="zoo", quiet=quiet)
    for run in runs:
        _finish(run, manifest)
