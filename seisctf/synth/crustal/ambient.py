"""The ambient wavefield: spatially coherent background ground motion, part of the truth.

Between and beneath earthquakes the ground never rests: the ambient (microseism and cultural)
wavefield at these frequencies is dominated by fundamental-mode Rayleigh waves arriving from a few
preferred directions (Aki 1957, Bull. Earthq. Res. Inst. 35; Bonnefoy-Claudet, Cotton & Bard
2006, Earth-Sci. Rev. 79). Modelled as K plane Rayleigh waves crossing the grid, wave q with
frequency f_q, propagation azimuth θ_q (clockwise from north), amplitude a_q and phase φ_q:

    phase_q(t, x) = 2π f_q t + φ_q − k_q (x cos θ_q + y sin θ_q),   k_q = 2π f_q / c,
    up   = Σ_q a_q cos(phase_q),
    radial = −(H/V) Σ_q a_q sin(phase_q),   north = radial cos θ_q,  east = radial sin θ_q,

a retrograde ellipse with H/V = 0.68 and phase velocity c = 0.9194 vs (the Rayleigh wave of a
Poisson half-space; Aki & Richards 2002, §5.3), vs the realisation's mean S velocity. The draws
(`default_rng(seed)`, in this order): a dominant azimuth θ0 uniform in [0, 2π); per wave, f_q
uniform in the band, θ_q = θ0 + a von Mises deviation (concentration κ = 2), φ_q uniform, a_q
Rayleigh-distributed; then the amplitudes are scaled so the vertical's expected mean square
Σ a_q² / 2 equals `rms_m_s`². The field is stationary and exists from the record's first sample
(it is not a source inside the grid, so causality does not concern it; the causality test switches
it off). It is added to the events' wavefield before the site terms, which filter both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seisctf.errors import InvalidInput

RAYLEIGH_SPEED_RATIO = 0.9194  # c_R / vs of a Poisson half-space
RAYLEIGH_H_OVER_V = 0.68  # horizontal / vertical amplitude at its surface
AZIMUTH_CONCENTRATION = 2.0  # von Mises κ of the directions around the dominant one


@dataclass(frozen=True)
class AmbientField:
    """One realisation's ambient field: its draws' seed, the vertical's RMS (m/s), the mean S
    velocity (m/s) that sets the phase velocity, the number of waves and band (Hz)."""

    seed: int
    rms_m_s: float
    vs_m_s: float
    n_waves: int = 32
    band_hz: tuple[float, float] = (0.4, 2.0)

    def checked(self) -> AmbientField:
        low, high = self.band_hz
        if not (self.rms_m_s >= 0 and self.vs_m_s > 0 and self.n_waves >= 1 and 0 < low < high):
            raise InvalidInput("ambient", "needs rms ≥ 0, vs > 0, ≥ 1 wave and 0 < low < high")
        return self


def ambient_record(
    ambient: AmbientField, x_m: np.ndarray, y_m: np.ndarray, time_s: np.ndarray
) -> np.ndarray:
    """(3, n_time, n_sensors) float64 up, north, east ground velocity (m/s) at sensors (x, y)."""
    ambient.checked()
    rng = np.random.default_rng(ambient.seed)
    dominant = rng.uniform(0.0, 2 * np.pi)
    k = ambient.n_waves
    frequency = rng.uniform(*ambient.band_hz, size=k)
    azimuth = dominant + rng.vonmises(0.0, AZIMUTH_CONCENTRATION, size=k)
    phase = rng.uniform(0.0, 2 * np.pi, size=k)
    amplitude = rng.rayleigh(1.0, size=k)
    amplitude *= ambient.rms_m_s / math.sqrt(np.sum(amplitude**2) / 2.0)
    speed = RAYLEIGH_SPEED_RATIO * ambient.vs_m_s
    x = np.asarray(x_m, dtype=np.float64)
    y = np.asarray(y_m, dtype=np.float64)
    t = np.asarray(time_s, dtype=np.float64)
    out = np.zeros((3, t.size, x.size))
    product = np.empty((t.size, x.size))
    for q in range(k):
        wavenumber = 2 * np.pi * frequency[q] / speed
        along = wavenumber * (x * math.cos(azimuth[q]) + y * math.sin(azimuth[q]))
        temporal = 2 * np.pi * frequency[q] * t + phase[q]
        c_t, s_t, c_x, s_x = np.cos(temporal), np.sin(temporal), np.cos(along), np.sin(along)
        # cos(a − b) = cos a cos b + sin a sin b;  sin(a − b) = sin a cos b − cos a sin b
        cosine = np.multiply.outer(c_t, c_x, out=product).copy()
        cosine += np.multiply.outer(s_t, s_x, out=product)
        sine = np.multiply.outer(s_t, c_x, out=product).copy()
        sine -= np.multiply.outer(c_t, s_x, out=product)
        out[0] += amplitude[q] * cosine
        radial = -RAYLEIGH_H_OVER_V * amplitude[q] * sine
        out[1] += radial * math.cos(azimuth[q])
        out[2] += radial * math.sin(azimuth[q])
    return out
