"""The pick-scoring rules as pure numpy on aligned per-trace arrays (docs/contract.md, "Pick
submissions and scoring"; issue 8). Wiring to stores and files: `seisctf.scoring.picks`.

Detection: a window is predicted positive when `detection >= threshold`; earthquake windows (a P
or S arrival) are the positives, noise windows the negatives.

P and S, each on its own and independent of `detection` (a given time is a pick): a pick is a
hit when the window has that arrival and |pick − arrival| ≤ tolerance (seconds). A hit is a true
positive. A pick that is not a hit is a false positive (no such arrival in the window, or too
far from it); an arrival without a hit is a false negative (no pick, or a pick too far: that
pick is then both an FP and an FN).

Float rule at the boundary: "within tolerance" is |residual| ≤ tolerance_s + TOLERANCE_SLACK_S
(1 ns). Arrival times are arrival sample / sampling rate and picks often come from decimal text,
so a pick meant to be exactly 0.5 s away is off by float64 rounding (12.84 − 12.34 =
0.5000000000000018); the nanosecond absorbs that and is far below any sampling interval.

Residual = pick − arrival (seconds), over hits only: mean, population standard deviation
(ddof 0), mean absolute value; a histogram of hit residuals on `histogram_edges`.

Statistics are additive per cell (a split, a station, a magnitude bin, …; `cells` holds each
trace's cell index) and per block of traces, so any partition of the traces gives the same
numbers: counts add; residual moments combine with Chan et al.'s pairwise update (exact in
float64 up to rounding, no E[x²] − E[x]² cancellation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

TOLERANCE_SLACK_S = 1e-9
PHASES = ("p", "s")
DETECTION_FIELDS = ("tp", "fp", "fn", "tn")
PHASE_FIELDS = ("tp", "fp", "fn")
HISTOGRAM_BINS = 50


def histogram_edges(tolerance_s: float) -> np.ndarray:
    """Edges (s) of the `HISTOGRAM_BINS` equal bins over [−tolerance, tolerance]."""
    return np.linspace(-tolerance_s, tolerance_s, HISTOGRAM_BINS + 1)


def residual_histogram(residual_s: np.ndarray, tolerance_s: float) -> np.ndarray:
    """Counts (HISTOGRAM_BINS,) of residuals clipped to ±tolerance: bin k holds r with
    floor((r + tolerance) · HISTOGRAM_BINS / (2 · tolerance)) = k, the last bin also r =
    tolerance (`np.histogram` up to rounding at the edges, several times faster)."""
    scaled = (np.clip(residual_s, -tolerance_s, tolerance_s) + tolerance_s) * (
        HISTOGRAM_BINS / (2 * tolerance_s)
    )
    index = np.minimum(scaled.astype(np.intp), HISTOGRAM_BINS - 1)
    return np.bincount(index, minlength=HISTOGRAM_BINS)


@dataclass
class Tally:
    """Additive statistics of traces, per cell.

    `detection` (n_cells, 4): tp, fp, fn, tn. `phases` (2, n_cells, 3): per phase (P, S) tp, fp,
    fn. `moments` (2, n_cells, 3): per phase, over hits, residual mean (s), sum of squared
    deviations from it (s²), sum of |residual| (s). `histogram` (2, HISTOGRAM_BINS): hit
    residuals of all cells, clipped to ±tolerance."""

    detection: np.ndarray
    phases: np.ndarray
    moments: np.ndarray
    histogram: np.ndarray

    @classmethod
    def empty(cls, n_cells: int) -> Tally:
        return cls(
            np.zeros((n_cells, 4), np.int64),
            np.zeros((2, n_cells, 3), np.int64),
            np.zeros((2, n_cells, 3)),
            np.zeros((2, HISTOGRAM_BINS), np.int64),
        )

    def merge(self, other: Tally) -> Tally:
        """The tally of both sets of traces (Chan et al.'s update for the moments)."""
        n_a = self.phases[..., 0].astype(np.float64)
        n_b = other.phases[..., 0].astype(np.float64)
        total = n_a + n_b
        share_b = np.divide(n_b, total, out=np.zeros_like(total), where=total > 0)
        delta = other.moments[..., 0] - self.moments[..., 0]
        moments = np.stack(
            [
                self.moments[..., 0] + delta * share_b,
                self.moments[..., 1] + other.moments[..., 1] + delta**2 * n_a * share_b,
                self.moments[..., 2] + other.moments[..., 2],
            ],
            axis=-1,
        )
        return Tally(
            self.detection + other.detection,
            self.phases + other.phases,
            moments,
            self.histogram + other.histogram,
        )


def _count(cells: np.ndarray | None, mask: np.ndarray, n_cells: int) -> np.ndarray:
    """Traces where `mask` holds, per cell."""
    if cells is None:
        return np.array([np.count_nonzero(mask)])
    return np.bincount(cells[mask], minlength=n_cells)


def _sum(cells: np.ndarray | None, values: np.ndarray, n_cells: int) -> np.ndarray:
    """Sum of `values` (of the traces `cells` lists) per cell."""
    if cells is None:
        return np.array([values.sum()])
    return np.bincount(cells, weights=values, minlength=n_cells)


def tally(
    earthquake: np.ndarray,
    detection: np.ndarray,
    arrival_s: np.ndarray,
    pick_s: np.ndarray,
    *,
    tolerance_s: float,
    threshold: float,
    cells: np.ndarray | None = None,
    n_cells: int = 1,
) -> Tally:
    """Statistics of one block of traces.

    `earthquake` (n,) bool; `detection` (n,) probabilities; `arrival_s`, `pick_s` (2, n): P and
    S catalogue arrivals and picks in seconds from the window start, NaN where absent; `cells`
    (n,) int cell index per trace in [0, n_cells) (None: one cell)."""
    out = Tally.empty(n_cells)
    positive = detection >= threshold
    true_positive = _count(cells, positive & earthquake, n_cells)
    predicted = _count(cells, positive, n_cells)
    actual = _count(cells, earthquake, n_cells)
    traces = np.array([len(detection)]) if cells is None else np.bincount(cells, minlength=n_cells)
    out.detection[:] = np.stack(
        [true_positive, predicted - true_positive, actual - true_positive,
         traces - predicted - actual + true_positive],
        axis=-1,
    )  # fmt: skip
    limit = tolerance_s + TOLERANCE_SLACK_S
    for phase in range(2):
        arrival, pick = arrival_s[phase], pick_s[phase]
        residual = pick - arrival
        with np.errstate(invalid="ignore"):
            hit = np.abs(residual) <= limit  # NaN (no pick or no arrival) is never a hit
        hit_residual = residual[hit]
        n_hits = _count(cells, hit, n_cells)
        out.phases[phase, :, 0] = n_hits
        out.phases[phase, :, 1] = _count(cells, ~np.isnan(pick), n_cells) - n_hits
        out.phases[phase, :, 2] = _count(cells, ~np.isnan(arrival), n_cells) - n_hits
        hit_cells = None if cells is None else cells[hit]
        mean = _sum(hit_cells, hit_residual, n_cells) / np.maximum(n_hits, 1)
        deviation = hit_residual - (mean[0] if cells is None else mean[hit_cells])
        out.moments[phase, :, 0] = mean
        out.moments[phase, :, 1] = _sum(hit_cells, deviation * deviation, n_cells)
        out.moments[phase, :, 2] = _sum(hit_cells, np.abs(hit_residual), n_cells)
        out.histogram[phase] = residual_histogram(hit_residual, tolerance_s)
    return out


def blockwise_tally(
    earthquake: np.ndarray,
    detection: np.ndarray,
    arrival_s: np.ndarray,
    pick_s: np.ndarray,
    *,
    tolerance_s: float,
    threshold: float,
    cells: np.ndarray | None = None,
    n_cells: int = 1,
    block_traces: int = 2**20,
) -> Tally:
    """`tally` over blocks of `block_traces` traces, merged (bounded temporaries)."""
    total = Tally.empty(n_cells)
    for start in range(0, len(detection), block_traces):
        part = slice(start, start + block_traces)
        total = total.merge(
            tally(
                earthquake[part],
                detection[part],
                arrival_s[:, part],
                pick_s[:, part],
                tolerance_s=tolerance_s,
                threshold=threshold,
                cells=None if cells is None else cells[part],
                n_cells=n_cells,
            )
        )
    return total


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, None (JSON null) when the denominator is 0."""
    return float(numerator / denominator) if denominator > 0 else None


def _rates(tp: int, fp: int, fn: int) -> dict[str, Any]:
    return {
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "tp": int(tp),
        "fp": int(fp),
        "fn": int(fn),
    }


def cell_metrics(counts: Tally, cell: int) -> dict[str, Any]:
    """The contract's `detection`, `p`, `s` objects of one cell (undefined ratios: None)."""
    tp, fp, fn, tn = (int(v) for v in counts.detection[cell])
    out: dict[str, Any] = {"detection": {**_rates(tp, fp, fn), "tn": tn}}
    for phase, name in enumerate(PHASES):
        tp, fp, fn = (int(v) for v in counts.phases[phase, cell])
        mean, squares, absolute = counts.moments[phase, cell]
        out[name] = {
            **_rates(tp, fp, fn),
            "residual_mean_s": float(mean) if tp else None,
            "residual_std_s": float(np.sqrt(squares / tp)) if tp else None,
            "residual_mae_s": _ratio(absolute, tp),
        }
    return out


def mean_f1(metrics: dict[str, Any]) -> float:
    """Mean of the detection, P and S F1 (an undefined F1 counts as 0)."""
    return float(np.mean([metrics[key]["f1"] or 0.0 for key in ("detection", *PHASES)]))
