"""One trace of one waveform file as its header says: what the scan reads (`waveform_files`,
`scan_table`) and the plan places (`waveform_plan`, `placed_traces`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """One trace of one file, as its header says: station id (`seed_ids`: `NET.STA` or
    `NET.STA.LOC`), channel code, first sample (ns since 1970), sampling rate (Hz), number of
    samples."""

    path: str
    station: str
    channel: str
    start_ns: int
    sampling_rate: float
    npts: int
