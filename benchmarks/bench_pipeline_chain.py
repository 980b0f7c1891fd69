"""Benchmark: a filter + noise chain over a store larger than a worker, against in-memory scipy.

Builds a (time, sensor) float32 store at 100 Hz of --samples × --sensors (default 2^21 × 128:
1 GiB, 2.6× a worker's 400 MiB) of band-limited random traces, then, in one run:

  (a) the chain on a LocalCluster of --workers single-threaded workers limited to --worker-mib,
      as a recipe (`seisctf build`, CHAIN_RECIPE below): `butterworth(freqmin=1, freqmax=10,
      order=4)` then `add_gaussian_noise(rms_fraction=0.2)`, read from and written to zarr (each
      block is filtered, written to a float32 scratch checkpoint and summed for the per-trace
      RMS in one task; the noise pass reads the checkpoint back once), timed as a whole; peak
      RSS of every worker (`ru_maxrss` after a restart) and what they spilled; --chain-runs
      runs (a restart before each), the median taken, the largest peak and spill shown;
  (b) in-memory scipy on the part that fits: the first --fit-fraction of the time axis loaded
      into one numpy array, `scipy.signal.sosfiltfilt` with the same SOS, per-trace RMS, numpy
      Gaussian noise added, the float32 result written to a zarr store with the same chunks and
      codec as the chain's: load, compute and write timed separately, medians of three runs;
  (c) the floor: the same recipe on the same cluster with the filter's and the noise's
      arithmetic replaced by pass-throughs in the workers (`--no-floor` skips it): what reading,
      halo exchange, checkpoint, sums, writing and scheduling cost without them.

Throughput is samples (time × sensor) per second; the goal is chain ÷ scipy ≥ 0.7, where scipy's
time counts its compute (the part of the work both do); the ratios with scipy's load, and with
its load and write (store to store, like the chain), are printed too. The floor's ratio bounds
what any filter and noise arithmetic could reach on this machine.
The chain's values on that part are compared with scipy's filter (noise differs by generator;
the check subtracts it: chain − noise is recomputed from the same counter-based generator).

    .venv/bin/python benchmarks/bench_pipeline_chain.py [--samples 2097152] [--sensors 128]
        [--worker-mib 400] [--workers 2] [--fit-fraction 0.125] [--no-floor] [--chain-runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_ctf_scoring import MIB, load_average, machine_facts

from seisctf.location import StoreLocation

RATE_HZ = 100.0
FREQMIN, FREQMAX, ORDER, RMS_FRACTION, SEED = 1.0, 10.0, 4, 0.2, 2026


def _spilled_bytes(dask_worker) -> int:
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return int(metrics.get(("disk-write", "bytes"), 0))


def build_input(url: str, n_samples: int, n_sensors: int, quiet: bool) -> None:
    """Random-walk-smoothed traces (a cumulative sum of noise per chunk, detrended per chunk):
    broadband, non-trivial for a band-pass. Needs an active client."""
    import dask.array as da
    import xarray as xr

    from seisctf import conventions as cv
    from seisctf import storage

    chunks = cv.time_space_chunks(n_samples, n_sensors)
    white = da.random.default_rng(7).standard_normal(
        (n_samples, n_sensors), chunks=chunks, dtype=np.float32
    )
    traces = white + 0.05 * white.cumsum(axis=0)
    dataset = xr.Dataset(
        {"u": ((cv.TIME, cv.SENSOR), traces.astype(np.float32))},
        attrs={cv.ATTR_SAMPLING_RATE: RATE_HZ, cv.ATTR_START_TIME: "2026-01-01T00:00:00Z"},
    )
    storage.write_dataset(dataset, StoreLocation(url), label="input", quiet=quiet)


CHAIN_RECIPE = f"""\
recipe: 1
name: bench-chain
source:
  store: {{url: input.zarr}}
transforms:
  - butterworth: {{freqmin: {FREQMIN}, freqmax: {FREQMAX}, order: {ORDER}}}
  - add_gaussian_noise: {{rms_fraction: {RMS_FRACTION}, seed: {SEED}}}
outputs:
  store: {{url: chain.zarr}}
"""


def chain(workdir: Path, quiet: bool, input_url: str = "input.zarr") -> None:
    """The chain as users run it: `seisctf build` of CHAIN_RECIPE on the active cluster."""
    from seisctf.build.engine import build_file

    workdir.mkdir(exist_ok=True)
    recipe = workdir / "chain.yaml"
    recipe.write_text(CHAIN_RECIPE.replace("url: input.zarr", f"url: {input_url}"))
    build_file(recipe, workdir=workdir, quiet=quiet)


def _region_unchanged(region: np.ndarray, **_kwargs) -> np.ndarray:
    return region


def _block_without_noise(block: np.ndarray, sigma, key, shape, time_axis, dtype, block_info=None):
    return block.astype(dtype)


def _without_arithmetic() -> None:
    """In a worker: the zero-phase filter's and the Gaussian noise's block functions replaced by
    pass-throughs. Tasks name their functions by module and name, so the floor run's graph is
    the chain's own, with everything but that arithmetic (a restart restores the real ones)."""
    from seisctf.pipeline.transforms import filters, noise

    filters._filtfilt_block = _region_unchanged
    noise._plus_noise_block = _block_without_noise


def scipy_in_memory(url: str, n_rows: int, out_url: str) -> tuple[float, float, float, np.ndarray]:
    """(load s, compute s, write s, filtered part) of the in-memory reference on the first
    n_rows; the float32 result is written to `out_url` with the chain's chunks and codec."""
    import scipy.signal
    import zarr

    from seisctf import conventions as cv

    start = time.perf_counter()
    values = np.asarray(zarr.open_group(url, mode="r")["u"][:n_rows], dtype=np.float64)
    loaded = time.perf_counter()
    sos = scipy.signal.butter(ORDER, [FREQMIN, FREQMAX], btype="bandpass", output="sos", fs=RATE_HZ)
    filtered = scipy.signal.sosfiltfilt(sos, values, axis=0)
    rms = np.sqrt(np.mean(filtered**2, axis=0))
    noisy = filtered + RMS_FRACTION * rms * np.random.default_rng(SEED).standard_normal(
        filtered.shape
    )
    noisy = noisy.astype(np.float32)
    done = time.perf_counter()
    result = zarr.create_array(
        out_url,
        shape=noisy.shape,
        chunks=cv.time_space_chunks(*noisy.shape),
        dtype=np.float32,
        compressors=cv.data_compressor(),
        overwrite=True,
    )
    result[...] = noisy
    written = time.perf_counter()
    return loaded - start, done - loaded, written - done, filtered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2**21, help="time samples per trace")
    parser.add_argument("--sensors", type=int, default=128)
    parser.add_argument("--worker-mib", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fit-fraction", type=float, default=0.125)
    parser.add_argument("--no-floor", action="store_true", help="skip the floor run (c)")
    parser.add_argument("--chain-runs", type=int, default=3, help="chain runs (median taken)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    from seisctf.cluster import dask_client, peak_memory_bytes, reset_peak_memory

    facts = machine_facts()
    limit = args.worker_mib * MIB
    store_bytes = args.samples * args.sensors * 4
    with tempfile.TemporaryDirectory(prefix="seisctf-bench-chain-") as tmp:
        url = str(Path(tmp) / "input.zarr")
        with dask_client(n_workers=args.workers, memory_limit=limit, quiet=True) as client:
            start = time.perf_counter()
            build_input(url, args.samples, args.sensors, quiet=not args.verbose)
            build_s = time.perf_counter() - start
            # Per run, each worker's (idle, peak, spilled) bytes, workers in address order.
            chain_runs, memory = [], []
            for run in range(args.chain_runs):
                client.restart()
                client.run(reset_peak_memory)  # forked workers start with the server's peak
                idle = client.run(peak_memory_bytes)
                start = time.perf_counter()
                chain(Path(tmp) / f"chain-{run}", quiet=not args.verbose, input_url=url)
                chain_runs.append(time.perf_counter() - start)
                peaks, spilled = client.run(peak_memory_bytes), client.run(_spilled_bytes)
                memory.append([(idle[a], peaks[a], spilled[a]) for a in sorted(peaks)])
            chain_s = statistics.median(chain_runs)
            floor_s = None
            if not args.no_floor:
                client.restart()
                client.run(_without_arithmetic)
                start = time.perf_counter()
                chain(Path(tmp) / "floor", quiet=not args.verbose, input_url=url)
                floor_s = time.perf_counter() - start
        n_rows = int(args.samples * args.fit_fraction)
        # The in-memory reference is cheap: its median of three runs (the shared machine's
        # noise moves one run by ±20 %).
        part_url = str(Path(tmp) / "scipy.zarr")
        runs = [scipy_in_memory(url, n_rows, part_url) for _ in range(3)]
        load_s, compute_s, write_s = (statistics.median(run[i] for run in runs) for i in range(3))
        reference = runs[0][3]
        del runs
        # The chain's filter on that part, without its noise: recompute the lazy filter only.
        from seisctf import storage
        from seisctf.pipeline.transforms.filters import butterworth

        opened = storage.open_dataset(StoreLocation(url))
        lazy = butterworth(
            opened["u"].assign_attrs(opened.attrs), freqmin=FREQMIN, freqmax=FREQMAX, order=ORDER
        )
        # Away from the end of scipy's part, where its filter sees an edge the chain does not.
        chain_filtered = lazy[: min(n_rows // 2, 65536)].values
        scale = np.abs(reference[: chain_filtered.shape[0]]).max()
        difference = np.abs(chain_filtered - reference[: chain_filtered.shape[0]]).max() / scale
    facts.append(f"load average at end (1, 5, 15 min): {load_average()}")

    total = args.samples * args.sensors
    part = n_rows * args.sensors
    chain_rate = total / chain_s
    scipy_rate = part / compute_s
    scipy_loaded_rate = part / (load_s + compute_s)
    scipy_stored_rate = part / (load_s + compute_s + write_s)
    print(
        f"\nPipeline chain (butterworth {FREQMIN}–{FREQMAX} Hz order {ORDER}, zero-phase; "
        f"gaussian noise {RMS_FRACTION} × RMS) on {args.samples} × {args.sensors} float32 at "
        f"{RATE_HZ:.0f} Hz = {store_bytes / MIB:.0f} MiB = {store_bytes / limit:.1f}× a worker's "
        f"{args.worker_mib} MiB; {args.workers} single-threaded workers; input built in "
        f"{build_s:.0f} s"
    )
    for fact in facts:
        print(f"- {fact}")
    print("\n| process | samples | seconds | throughput (Msamples/s) | ratio to scipy compute |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| chain on Dask (read zarr, filter, RMS, noise, write zarr), median of "
        f"{len(chain_runs)} | {total:,} | {chain_s:.2f} | {chain_rate / 1e6:.2f} | "
        f"**{chain_rate / scipy_rate:.2f}×** |"
    )
    if floor_s is not None:
        print(
            f"| floor: the same recipe, filter and noise arithmetic passed through | {total:,} | "
            f"{floor_s:.2f} | {total / floor_s / 1e6:.2f} | {total / floor_s / scipy_rate:.2f}× |"
        )
    print(
        f"| scipy in memory, compute only (sosfiltfilt, RMS, noise) | {part:,} | {compute_s:.2f} "
        f"| {scipy_rate / 1e6:.2f} | 1.00 |"
    )
    for what, seconds, rate in (
        ("load + compute", load_s + compute_s, scipy_loaded_rate),
        ("load + compute + write", load_s + compute_s + write_s, scipy_stored_rate),
    ):
        print(
            f"| scipy in memory, {what} | {part:,} | {seconds:.2f} | {rate / 1e6:.2f} | "
            f"{rate / scipy_rate:.2f} |"
        )
    print(
        f"\nChain against scipy store to store: **{chain_rate / scipy_stored_rate:.2f}×**"
        + (f"; floor against it: {total / floor_s / scipy_stored_rate:.2f}×" if floor_s else "")
    )
    runs_text = ", ".join(
        f"{seconds:.2f} s ({total / seconds / scipy_rate:.2f}×)" for seconds in chain_runs
    )
    print(f"\nChain runs: {runs_text}")
    print(
        "\n| worker | peak RSS MiB (largest of the runs) | ÷ limit | idle after restart MiB | "
        "spilled MiB (largest) |"
    )
    print("|---|---:|---:|---:|---:|")
    for index, worker in enumerate(zip(*memory, strict=True)):
        idle_bytes = max(run[0] for run in worker)
        peak = max(run[1] for run in worker)
        spill = max(run[2] for run in worker)
        print(
            f"| {index} | {peak / MIB:.0f} | {peak / limit:.2f} | {idle_bytes / MIB:.0f} | "
            f"{spill / MIB:.0f} |"
        )
    print(
        f"\nChain's filter vs scipy's on the first {chain_filtered.shape[0]} samples: max "
        f"|difference| / max |scipy| = {difference:.1e}"
    )


if __name__ == "__main__":
    main()
