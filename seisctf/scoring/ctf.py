"""CTF scores E1..E12 from Dask arrays: per-chunk reductions combined, exact in float64.

Errors (ARCHITECTURE.md, "Scoring conventions"), with T the truth window and S the submission:
- short-time (first `k_short` rows) and reconstruction (all rows): ‖T − S‖ / ‖T‖ with the matrix
  2-norm (`reference`). ‖A‖₂ = sqrt(λmax(G)) where G is the Gram matrix of A's smaller side
  (A Aᵀ or AᵀA), a sum of per-chunk products; G is small, so its eigenvalues are taken eagerly.
- long-time (last `k_long` rows), `reference`: P = mean over rows of fftshift(|FFT over space|²),
  bins n//2 … n//2 + modes − 1 (zero frequency upward); error ‖P_T − P_S‖₂ / ‖P_T‖₂.
Ei = 100 (1 − error), clipped to [−100, 100]; raw values are kept. A zero denominator (all-zero
truth window) makes the task unscorable: its score is None and AvgScore averages the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cluster import compute
from seisctf.errors import InvalidInput

# --- pure kernels ------------------------------------------------------------------------------


def spectral_norm_from_gram(gram: np.ndarray) -> float:
    """Largest singular value of A from G = A Aᵀ (or AᵀA): sqrt of G's largest eigenvalue."""
    largest = float(np.linalg.eigvalsh(np.asarray(gram, dtype=np.float64))[-1])
    return math.sqrt(max(largest, 0.0))


def reference_power_spectrum(rows: np.ndarray, modes: int) -> np.ndarray:
    """(k, n) rows -> (modes,): row mean of fftshifted |FFT over space|², from zero frequency."""
    power = np.fft.fftshift(np.abs(np.fft.fft(rows, axis=1)) ** 2, axes=1).mean(axis=0)
    zero = rows.shape[1] // 2
    return power[zero : zero + modes]


def score_from_error(error: float | None) -> tuple[float | None, float | None]:
    """(raw, clipped) score 100 (1 − error); None when the task is unscorable."""
    if error is None:
        return None, None
    raw = 100.0 * (1.0 - error)
    return raw, float(np.clip(raw, -100.0, 100.0)) + 0.0  # + 0.0 turns -0.0 into 0.0


def relative_error(numerator: float, denominator: float) -> float | None:
    return None if denominator == 0.0 else numerator / denominator


# --- Dask wiring -------------------------------------------------------------------------------


def gram_of_smaller_side(array: da.Array) -> da.Array:
    """A Aᵀ when A has fewer rows than columns, else AᵀA; summed chunk by chunk by Dask."""
    return array @ array.T if array.shape[0] <= array.shape[1] else array.T @ array


def metric_window(metric: str, array: da.Array, manifest: Mapping[str, Any]) -> da.Array:
    if metric == cv.METRIC_SHORT:
        return array[: manifest["k_short"]]
    if metric == cv.METRIC_LONG:
        return array[-manifest["k_long"] :]
    return array


def _spectrum(rows: da.Array, modes: int) -> da.Array:
    whole_rows = rows.rechunk({0: -1, 1: -1})
    return whole_rows.map_blocks(
        reference_power_spectrum, modes, chunks=((modes,),), drop_axis=1, dtype=np.float64
    )


def truth_statistic(metric: str, truth: da.Array, manifest: Mapping[str, Any]) -> da.Array:
    """What the denominator needs: the Gram matrix of the truth window or its spectrum."""
    window = metric_window(metric, truth, manifest)
    if metric == cv.METRIC_LONG:
        return _spectrum(window, manifest["modes"])
    return gram_of_smaller_side(window)


def submission_statistic(
    metric: str, truth: da.Array, submission: da.Array, manifest: Mapping[str, Any]
) -> da.Array:
    """What the numerator needs: the Gram matrix of the error window, or the submission spectrum."""
    if metric == cv.METRIC_LONG:
        return _spectrum(metric_window(metric, submission, manifest), manifest["modes"])
    return gram_of_smaller_side(metric_window(metric, truth - submission, manifest))


def metric_error(
    metric: str, truth_value: np.ndarray, submission_value: np.ndarray
) -> float | None:
    if metric == cv.METRIC_LONG:
        return relative_error(
            float(np.linalg.norm(truth_value - submission_value)),
            float(np.linalg.norm(truth_value)),
        )
    return relative_error(
        spectral_norm_from_gram(submission_value), spectral_norm_from_gram(truth_value)
    )


def open_truth(truth_url: str, storage_options: storage.StorageOptions | None = None):
    """(manifest, salt, {test name: float64 Dask array}) of a complete truth group."""
    attrs = storage.read_attrs(truth_url, storage_options)
    if cv.ATTR_CTF not in attrs:
        raise InvalidInput(truth_url, f"truth group has no {cv.ATTR_CTF!r} manifest attr")
    manifest = attrs[cv.ATTR_CTF]
    truth = {
        pair["test"]: storage.read_array(truth_url, pair["test"], storage_options)
        for pair in manifest["pairs"]
    }
    return manifest, attrs.get(cv.ATTR_CTF_SALT), truth


def verify_commitment(
    truth: Mapping[str, da.Array], manifest: Mapping[str, Any], salt: str | None
) -> bool:
    """True when every truth array hashes to the manifest's published commitment."""
    published = manifest.get("truth_sha256") or {}
    return bool(published) and all(
        published.get(name) == storage.sha256_commitment(array, salt)
        for name, array in truth.items()
    )


def score_ctf(
    truth_url: str,
    submissions: Mapping[str, Any],
    *,
    convention: str = "reference",
    storage_options: storage.StorageOptions | None = None,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Score named submissions (each a source accepted by `open_submission`, or a dict of arrays)
    against one truth group; truth statistics are computed once for all of them."""
    from seisctf.scoring.submission import open_submission

    if convention != "reference":
        raise InvalidInput(f"--convention {convention}", "only 'reference' is implemented so far")
    manifest, salt, truth_raw = open_truth(truth_url, storage_options)
    verified = verify_commitment(truth_raw, manifest, salt)
    truth = {name: array.astype(np.float64) for name, array in truth_raw.items()}
    metrics = cv.scored_metrics(manifest["pairs"])

    opened = {
        name: open_submission(source, manifest, storage_options)
        for name, source in submissions.items()
    }
    truth_stats = [
        truth_statistic(metric, truth[pair["test"]], manifest) for _, pair, metric in metrics
    ]
    submission_stats = {
        name: [
            submission_statistic(metric, truth[pair["test"]], arrays[pair["test"]], manifest)
            for _, pair, metric in metrics
        ]
        for name, arrays in opened.items()
    }
    finite = {
        name: [da.isfinite(array).all() for array in arrays.values()]
        for name, arrays in opened.items()
    }
    truth_values, submission_values, finite_values = compute(
        truth_stats, submission_stats, finite, label="scoring", quiet=quiet
    )
    results = []
    for name, arrays in opened.items():
        bad = [
            array_name for array_name, ok in zip(arrays, finite_values[name], strict=True) if not ok
        ]
        if bad:
            raise InvalidInput(f"submission {name!r}", f"non-finite values (NaN or Inf) in {bad}")
        raw_scores, scores = {}, {}
        for (score_name, _, metric), truth_value, submission_value in zip(
            metrics, truth_values, submission_values[name], strict=True
        ):
            raw_scores[score_name], scores[score_name] = score_from_error(
                metric_error(metric, truth_value, submission_value)
            )
        scorable = [value for value in scores.values() if value is not None]
        results.append(
            {
                "name": name,
                "dataset": manifest["dataset"],
                "convention": convention,
                "scores": scores,
                "avg_score": float(np.mean(scorable)) if scorable else None,
                "raw_scores": raw_scores,
                "truth_sha256_verified": verified,
            }
        )
    return results
