"""Synthetic seismic signals for the archive generator (`make_archive.py`), numpy only.

- `background(rng, n, rate)`: float32 ground noise in counts (n samples at `rate` Hz): white noise
  (drawn as its spectrum) coloured to a broadband station's spectrum (a secondary microseism
  peak at 0.18 Hz, a 1/sqrt(f) rise below it, a flat floor up to 0.4 × rate), made in blocks of
  2**20 samples (power-of-two inverse FFTs) joined by 2**12-sample linear cross-fades, so a day
  costs a few FFTs and stays continuous. Scaled so that sample-to-sample differences have a
  standard deviation of `DIFF_STD_COUNTS`: STEIM2 then packs about 1.6 to 2.0 bytes a sample
  at 100 Hz, as on real broadband day files.
- `add_arrivals(x, rate, start_s, arrivals, rng)`: P and S wave trains added in place
  (a sine carrier of 1 Hz to 0.25 × rate with random phase, plus white noise, under a
  t·exp(-t/tau) envelope).
- `event_windows(rng, n, samples, rate)`: (n, 3, samples) float32 windows (Z, N, E) of noise with
  a P and an S arrival, and the arrival samples.

Units: counts (digitiser integers, stored as int32 in miniSEED or float32 in SeisBench windows).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.fft

BLOCK = 2**20  # samples per coloured-noise block
FADE = 2**12  # samples of cross-fade between blocks
DIFF_STD_COUNTS = 300.0  # std of first differences of the background, counts
MICROSEISM_HZ = 0.18


@dataclass(frozen=True)
class Arrival:
    """A P or S wave train at one station: onset (s since 1970), peak amplitude (counts),
    decay time (s), and the weights of the Z, N, E components."""

    onset_s: float
    amplitude: float
    tau_s: float
    weights: tuple[float, float, float]


@lru_cache(maxsize=8)
def _spectrum(rate: float, length: int) -> tuple[np.ndarray, float]:
    """Amplitude spectrum (rfft bins of `length` samples at `rate` Hz) and the std of the first
    differences of unit white noise coloured by it."""
    freq = np.fft.rfftfreq(length, 1.0 / rate)
    logf = np.log(np.maximum(freq, 1e-4))
    peak = 8.0 * np.exp(-0.5 * ((logf - np.log(MICROSEISM_HZ)) / 0.35) ** 2)
    shape = (peak + 0.3 / np.sqrt(np.maximum(freq, 0.01)) + 0.15) / (1 + (freq / (0.4 * rate)) ** 8)
    shape[0] = 0.0
    # Var of x[i+1] - x[i] for coloured unit noise: mean of |A|^2 * |1 - e^{-iw}|^2.
    weight = np.full(freq.shape, 2.0)
    weight[0] = 1.0
    if length % 2 == 0:
        weight[-1] = 1.0
    diff_gain = 4.0 * np.sin(np.pi * freq / rate) ** 2
    diff_std = float(np.sqrt(np.sum(weight * shape**2 * diff_gain) / length))
    return shape.astype(np.float32), diff_std


def background(rng: np.random.Generator, n: int, rate: float, scale: float = 1.0) -> np.ndarray:
    """(n,) float32 coloured noise in counts at `rate` Hz; `scale` multiplies its level."""
    length = min(BLOCK, _next_pow2(max(n, 2 * FADE)))
    fade = min(FADE, length // 4)
    step = length - fade
    n_blocks = max(1, -(-(n - fade) // step))
    shape, diff_std = _spectrum(float(rate), length)
    # White noise drawn as its spectrum (independent complex normal bins with the power of
    # rfft(unit white noise), L per bin): no forward FFT.
    bins = length // 2 + 1
    spectra = rng.standard_normal((n_blocks, bins, 2), dtype=np.float32).view(np.complex64)
    spectra = spectra[..., 0]
    spectra *= shape * np.float32(np.sqrt(length / 2))
    blocks = scipy.fft.irfft(spectra, length, axis=-1)
    if n_blocks > 1:
        ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
        blocks[1:, :fade] *= ramp
        blocks[:-1, -fade:] *= ramp[::-1]
    out = np.zeros(n_blocks * step + fade, dtype=np.float32)
    for index in range(n_blocks):
        out[index * step : index * step + length] += blocks[index]
    out = out[:n]
    out *= np.float32(scale * DIFF_STD_COUNTS / diff_std)
    return out


def _next_pow2(n: int) -> int:
    return 1 << (int(n) - 1).bit_length()


def add_arrivals(
    x: np.ndarray,
    rate: float,
    start_s: float,
    arrivals: list[Arrival],
    component: int,
    rng: np.random.Generator,
) -> None:
    """Add each arrival's wave train (component 0 Z, 1 N, 2 E) to `x` (counts, first sample
    at `start_s` s since 1970), in place; trains reaching past either end are cut."""
    for arrival in arrivals:
        length = int(8 * arrival.tau_s * rate)
        first = int(round((arrival.onset_s - start_s) * rate))
        lo, hi = max(first, 0), min(first + length, len(x))
        if hi <= lo:
            continue
        t = (np.arange(lo, hi, dtype=np.float32) - first) / np.float32(rate)
        envelope = (t / arrival.tau_s) * np.exp(1.0 - t / arrival.tau_s)
        carrier_hz = rng.uniform(1.0, max(1.0, 0.25 * rate))
        carrier = np.sin(2 * np.pi * carrier_hz * t + rng.uniform(0, 2 * np.pi))
        carrier += 0.3 * rng.standard_normal(hi - lo, dtype=np.float32)
        amplitude = arrival.amplitude * arrival.weights[component]
        x[lo:hi] += (amplitude * envelope * carrier).astype(np.float32)


def event_windows(
    rng: np.random.Generator, n: int, samples: int, rate: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`n` three-component windows (Z, N, E), (n, 3, samples) float32 counts, each with a P and
    an S arrival: (windows, P sample, S sample) (sample indices, int)."""
    p = rng.integers(samples // 10, samples // 3, n)
    s = np.minimum(p + rng.integers(int(0.5 * rate), samples // 3, n), samples - 1)
    t = np.arange(samples, dtype=np.float32)[None, None, :]
    noise = rng.standard_normal((n, 3, samples), dtype=np.float32)
    noise = np.cumsum(noise, axis=-1) * np.float32(0.1) + noise * np.float32(20.0)
    noise -= noise.mean(axis=-1, keepdims=True)
    out = noise
    amplitude = 10 ** rng.uniform(1.5, 3.5, (n, 1, 1)).astype(np.float32)
    for onset, weights, tau_s in (
        (p, np.array([1.0, 0.4, 0.4], np.float32), 1.0),
        (s, np.array([0.5, 1.0, 1.0], np.float32), 2.5),
    ):
        lag = (t - onset[:, None, None].astype(np.float32)) / np.float32(rate * tau_s)
        envelope = np.where(lag > 0, lag * np.exp(1.0 - lag), 0.0).astype(np.float32)
        hz = rng.uniform(1.0, 0.2 * rate, (n, 1, 1)).astype(np.float32)
        phase = rng.uniform(0, 2 * np.pi, (n, 3, 1)).astype(np.float32)
        carrier = np.sin(2 * np.pi * hz * t / np.float32(rate) + phase)
        out += amplitude * weights[None, :, None] * envelope * carrier
        amplitude = amplitude * np.float32(2.0)  # S larger than P
    return out.astype(np.float32, copy=False), p, s
