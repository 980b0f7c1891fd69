"""An independent per-trace pure-Python implementation of the pick-scoring rules (docs/contract.md,
"Pick submissions and scoring"; the 1 ns float slack of `seisctf.scoring.pick_metrics`), for tests
and the benchmark: one loop over traces, dicts and floats, no numpy."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

SLACK_S = 1e-9


def _present(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def reference_metrics(
    rows: Iterable[tuple[float | None, float | None, float, float | None, float | None]],
    tolerance_s: float = 0.5,
    threshold: float = 0.5,
) -> dict:
    """`rows`: per trace (P arrival s, S arrival s, detection, P pick s, S pick s), None or NaN
    where absent. Returns the contract's `detection`, `p`, `s` objects."""
    detection = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    phases = {name: {"tp": 0, "fp": 0, "fn": 0, "residuals": []} for name in ("p", "s")}
    for p_arrival, s_arrival, probability, p_pick, s_pick in rows:
        earthquake = _present(p_arrival) or _present(s_arrival)
        positive = probability >= threshold
        if positive:
            detection["tp" if earthquake else "fp"] += 1
        else:
            detection["fn" if earthquake else "tn"] += 1
        for name, arrival, pick in (("p", p_arrival, p_pick), ("s", s_arrival, s_pick)):
            counts = phases[name]
            if _present(pick):
                if _present(arrival) and abs(pick - arrival) <= tolerance_s + SLACK_S:
                    counts["tp"] += 1
                    counts["residuals"].append(pick - arrival)
                else:
                    counts["fp"] += 1
                    if _present(arrival):
                        counts["fn"] += 1
            elif _present(arrival):
                counts["fn"] += 1
    out = {"detection": _rates(detection)}
    out["detection"]["tn"] = detection["tn"]
    for name, counts in phases.items():
        residuals = counts.pop("residuals")
        out[name] = _rates(counts)
        out[name]["residual_mean_s"] = statistics.fmean(residuals) if residuals else None
        out[name]["residual_std_s"] = statistics.pstdev(residuals) if residuals else None
        out[name]["residual_mae_s"] = (
            statistics.fmean(abs(r) for r in residuals) if residuals else None
        )
    return out


def _rates(counts: dict) -> dict:
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    return {
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def reference_score(
    truth: Iterable[tuple[str, float, float]],
    rate_hz: float,
    submission: Iterable[tuple[str, float, float | None, float | None]],
    tolerance_s: float = 0.5,
    threshold: float = 0.5,
) -> dict:
    """The same from tables: `truth` rows (trace name, P and S arrival sample, NaN: none) of the
    scored traces, `submission` rows (trace name, detection, P pick s, S pick s), joined by name."""
    by_name = {name: (detection, p, s) for name, detection, p, s in submission}
    rows = []
    for name, p_sample, s_sample in truth:
        detection, p_pick, s_pick = by_name[name]
        rows.append((p_sample / rate_hz, s_sample / rate_hz, detection, p_pick, s_pick))
    return reference_metrics(rows, tolerance_s, threshold)
