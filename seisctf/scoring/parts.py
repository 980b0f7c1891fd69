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

A picking truth's scored traces split the same way by name (`trace_split`, rule `TRACE_RULE`:
trace k's key is HMAC-SHA256(salt, "seisctf/trace-split/v1/<trace_name>")), with the salt
`seisctf.scoring.picks` derives from the withheld labels (`PickTruth.split_salt`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Callable, Sequence

import numpy as np

RULE = "seisctf/sensor-split/v1"
TRACE_RULE = "seisctf/trace-split/v1"
PARTS = ("public", "private")


def public_half(salt_hex: str, rule: str, keys: Sequence[str]) -> np.ndarray:
    """(len(keys),) bool: True for the len(keys) // 2 keys whose HMAC-SHA256(salt,
    "<rule>/<key>") is smallest (as a big-endian integer, ties by position): the public half."""
    salt = bytes.fromhex(salt_hex)
    digests = [hmac.new(salt, f"{rule}/{key}".encode(), hashlib.sha256).digest() for key in keys]
    order = sorted(range(len(keys)), key=lambda index: (digests[index], index))
    public = np.zeros(len(keys), dtype=bool)
    public[order[: len(keys) // 2]] = True
    return public


@functools.lru_cache(maxsize=8)
def _split(salt_hex: str, n_sensors: int) -> bytes:
    return public_half(salt_hex, RULE, [str(sensor) for sensor in range(n_sensors)]).tobytes()


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


def trace_split(salt_hex: str, names: Sequence[str]) -> np.ndarray:
    """(len(names),) bool: True for the traces of the public half (len(names) // 2 of them),
    False for the private half, of the scored traces `names` (unique; any order)."""
    if len(names) < 2:
        raise ValueError(f"a split needs at least 2 traces, got {len(names)}")
    return public_half(salt_hex, TRACE_RULE, names)
