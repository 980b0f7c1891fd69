"""The public and private parts of a truth: which sensors (columns) of the test arrays each holds.

Every score is computed three times: on the whole truth, on its public part and on its private
part. A part's scores are the referee's scores of truth and submission with the other part's
sensors set to zero: its 2-norms and Frobenius norms are those of the part's columns alone, and
its long-time spectra are those of the zero-filled rows (so the spectral bins, `modes` of them,
are the whole truth's). During the season a participant is shown only the public part's AvgScore
(through the Ladder, `seisctf.scoring.ladder`); the final ranking uses the private part.

The split (`sensor_split`): sensor j's key is HMAC-SHA256(salt, "seisctf/sensor-split/v1/j");
the n // 2 sensors of smallest key (as a big-endian integer, ties by index) are public, the
others private. The salt is the truth group's commitment salt (`ctf_salt`): private until the
challenge closes and revealed then, so nobody can tell the parts apart during the season and
anyone can recompute and check them after. One split per sensor count, so every test array of a
bundle (all hold the same sensors) splits the same way.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Callable

import numpy as np

RULE = "seisctf/sensor-split/v1"
PARTS = ("public", "private")


@functools.lru_cache(maxsize=8)
def _split(salt_hex: str, n_sensors: int) -> bytes:
    key = bytes.fromhex(salt_hex)
    digests = [
        hmac.new(key, f"{RULE}/{sensor}".encode(), hashlib.sha256).digest()
        for sensor in range(n_sensors)
    ]
    order = sorted(range(n_sensors), key=lambda sensor: (digests[sensor], sensor))
    public = np.zeros(n_sensors, dtype=bool)
    public[order[: n_sensors // 2]] = True
    return public.tobytes()


def sensor_split(salt_hex: str, n_sensors: int) -> np.ndarray:
    """(n_sensors,) bool: True for the sensors of the public part (n_sensors // 2 of them),
    False for the private part, from the commitment salt `salt_hex` (module docstring)."""
    if n_sensors < 2:
        raise ValueError(f"a split needs at least 2 sensors, got {n_sensors}")
    return np.frombuffer(_split(salt_hex, n_sensors), dtype=bool).copy()


def part_mask(salt_hex: str, n_sensors: int, part: str) -> np.ndarray:
    """(n_sensors,) bool: True for the sensors of `part` ("public" or "private")."""
    public = sensor_split(salt_hex, n_sensors)
    if part not in PARTS:
        raise ValueError(f"part {part!r}: expected one of {PARTS}")
    return public if part == "public" else ~public


def zero_filled(
    values: np.ndarray, kernel: Callable[..., object], keep: np.ndarray, *args: object
) -> object:
    """kernel(values with the columns outside `keep` set to zero, *args); `values` (rows, n) is
    the region array its task assembled (changed in place), `keep` (n,) bool."""
    values[:, ~keep] = 0.0
    return kernel(values, *args)
