"""`--rate` resampling of one contiguous trace: scipy's polyphase FIR (`resample_poly`).

The factor up / down is the simplest fraction (a continued-fraction convergent of target / rate)
that keeps the trace on the grid: over its length it moves the last sample by less than half a
grid sample, the drift the plan accepts of a trace it does not resample. So nominal rates stored
inexactly (SAC keeps the sample interval as float32: 100 Hz reads as 99.9999978 Hz) resample by
their nominal ratio (1/2, 2/5, …). up and down are at most `MAX_RATE_FACTOR`; a trace that needs
more is a problem, not ingested.

Edges: each end of the trace is continued by its point reflection about the end sample
(`padtype="antireflect"`), so the level and slope carry on across a segment edge or gap: no
wrap-around (as an FFT per trace has) and no fall towards zero (as zero padding has). The
output is aligned with the input (zero-phase filter): output sample k is at the trace's start
+ k / target.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# The largest up or down factor (the FIR has 20 · max(up, down) + 1 taps).
MAX_RATE_FACTOR = 1000
# scipy.signal.resample_poly's extension of the signal beyond each end (see the module text).
PADTYPE = "antireflect"
METHOD = (
    f"scipy.signal.resample_poly(x, up, down, padtype={PADTYPE!r}) per contiguous trace "
    "(polyphase FIR, Kaiser window beta 5; up/down the simplest fraction keeping the trace "
    "within half a sample of the grid), only where the rate differs from sampling_rate"
)


def _convergents(value: Fraction):
    """The continued-fraction convergents p / q of `value`, simplest first."""
    p0, q0, p1, q1 = 0, 1, 1, 0
    while True:
        whole = value.numerator // value.denominator
        p0, q0, p1, q1 = p1, q1, whole * p1 + p0, whole * q1 + q0
        yield p1, q1
        rest = value - whole
        if rest == 0:
            return
        value = 1 / rest


def rate_ratio(npts: int, rate: float, target: float) -> tuple[int, int] | None:
    """(up, down) for resampling `npts` samples at `rate` Hz to `target` Hz: the simplest
    fraction whose drift over the trace, (npts − 1) · |target / rate − up / down| output
    samples, is below half a sample, with up, down ≤ MAX_RATE_FACTOR; None if there is none."""
    exact = Fraction(target) / Fraction(rate)
    for up, down in _convergents(exact):
        if max(up, down) > MAX_RATE_FACTOR:
            return None
        if up > 0 and (npts - 1) * abs(exact - Fraction(up, down)) < Fraction(1, 2):
            return up, down
    return None


def resampled_length(npts: int, up: int, down: int) -> int:
    """Samples of the resampled trace: ceil(npts · up / down), as resample_poly gives."""
    return -(-npts * up // down)


def resample_run(samples: np.ndarray, offset: int, up: int, down: int) -> tuple[np.ndarray, int]:
    """Samples `offset`… of a trace (a run of its finite samples) resampled by up / down in
    step with the whole trace: (values, index of the first among the whole trace's resampled
    samples). The run is first continued backwards (point reflection) to the nearest input
    sample that falls on an output sample, so its output samples are the whole trace's grid
    samples; those before the run's first sample are dropped. Offset 0: `resample`."""
    pad = offset % down
    values = np.asarray(samples, dtype=np.float64)
    if pad:
        values = np.pad(values, (pad, 0), mode="reflect", reflect_type="odd")
    skip = -(-pad * up // down)  # the first output sample at or after the run's start
    return resample(values, up, down)[skip:], (offset - pad) * up // down + skip


def resample(samples: np.ndarray, up: int, down: int) -> np.ndarray:
    """One contiguous trace resampled by up / down (float64 in and out)."""
    from scipy.signal import resample_poly

    values = np.asarray(samples, dtype=np.float64)
    if up == down:
        return values
    # scipy-stubs list only some of the padtypes: resample_poly takes upfirdn's extension modes
    # too, "antireflect" among them.
    return resample_poly(values, up, down, padtype=PADTYPE)  # type: ignore[call-overload]
