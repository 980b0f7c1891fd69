"""Filter design shared by the transforms and the generators: Butterworth sections, the samples
after which a filter's impulse response has died away, rational resampling ratios and the
causal filters' warm-up (how many output samples depend on how a trace starts).

Pure arithmetic on rates and coefficients (no data): `pipeline.transforms.filters` applies these
filters to Dask arrays, and a synthetic DAS record (`synth.das_record`) sizes its
guarded slots with the same warm-up, so it lives below both.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from seisctf.errors import InvalidInput

# Anti-alias low-pass of `decimate` and of downsampling `resample`: zero-phase Butterworth of this
# order with its corner at this fraction of the new Nyquist frequency.
ANTIALIAS_ORDER = 8
ANTIALIAS_CORNER = 0.8
# Longest impulse response probed for the halo: a filter still above tolerance after this many
# samples has corners too close to 0 or Nyquist for its sampling rate.
_MAX_IMPULSE_SAMPLES = 2**22
# Resampling ratios: fractions up to this denominator, exact to this relative tolerance.
_MAX_DENOMINATOR = 1000
_RATIO_TOLERANCE = 1e-9
# resample_poly's default FIR design: Kaiser-windowed sinc of 2·half_len + 1 taps, half_len =
# this × max(up, down).
POLYPHASE_HALF_LENGTH = 10
POLYPHASE_WINDOW = ("kaiser", 5.0)


def check_tolerance(tolerance: float, what: str) -> None:
    if not 0 < tolerance < 1:
        raise InvalidInput(f"{what} tolerance={tolerance}", "expected 0 < tolerance < 1")


def is_integer(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def butterworth_sos(
    sampling_rate_hz: float,
    freqmin: float | None,
    freqmax: float | None,
    order: int,
    what: str,
) -> np.ndarray:
    """Second-order sections (n_sections, 6) of a Butterworth low/high/band-pass filter."""
    nyquist_hz = sampling_rate_hz / 2
    if freqmin is None and freqmax is None:
        raise InvalidInput(
            f"{what} freqmin=None, freqmax=None", "expected freqmin, freqmax or both"
        )
    for name, value in (("freqmin", freqmin), ("freqmax", freqmax)):
        if value is not None and not (math.isfinite(value) and 0 < value < nyquist_hz):
            raise InvalidInput(
                f"{what} {name}={value}", f"expected 0 < {name} < Nyquist ({nyquist_hz} Hz)"
            )
    if freqmin is not None and freqmax is not None and not freqmin < freqmax:
        raise InvalidInput(
            f"{what} freqmin={freqmin}, freqmax={freqmax}", "expected freqmin < freqmax"
        )
    if not is_integer(order) or order < 1:
        raise InvalidInput(f"{what} order={order!r}", "expected an integer >= 1")
    from scipy import signal  # here: a layout's sizes need this module, not SciPy

    if freqmin is not None and freqmax is not None:
        return signal.butter(
            int(order), [freqmin, freqmax], btype="bandpass", output="sos", fs=sampling_rate_hz
        )
    if freqmin is not None:
        return signal.butter(
            int(order), freqmin, btype="highpass", output="sos", fs=sampling_rate_hz
        )
    assert freqmax is not None  # one of the two at least, checked above
    return signal.butter(int(order), freqmax, btype="lowpass", output="sos", fs=sampling_rate_hz)


def impulse_halo(sos: np.ndarray, tolerance: float, what: str) -> int:
    """Samples after which the forward filter's impulse response stays below `tolerance` × its
    peak: probed on impulses of doubling length until the second half is all below."""
    from scipy import signal

    length = 256
    while length <= _MAX_IMPULSE_SAMPLES:
        impulse = np.zeros(length)
        impulse[0] = 1.0
        response = np.abs(signal.sosfilt(sos, impulse))
        above = np.flatnonzero(response >= tolerance * response.max())
        if above[-1] < length // 2:
            return int(above[-1]) + 1
        length *= 2
    raise InvalidInput(
        f"{what} tolerance={tolerance}",
        f"the filter's impulse response is still above tolerance after {_MAX_IMPULSE_SAMPLES} "
        "samples; use corners further from 0 and Nyquist, or a larger tolerance",
    )


def antialias_sos(new_rate_hz: float, sampling_rate_hz: float, what: str) -> np.ndarray:
    corner_hz = ANTIALIAS_CORNER * new_rate_hz / 2
    return butterworth_sos(sampling_rate_hz, None, corner_hz, ANTIALIAS_ORDER, what)


def rational_ratio(new_rate_hz: float, sampling_rate_hz: float, what: str) -> tuple[int, int]:
    """(up, down) with new / old = up / down, denominator <= 1000, exact to 1e-9 relative."""
    ratio = new_rate_hz / sampling_rate_hz
    fraction = Fraction(ratio).limit_denominator(_MAX_DENOMINATOR)
    if fraction == 0 or abs(float(fraction) - ratio) > _RATIO_TOLERANCE * ratio:
        raise InvalidInput(
            f"{what} sampling_rate={new_rate_hz}",
            f"expected a ratio to the input rate ({sampling_rate_hz} Hz) that is a fraction "
            f"with denominator <= {_MAX_DENOMINATOR} (to {_RATIO_TOLERANCE} relative)",
        )
    return fraction.numerator, fraction.denominator


def resampling_ratio(new_rate_hz: float, sampling_rate_hz: float) -> tuple[int, int]:
    """The (up, down) `resample` uses between these rates (new / old = up / down); raises
    InvalidInput where `resample` would. Input sample `down` maps to output sample `up`."""
    return rational_ratio(new_rate_hz, sampling_rate_hz, "resample")


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def causal_fir_delay(up: int, down: int) -> int:
    """Output samples by which `resample(zero_phase=False)` delays resample_poly's FIR so that
    output k reads only inputs n with n·up <= k·down."""
    return ceil_div(POLYPHASE_HALF_LENGTH * max(up, down), down)


def causal_warmup(sampling_rate_hz: float, new_rate_hz: float, *, tolerance: float = 1e-8) -> int:
    """Output samples at a trace's start that still depend, by more than about `tolerance`, on
    how the causal filters started rather than on the trace: `decimate(factor=rate/new_rate,
    zero_phase=False)` when that ratio is an integer, else `resample(sampling_rate=new_rate,
    zero_phase=False)`; 0 when the rates are equal. From this output sample on, a trace cut
    from a longer record gives (to about `tolerance`) the values of the whole record's.

    The anti-alias filter settles after its halo (input samples, see the module docstring);
    the delayed FIR of `resample` reads (half_len + delay·down) / up input samples back.
    """
    what = "causal_warmup"
    check_tolerance(tolerance, what)
    up, down = rational_ratio(new_rate_hz, sampling_rate_hz, what)
    if up == down:
        return 0
    halo_samples = 0
    if up < down:
        sos = antialias_sos(new_rate_hz, sampling_rate_hz, what)
        halo_samples = impulse_halo(sos, tolerance, what)
    if up == 1:
        return ceil_div(halo_samples, down)
    fir_reach = POLYPHASE_HALF_LENGTH * max(up, down) + causal_fir_delay(up, down) * down
    return ceil_div(halo_samples * up + fir_reach, down)


# CTF bundles: their default rate (Hz), and the causal filters' tolerance, which sets their
# halo, hence the guard.
DEFAULT_RATE_HZ = 1.0
FILTER_TOLERANCE = 1e-8


def ctf_ratio(source_rate_hz: float, sampling_rate_hz: float, what: str) -> tuple[int, int]:
    """(up, down) with sampling_rate_hz / source_rate_hz = up / down; InvalidInput for a rate
    above the store's or one `filters.resample` cannot reach."""
    if not (math.isfinite(sampling_rate_hz) and 0 < sampling_rate_hz <= source_rate_hz):
        raise InvalidInput(
            what,
            f"sampling_rate_hz {sampling_rate_hz} Hz: expected 0 < rate <= the store's "
            f"{source_rate_hz} Hz",
        )
    if sampling_rate_hz == source_rate_hz:
        return 1, 1
    try:
        return resampling_ratio(sampling_rate_hz, source_rate_hz)
    except InvalidInput as error:
        raise InvalidInput(what, f"{error.what}: {error.problem}") from None


def guard_steps(source_rate_hz: float, sampling_rate_hz: float, steps: int) -> int:
    """CTF samples of guard before each segment: the causal filters' warm-up
    (`causal_warmup`), rounded up so that a slot, guard + `steps` CTF samples, is a whole
    number of raw samples (a multiple of up)."""
    up, _ = ctf_ratio(source_rate_hz, sampling_rate_hz, "guard_steps")
    warmup = causal_warmup(source_rate_hz, sampling_rate_hz, tolerance=FILTER_TOLERANCE)
    return warmup + (-(warmup + steps)) % up
