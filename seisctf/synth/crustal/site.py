"""Site terms: each sensor's own response to the ground motion beneath it (secret, per store).

Near-surface layers amplify and colour the incoming wavefield differently at every site (Borcherdt
1970, BSSA 60; Kramer 1996, *Geotechnical Earthquake Engineering*, ch. 7). The grid does not
resolve them (they are tens of metres thick), so each sensor s applies a causal linear filter to
all three components: a frequency-independent amplification A_s times one damped resonance of
the soil column, the response of a single-degree-of-freedom oscillator added to the direct path,

    H_s(iω) = A_s [1 + g_s · 2 ζ ω_s iω / ((iω)² + 2 ζ ω_s iω + ω_s²)],

gain A_s (1 + g_s) at the resonance f_s = ω_s / 2π, A_s far from it. ln A_s, ln f_s and ln g_s
are spatially correlated Gaussian fields over the sensor grid (Gaussian autocorrelation,
`correlation_length_m`; `medium.random_field` in 2D), so neighbouring sites resemble each other:

    ln A_s = σ_A δ_A,  f_s = f_0 exp(σ_f δ_f),  g_s = g_0 exp(σ_g δ_g),  ζ fixed,

δ unit-variance fields drawn in that order from `default_rng(seed)` (seeds of the three fields).
The filter is discretised by the bilinear transform prewarped at ω_s (Oppenheim & Schafer 2010,
§7.1) at the output rate and run forward in time (direct form II transposed, zero initial state):
causal, so it moves nothing before the ground beneath the sensor moves. Tested against
`scipy.signal.bilinear` + `lfilter`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seisctf.errors import InvalidInput
from seisctf.synth.crustal.medium import random_field
from seisctf.synth.crustal.recording import SensorGrid


@dataclass(frozen=True)
class SiteParameters:
    """Distributions of the site terms (module docstring); frequencies in Hz, lengths in m."""

    amplification_ln_std: float = 0.3
    resonance_hz: float = 1.5
    resonance_ln_std: float = 0.3
    resonance_gain: float = 1.0
    resonance_gain_ln_std: float = 0.5
    damping: float = 0.25
    correlation_length_m: float = 300.0

    def checked(self) -> SiteParameters:
        values = (self.resonance_hz, self.resonance_gain, self.damping, self.correlation_length_m)
        spreads = (self.amplification_ln_std, self.resonance_ln_std, self.resonance_gain_ln_std)
        if not all(math.isfinite(v) and v > 0 for v in values) or min(spreads) < 0:
            raise InvalidInput("site", "site parameters must be positive (spreads ≥ 0)")
        return self


@dataclass(frozen=True, eq=False)
class SiteTerms:
    """Per-sensor amplification A (n,), resonance frequency f (Hz, n,), resonance gain g (n,)
    and the damping ζ of the module docstring."""

    amplification: np.ndarray
    resonance_hz: np.ndarray
    resonance_gain: np.ndarray
    damping: float


def site_terms(sensors: SensorGrid, seed: int, parameters: SiteParameters) -> SiteTerms:
    """The site terms of every sensor (module docstring), in sensor order."""
    parameters.checked()
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63 - 1, size=3)
    shape = (sensors.n_x, sensors.n_y)

    def field(index: int) -> np.ndarray:
        if sensors.n_sensors == 1:
            return np.zeros(1)
        values = random_field(
            shape, sensors.spacing_m, parameters.correlation_length_m, 1.0, "gaussian",
            int(seeds[index]),
        )  # fmt: skip
        return values.ravel()

    return SiteTerms(
        amplification=np.exp(parameters.amplification_ln_std * field(0)),
        resonance_hz=parameters.resonance_hz * np.exp(parameters.resonance_ln_std * field(1)),
        resonance_gain=parameters.resonance_gain
        * np.exp(parameters.resonance_gain_ln_std * field(2)),
        damping=parameters.damping,
    )


def biquad_coefficients(terms: SiteTerms, sampling_rate_hz: float) -> tuple[np.ndarray, ...]:
    """(b0, b1, b2, a1, a2), each (n,), of the digital filters (a0 = 1), without A."""
    omega = 2.0 * np.pi * terms.resonance_hz
    nyquist = np.pi * sampling_rate_hz
    if np.any(omega >= 0.95 * nyquist):
        raise InvalidInput("site", "resonance frequencies must stay below the output Nyquist")
    k = omega / np.tan(omega / (2.0 * sampling_rate_hz))  # prewarped at ω_s
    zeta = terms.damping
    a0 = k**2 + 2 * zeta * omega * k + omega**2
    a1 = (2 * omega**2 - 2 * k**2) / a0
    a2 = (k**2 - 2 * zeta * omega * k + omega**2) / a0
    band = 2 * zeta * omega * k / a0  # the resonance's numerator: band (1 − z⁻²)
    gain = terms.resonance_gain
    return 1.0 + gain * band, a1, a2 - gain * band, a1, a2


def apply_site(traces: np.ndarray, terms: SiteTerms, sampling_rate_hz: float) -> np.ndarray:
    """The site-filtered record: traces (..., n_time, n_sensors) m/s → same shape, float64."""
    b0, b1, b2, a1, a2 = biquad_coefficients(terms, sampling_rate_hz)
    x = np.moveaxis(np.asarray(traces, dtype=np.float64), -2, 0)
    out = np.empty_like(x)
    state1 = np.zeros(x.shape[1:])
    state2 = np.zeros(x.shape[1:])
    for n in range(x.shape[0]):
        y = b0 * x[n] + state1
        state1 = b1 * x[n] - a1 * y + state2
        state2 = b2 * x[n] - a2 * y
        out[n] = y
    return np.moveaxis(out, 0, -2) * terms.amplification
