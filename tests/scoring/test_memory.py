"""Scoring a bundle larger than a worker's memory keeps every worker under its limit."""

from __future__ import annotations

import dask.array as da
import numpy as np
from conftest import synthetic_manifest

from seisctf import commitment, storage
from seisctf import conventions as cv
from seisctf.cluster import compute, dask_client, peak_memory_bytes, reset_peak_memory
from seisctf.location import StoreLocation
from seisctf.scoring.ctf import score_ctf

WORKER_LIMIT = 400 * 2**20
ROWS, SENSORS = 46_000, 512  # 9 arrays × 94 MB: truth + submission ≈ 1.7 GB ≥ 4 × the limit
SALT = "00" * 16


def _random_arrays(seed: int) -> dict[str, da.Array]:
    rng = da.random.default_rng(seed)
    chunks = cv.time_space_chunks(ROWS, SENSORS)
    return {
        name: rng.standard_normal((ROWS, SENSORS), chunks=chunks, dtype=np.float32)
        for name in cv.TEST_NAMES
    }


def test_bundle_four_times_worker_memory_scores_within_limits(tmp_path):
    truth_url, submission_url = str(tmp_path / "truth.zarr"), str(tmp_path / "sub.zarr")
    manifest = {
        **synthetic_manifest(ROWS, SENSORS, k=20, modes=64).to_json(),
        "dataset": "memory-test",
    }
    with dask_client(n_workers=2, memory_limit=WORKER_LIMIT, quiet=True) as client:
        storage.write_arrays(
            _random_arrays(1), StoreLocation(truth_url), {}, quiet=True, finish=False
        )
        rows = commitment.block_rows(SENSORS)
        stored = {n: storage.read_array(StoreLocation(truth_url), n) for n in cv.TEST_NAMES}
        digests = compute(
            {n: commitment.block_digests(a, SALT, rows) for n, a in stored.items()}, quiet=True
        )[0]
        manifest["truth_sha256_blocks"] = {
            "block_rows": rows,
            **{n: commitment.block_root(d, SALT) for n, d in digests.items()},
        }
        storage.finish_group(
            StoreLocation(truth_url), {cv.ATTR_CTF: manifest, cv.ATTR_CTF_SALT: SALT}
        )
        storage.write_arrays(_random_arrays(2), StoreLocation(submission_url), {}, quiet=True)
        total = sum(int(np.prod(a.shape)) * 4 for a in stored.values()) * 2
        assert total >= 4 * WORKER_LIMIT

        client.restart()  # fresh workers: their peak RSS now measures the scoring pass only
        client.run(reset_peak_memory)  # forked workers start with the fork server's peak
        pids_before = client.run(lambda: __import__("os").getpid())
        result = score_ctf(
            StoreLocation(truth_url), {"random": StoreLocation(submission_url)}, quiet=True
        )[0]
        peaks = client.run(peak_memory_bytes)
        assert client.run(lambda: __import__("os").getpid()) == pids_before  # no worker died
    assert result["truth_sha256_verified"] is True
    assert all(np.isfinite(v) for v in result["scores"].values())
    # Independent random fields: errors near sqrt(2), scores near 100 (1 - sqrt 2) ≈ -41.
    assert -60 < result["scores"]["E3"] < -30
    assert all(peak < WORKER_LIMIT for peak in peaks.values()), peaks
