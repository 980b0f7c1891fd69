"""The secret earthquake catalogue of one realisation: a main event and the events around it.

A realisation is not one clean earthquake: the crust under a dense array records a main event
with a complex rupture, its aftershocks and unrelated background seismicity, at times that may
fall anywhere in the record (also inside the withheld windows). Drawn from
`numpy.random.default_rng` in this order (all of it secret; only the store, on the organiser's
side, keeps the main event's parameters):

Main event. Epicentre uniform over the sensor grid, depth uniform in 1.5–5 km (at most the grid's
core), strike uniform in [0, 360), dip in [15, 90], rake in [−180, 180) degrees, onset uniform in
0.2–1.0 s, moment magnitude Mw uniform in 3.7–4.1 (M0 = 10^(1.5 Mw + 9.1) N·m; Hanks & Kanamori
1979, JGR 84), pulse duration D uniform in [1, 1.4] × `min_duration_s`, then 1–3 sub-events
(count uniform) at delays uniform in [0, 0.8 D] (the first at 0) with Dirichlet(1, …, 1) weights:
a multiple-shock rupture (Kikuchi & Kanamori 1982, BSSA 72).

Further events. A Poisson number (mean `mean_other_events`) of single-pulse events with
Gutenberg–Richter magnitudes (b = 1; Gutenberg & Richter 1944, BSSA 34) between Mw 2.8 and
the main event's Mw − 0.2, drawn by inversion: Mw = M_min − log10(1 − u (1 − 10^(−b ΔM))) / b.
Half are aftershocks (each a fair coin): epicentre the main's plus Gaussian offsets of 800 m
(horizontal) and 500 m (depth), mechanism the main's strike, dip, rake plus Gaussian deviations
of 20 degrees (dip folded into [0, 90]); the others background events anywhere, mechanisms as
the main's distribution. Positions are clipped into the allowed box. Onsets uniform over the
whole record [0, duration), D uniform in [1, 1.2] × `min_duration_s`. Small events radiate up to
the grid's resolution: their corner frequencies are above its band, so their pulses are the
shortest the grid carries (`min_duration_s`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seisctf.synth.crustal.source import PointSource

MAIN_MW = (3.7, 4.1)
OTHER_MW_MIN = 2.8
OTHER_MW_GAP = 0.2  # the further events stay at least this much below the main event
B_VALUE = 1.0
AFTERSHOCK_SPREAD_M = (800.0, 500.0)  # horizontal, depth
AFTERSHOCK_ANGLE_SPREAD_DEG = 20.0
MAX_SUBEVENTS = 3


@dataclass(frozen=True)
class CatalogueBox:
    """Where events may be (m): x, y ranges (the sensor grid), depth range; the record's
    duration (s); the shortest pulse the grid carries (s); the mean number of further events."""

    x_m: tuple[float, float]
    y_m: tuple[float, float]
    depth_m: tuple[float, float]
    duration_s: float
    min_duration_s: float
    mean_other_events: float = 6.0


def moment_nm(magnitude: float) -> float:
    """Scalar moment (N·m) of a moment magnitude (Hanks & Kanamori 1979)."""
    return float(10.0 ** (1.5 * magnitude + 9.1))


def gutenberg_richter(rng: np.random.Generator, low: float, high: float) -> float:
    """One magnitude of a b = 1 Gutenberg–Richter law truncated to [low, high]."""
    u = rng.uniform()
    return float(low - np.log10(1.0 - u * (1.0 - 10.0 ** (-B_VALUE * (high - low)))) / B_VALUE)


def _mechanism(rng: np.random.Generator) -> tuple[float, float, float]:
    return (
        float(rng.uniform(0.0, 360.0)),
        float(rng.uniform(15.0, 90.0)),
        float(rng.uniform(-180.0, 180.0)),
    )


def main_event(rng: np.random.Generator, box: CatalogueBox) -> tuple[PointSource, float]:
    """(the main event, its Mw) (module docstring)."""
    x, y = float(rng.uniform(*box.x_m)), float(rng.uniform(*box.y_m))
    depth = float(rng.uniform(*box.depth_m))
    strike, dip, rake = _mechanism(rng)
    onset = float(rng.uniform(0.2, 1.0))
    magnitude = float(rng.uniform(*MAIN_MW))
    duration = float(rng.uniform(1.0, 1.4)) * box.min_duration_s
    count = int(rng.integers(1, MAX_SUBEVENTS + 1))
    delays = np.concatenate([[0.0], np.sort(rng.uniform(0.0, 0.8 * duration, count - 1))])
    weights = rng.dirichlet(np.ones(count))
    weights = weights / weights.sum()
    subevents = tuple((float(d), float(w)) for d, w in zip(delays, weights, strict=True))
    source = PointSource(
        x, y, depth, strike, dip, rake, onset, moment_nm(magnitude), duration, subevents
    )
    return source, magnitude


def other_events(
    rng: np.random.Generator, box: CatalogueBox, main: PointSource, main_mw: float
) -> tuple[PointSource, ...]:
    """The further events of the module docstring."""
    events = []
    for _ in range(int(rng.poisson(box.mean_other_events))):
        magnitude = gutenberg_richter(rng, OTHER_MW_MIN, max(OTHER_MW_MIN, main_mw - OTHER_MW_GAP))
        if rng.uniform() < 0.5:
            horizontal, vertical = AFTERSHOCK_SPREAD_M
            offsets = rng.normal(0.0, 1.0, size=3) * np.array([horizontal, horizontal, vertical])
            x, y, depth = main.x_m + offsets[0], main.y_m + offsets[1], main.depth_m + offsets[2]
            angles = rng.normal(0.0, AFTERSHOCK_ANGLE_SPREAD_DEG, size=3)
            strike = (main.strike_deg + angles[0]) % 360.0
            dip = abs(main.dip_deg + angles[1])
            dip = 180.0 - dip if dip > 90.0 else dip
            rake = (main.rake_deg + angles[2] + 180.0) % 360.0 - 180.0
        else:
            x, y = rng.uniform(*box.x_m), rng.uniform(*box.y_m)
            depth = rng.uniform(*box.depth_m)
            strike, dip, rake = _mechanism(rng)
        onset = float(rng.uniform(0.0, box.duration_s))
        duration = float(rng.uniform(1.0, 1.2)) * box.min_duration_s
        events.append(
            PointSource(
                float(np.clip(x, *box.x_m)),
                float(np.clip(y, *box.y_m)),
                float(np.clip(depth, *box.depth_m)),
                float(strike),
                float(dip),
                float(rake),
                onset,
                moment_nm(magnitude),
                duration,
            )
        )
    return tuple(events)
