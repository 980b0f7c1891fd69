"""Instrument response removal for the waveform ingest (`--remove-response`), done by obspy.

Each contiguous input trace (one trace of one file, as `obspy.read` returns it) is corrected on
its own, in float64, exactly as `Trace.remove_response(inventory, output, water_level, pre_filt)`
does with obspy's defaults for the rest (`zero_mean=True`, `taper=True`, `taper_fraction=0.05`):
mean removed, 5 % cosine taper, spectrum divided by the StationXML response of the trace's start
time with a water level, band-limited by the `pre_filt` cosine window. Then it is resampled (if
asked), put on the grid and merged. The correction of a sample therefore depends on the whole
input trace it came from and on nothing else: not on the store's time blocks, nor on the number
of workers. (Correcting each block instead would make every block edge a taper edge, and the
result a function of the block size.)

Default `pre_filt` (Hz), from the store's sampling rate fs (Nyquist fN = fs / 2):
(0.005, 0.01, 0.8 fN, 0.9 fN): flat from 100 s period to 80 % of the Nyquist frequency, so the
water level does not have to tame the response's low-frequency and anti-alias ends alone.

Units of the stored samples: `M`, `M/S` or `M/S**2` for DISP, VEL, ACC of a channel whose
response input is a motion (m, m/s, m/s², any prefix: obspy scales to metres); for any other
input (e.g. `PA` of an infrasound channel) obspy applies the response as it is and `output` has
no effect: the stored unit is the response's input unit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from seisctf.errors import InvalidInput

OUTPUTS = ("VEL", "DISP", "ACC")
DEFAULT_OUTPUT = "VEL"
DEFAULT_WATER_LEVEL = 60.0
AUTO = "auto"  # `pre_filt` from the store's sampling rate (see the module docstring)
LOW_CORNERS_HZ = (0.005, 0.01)
Corners = tuple[float, float, float, float]  # a pre-filter's four corners, Hz
HIGH_CORNERS_OF_NYQUIST = (0.8, 0.9)
METHOD = (
    "obspy Trace.remove_response per contiguous input trace (float64; zero_mean, 5 % cosine "
    "taper), before resampling and merging onto the grid"
)
_MOTION = {
    "DISP": ("M", "NM", "CM", "MM"),
    "VEL": ("M/S", "M/SEC", "NM/S", "NM/SEC", "CM/S", "CM/SEC", "MM/S", "MM/SEC"),
    "ACC": tuple(
        f"{prefix}{unit}"
        for prefix in ("", "NM", "CM", "MM")
        for unit in ("M/S**2", "M/(S**2)", "M/SEC**2", "M/(SEC**2)", "M/S/S")
    ),
}
_OUTPUT_UNITS = {"DISP": "M", "VEL": "M/S", "ACC": "M/S**2"}


@dataclass(frozen=True)
class ResponseRemoval:
    """What `--remove-response` does: output quantity, pre-filter corners (Hz, or None for
    none) and water level (dB, or None for none); the rest is obspy's defaults."""

    output: str = DEFAULT_OUTPUT
    pre_filt: Corners | None = None
    water_level: float | None = DEFAULT_WATER_LEVEL
    zero_mean: bool = True
    taper: bool = True
    taper_fraction: float = 0.05

    def attrs(self, pre_filt_default: bool) -> dict[str, Any]:
        """The store's `response_removed` attr (also what the fingerprint hashes)."""
        return {
            "output": self.output,
            "pre_filt": list(self.pre_filt) if self.pre_filt is not None else None,
            "pre_filt_default": pre_filt_default,
            "water_level": self.water_level,
            "zero_mean": self.zero_mean,
            "taper": self.taper,
            "taper_fraction": self.taper_fraction,
            "method": METHOD,
        }


def default_pre_filt(sampling_rate_hz: float) -> Corners:
    nyquist = sampling_rate_hz / 2.0
    high, higher = (round(fraction * nyquist, 9) for fraction in HIGH_CORNERS_OF_NYQUIST)
    return (*LOW_CORNERS_HZ, high, higher)


def parse_pre_filt(text: str | Sequence[float] | None) -> Corners | str | None:
    """`F1,F2,F3,F4` (Hz) or four numbers -> four floats; `none` or None -> None (no
    pre-filter); `auto` -> AUTO (the default band)."""
    if text is None or (isinstance(text, str) and text.strip().lower() == "none"):
        return None
    if isinstance(text, str) and text.strip().lower() == AUTO:
        return AUTO
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        corners = tuple(float(part) for part in parts)
    except (TypeError, ValueError):
        raise InvalidInput("pre_filt", f"expected F1,F2,F3,F4 in Hz, got {text!r}") from None
    if len(corners) != 4 or not all(math.isfinite(c) for c in corners):
        raise InvalidInput("pre_filt", f"expected four finite frequencies in Hz, got {text!r}")
    if not (0 <= corners[0] < corners[1] < corners[2] < corners[3]):
        raise InvalidInput("pre_filt", f"expected 0 <= F1 < F2 < F3 < F4, got {text!r}")
    return corners


def parse_water_level(text: str | float | None) -> float | None:
    """A water level in dB (obspy's default 60), or `none`."""
    if text is None or (isinstance(text, str) and text.strip().lower() == "none"):
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InvalidInput("water_level", f"expected dB or 'none', got {text!r}") from None
    if not math.isfinite(value):
        raise InvalidInput("water_level", f"expected a finite number of dB, got {text!r}")
    return value


def requested_removal(
    output: str | None,
    pre_filt: str | Sequence[float] | None,
    water_level: str | float | None,
    inventories: Sequence[str],
) -> tuple[str, Corners | str | None, float | None] | None:
    """Check the response options before any work: (output, pre_filt or AUTO, water level), or
    None when no removal is asked. `pre_filt`/`water_level` other than their defaults without
    `output` are bad input, as is a removal without inventories."""
    corners, level = parse_pre_filt(pre_filt), parse_water_level(water_level)
    if output is None:
        if corners != AUTO or level != DEFAULT_WATER_LEVEL:
            raise InvalidInput(
                "{pre_filt}/{water_level}",
                "only apply with {remove_response}",
                parameters=("pre_filt", "water_level", "remove_response"),
            )
        return None
    if str(output).upper() not in OUTPUTS:
        raise InvalidInput("remove_response", f"output must be one of {OUTPUTS}, got {output}")
    if not inventories:
        raise InvalidInput(
            "remove_response",
            "needs the instrument responses: give {inventory} STATIONXML (none was given)",
            parameters=["inventory"],
        )
    return str(output).upper(), corners, level


def resolve_removal(
    request: tuple[str, Corners | str | None, float | None], sampling_rate_hz: float
) -> tuple[ResponseRemoval, bool]:
    """The removal on a store of `sampling_rate_hz` and whether its pre_filt is the default."""
    output, pre_filt, water_level = request
    auto = pre_filt == AUTO
    # AUTO is the one text `parse_pre_filt` gives.
    corners = default_pre_filt(sampling_rate_hz) if isinstance(pre_filt, str) else pre_filt
    return ResponseRemoval(output, corners, water_level), auto


def response_problem(path: str, seed_id: str, start: Any, inventory: Any) -> str | None:
    """A problem text if the inventory has no usable response for `seed_id` at `start`
    (obspy UTCDateTime), else None."""
    try:
        response = inventory.get_response(seed_id, start)
    except Exception:  # noqa: BLE001 - obspy raises a bare Exception when none matches
        return (
            f"{path}: {seed_id} at {start} has no instrument response in the inventory; "
            "trace not ingested (--remove-response)"
        )
    if not response.response_stages and not response.instrument_polynomial:
        return (
            f"{path}: {seed_id} at {start}: the inventory's response has no stages; "
            "trace not ingested (--remove-response)"
        )
    return None


def remove_response(trace: Any, inventory: Any, removal: ResponseRemoval) -> Any:
    """A float64 copy of `trace` with the response removed (obspy `Trace.remove_response`)."""
    import numpy as np

    corrected = trace.copy()
    corrected.data = np.asarray(corrected.data, dtype=np.float64)
    corrected.remove_response(
        inventory,
        output=removal.output,
        water_level=removal.water_level,
        pre_filt=removal.pre_filt,
        zero_mean=removal.zero_mean,
        taper=removal.taper,
        taper_fraction=removal.taper_fraction,
    )
    corrected.data = np.asarray(corrected.data, dtype=np.float64)
    return corrected


def corrected_units(output: str, input_units: str | None) -> str | None:
    """Units of the samples after removal (see the module docstring); None if unknown."""
    if input_units is None:
        return None
    if any(input_units.upper() in names for names in _MOTION.values()):
        return _OUTPUT_UNITS[output]
    return input_units
