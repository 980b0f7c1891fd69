"""The STA/LTA + AIC baseline picker (obspy.signal.trigger), tuned on a non-test split.

Per window (Z, N, E; the first `npts` samples, NaN as 0), after demeaning and a causal
Butterworth band-pass (obspy.signal.filter.bandpass, `freqmin_hz`…`freqmax_hz`, 4 corners; a
zero-phase filter would smear energy ahead of the onset):

- P: `classic_sta_lta` of Z (STA `sta_s`, LTA `lta_s`); the trigger is the first sample where
  it reaches `p_on` (obspy's `trigger_onset` semantics for the first trigger), refined to the
  minimum of `aic_simple` (Maeda's AIC) of Z over [trigger − `aic_before_s`, trigger +
  `aic_after_s`].
- S: `classic_sta_lta` of the horizontal amplitude √(N² + E²) on the part of the window from
  `s_after_p_s` after the P pick (the whole window without one), so the LTA holds the P coda;
  first sample reaching `s_on`, refined to the minimum of the sum of N's and E's AIC over the same
  kind of span (not before the P pick).
- detection = min(1, max(Z's STA/LTA) / (2 · p_on)): at least 0.5 exactly when a P trigger was
  found, so the detection column agrees with the P picks at the contract's threshold.

Tuning (`tune`): every combination of `TUNING_GRID` (STA and LTA lengths, P and S trigger
levels) is run over the tuning split in one Dask job (characteristic functions shared between
combinations of a trace) and the one with the highest objective wins (the first in grid order on
ties); the objective is given by the caller (`seisctf.scoring.picks.mean_f1_objective`: the mean
of detection, P and S F1), which refuses the test split.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from seisctf.baselines import pickers
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

TUNING_GRID: dict[str, tuple[float, ...]] = {
    "sta_s": (0.2, 0.5, 1.0),
    "lta_s": (2.0, 4.0),
    "p_on": (2.5, 4.0, 6.0),
    "s_on": (1.5, 2.5, 4.0),
}


@dataclass(frozen=True)
class StaLtaParameters:
    """STA/LTA + AIC parameters (module doc); the first four are tuned, the rest fixed."""

    sta_s: float = 0.5
    lta_s: float = 4.0
    p_on: float = 4.0
    s_on: float = 2.5
    freqmin_hz: float = 1.0
    freqmax_hz: float = 20.0
    aic_before_s: float = 1.5
    aic_after_s: float = 0.5
    s_after_p_s: float = 0.2


def grid_candidates(
    base: StaLtaParameters = StaLtaParameters(),
    grid: dict[str, tuple[float, ...]] | None = None,
) -> tuple[StaLtaParameters, ...]:
    """Every combination of `grid` (default TUNING_GRID) over `base`, in grid order."""
    grid = TUNING_GRID if grid is None else grid
    keys = list(grid)
    return tuple(
        replace(base, **dict(zip(keys, values, strict=True)))
        for values in itertools.product(*(grid[key] for key in keys))
    )


def _aic_onset(components: list[np.ndarray], start: int, stop: int) -> int:
    """Sample of the minimum of the summed `aic_simple` of `components` over [start, stop)
    (the span's end points excluded: AIC is undefined there); `start` if too short."""
    from obspy.signal.trigger import aic_simple

    if stop - start < 4:
        return start
    aic = sum(aic_simple(component[start:stop]) for component in components)
    return start + 1 + int(np.argmin(aic[1:-1]))


def _first_at_least(values: np.ndarray, level: float) -> int | None:
    above = np.flatnonzero(values >= level)
    return int(above[0]) if above.size else None


class _Trace:
    """One window's filtered components and the characteristic functions already computed."""

    def __init__(
        self, window: np.ndarray, sampling_rate_hz: float, params: StaLtaParameters
    ) -> None:
        from obspy.signal.filter import bandpass

        data = np.nan_to_num(window.astype(np.float64))
        data -= data.mean(axis=1, keepdims=True)
        freqmax = min(params.freqmax_hz, 0.45 * sampling_rate_hz)
        self.z, self.n, self.e = (
            bandpass(c, params.freqmin_hz, freqmax, sampling_rate_hz, corners=4, zerophase=False)
            for c in data
        )
        self.horizontal = np.hypot(self.n, self.e)
        self.sampling_rate_hz = sampling_rate_hz
        self._cft: dict[tuple, np.ndarray | None] = {}  # None: too short for the LTA

    def samples(self, seconds: float) -> int:
        return max(1, int(round(seconds * self.sampling_rate_hz)))

    def cft(self, which: str, start: int, params: StaLtaParameters) -> np.ndarray | None:
        """classic_sta_lta of Z or the horizontal amplitude from `start` (None if too short)."""
        from obspy.signal.trigger import classic_sta_lta

        nsta, nlta = self.samples(params.sta_s), self.samples(params.lta_s)
        key = (which, start, nsta, nlta)
        if key not in self._cft:
            signal = (self.z if which == "z" else self.horizontal)[start:]
            self._cft[key] = classic_sta_lta(signal, nsta, nlta) if len(signal) > nlta + 1 else None
        return self._cft[key]

    def pick(self, params: StaLtaParameters) -> tuple[float, float, float]:
        """(detection, P time s, S time s) with these parameters (module doc)."""
        cft_z = self.cft("z", 0, params)
        if cft_z is None:
            return 0.0, np.nan, np.nan
        detection = float(min(1.0, cft_z.max() / (2 * params.p_on)))
        before, after = self.samples(params.aic_before_s), self.samples(params.aic_after_s)
        p_index = None
        trigger = _first_at_least(cft_z, params.p_on)
        if trigger is not None:
            p_index = _aic_onset([self.z], max(0, trigger - before), trigger + after)
        start = 0 if p_index is None else p_index + self.samples(params.s_after_p_s)
        s_index = None
        cft_h = self.cft("h", start, params)
        trigger = None if cft_h is None else _first_at_least(cft_h, params.s_on)
        if trigger is not None:
            trigger += start
            s_index = _aic_onset([self.n, self.e], max(start, trigger - before), trigger + after)
        seconds = [np.nan if i is None else i / self.sampling_rate_hz for i in (p_index, s_index)]
        return detection, seconds[0], seconds[1]


@dataclass(frozen=True)
class StaLtaPicker:
    """Picks every window with each of `candidates`: rows (k, len(candidates), 3) of
    `[detection, p_time_s, s_time_s]` (a pipeline.pickers picker)."""

    candidates: tuple[StaLtaParameters, ...]
    component_order: str = "ZNE"

    def __call__(
        self, windows: np.ndarray, npts: np.ndarray, sampling_rate_hz: float
    ) -> np.ndarray:
        out = np.empty((len(windows), len(self.candidates), 3))
        for i, (window, valid) in enumerate(zip(windows, npts, strict=True)):
            trace = _Trace(window[:, : int(valid)], sampling_rate_hz, self.candidates[0])
            out[i] = [trace.pick(params) for params in self.candidates]
        return out


def tuning_traces(store: StoreLocation, split: str, *, quiet: bool = True) -> pickers.StoreTraces:
    """The traces STA/LTA is tuned on: `split` of the store, never `test`; a split without
    traces (a store split with no dev part) is bad input saying which split to tune on."""
    if split == "test":
        raise InvalidInput("tune_split", "tuning on the test split is not allowed")
    other = "dev" if split == "train" else "train"
    hint = (
        f": nothing to tune STA/LTA on; tune on the {other} split with `--tune-split {other}`, "
        "or keep the default parameters with `--tune-split none`"
    )
    return pickers.select_traces(store, split, quiet=quiet, empty_hint=hint)


def tune(
    store: StoreLocation,
    split: str,
    objective,
    *,
    candidates: tuple[StaLtaParameters, ...] | None = None,
    quiet: bool = False,
) -> tuple[StaLtaParameters, list[dict[str, Any]]]:
    """The best of `candidates` (default: `grid_candidates()`) on `split` by
    `objective(names, detection, p_time_s, s_time_s) -> float` (higher is better), and every
    candidate's score. Filters are shared, so candidates must differ only in tuned values."""
    candidates = candidates or grid_candidates()
    traces = tuning_traces(store, split, quiet=quiet)
    rows = pickers.run_picker(
        traces, StaLtaPicker(candidates), label=f"tune STA/LTA on {split}", quiet=quiet
    )
    scores = [
        float(objective(traces.names, rows[:, c, 0], rows[:, c, 1], rows[:, c, 2]))
        for c in range(len(candidates))
    ]
    best = int(np.argmax(scores))
    table = [{**asdict(c), "objective": s} for c, s in zip(candidates, scores, strict=True)]
    return candidates[best], table


def stalta_picks(
    store: StoreLocation,
    out: StoreLocation,
    *,
    split: str = "test",
    tune_split: str | None = "dev",
    objective=None,
    parameters: StaLtaParameters | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Pick `split` of the store at `store` with STA/LTA + AIC and write the table to `out`.
    With `tune_split`, the parameters are tuned there first (`tune`, needs `objective`); else
    `parameters` (default StaLtaParameters()). Returns the sidecar's description."""
    if tune_split is not None and tune_split == split:
        raise InvalidInput("tune_split", f"tune on another split than the one picked ({split})")
    grid = None
    if tune_split is not None:
        if objective is None:
            raise InvalidInput("tune_split", "tuning needs an objective")
        parameters, grid = tune(store, tune_split, objective, quiet=quiet)
    parameters = parameters or StaLtaParameters()
    traces = pickers.select_traces(store, split, quiet=quiet)
    rows = pickers.run_picker(
        traces, StaLtaPicker((parameters,)), label=f"STA/LTA on {split}", quiet=quiet
    )[:, 0, :]
    description = pickers.describe_job(
        traces,
        "stalta",
        parameters=asdict(parameters),
        tuned_on=tune_split,
        tuning_grid={k: list(v) for k, v in TUNING_GRID.items()} if grid is not None else None,
        tuning_objective="mean of detection, P and S F1" if grid is not None else None,
        tuning_scores=grid,
    )
    pickers.write_picks(pickers.picks_frame(traces.names, rows), out, description)
    return description
