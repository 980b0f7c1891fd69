"""Scores of installed metric plugins (`seisctf.registry.METRICS`) besides E1..E12: each
metric on each task's window of truth and submission, as the task's E score reads it.

A result gains `plugin_scores: {metric: {"E1": value, …}}` (the organiser's result only: a
release shows the E scores, never these)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import dask
import dask.array as da

from seisctf import conventions as cv
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.registry import METRICS, Metric


def metric_plugins(names: Sequence[str]) -> list[Metric]:
    """The metric plugins named, each looked up once (an unknown name is bad input)."""
    return [METRICS[name] for name in dict.fromkeys(names)]


def plugin_scores(
    metrics: Sequence[Metric],
    manifest: CtfManifest,
    truth: Mapping[str, da.Array],
    submission: Mapping[str, da.Array],
) -> dict[str, dict[str, float | None]]:
    """{metric name: {score name: value}} of one submission: each metric's function on the
    rows its task scores (`conventions.window_rows`) of truth and submission (float64 Dask
    arrays, time × sensors), computed together; a value that is not a finite number is None
    (unscorable)."""
    lazy = {
        metric.name: {
            score: metric.function(
                truth[pair.test][cv.window_rows(kind, manifest)].astype("float64"),
                submission[pair.test][cv.window_rows(kind, manifest)].astype("float64"),
            )
            for score, pair, kind in cv.scored_metrics(manifest.pairs)
        }
        for metric in metrics
    }
    (computed,) = dask.compute(lazy)
    return {
        name: {score: _finite(name, score, value) for score, value in values.items()}
        for name, values in computed.items()
    }


def _finite(metric: str, score: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"metric {metric!r}", f"gave {type(value).__name__} for {score}, not a number"
        ) from None
    return number if math.isfinite(number) else None
