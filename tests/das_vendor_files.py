"""DAS files in vendor formats that DASCore reads, written for tests (no binaries checked in).

- `write_prodml`: PRODML 2.1 HDF5 as OptaSense and other interrogators write it, in the layout
  DASCore's `io/prodml` reader expects: group `/Acquisition` (attrs PulseRate, PulseWidth,
  NumberOfLoci, StartLocusIndex, SpatialSamplingInterval and `.uom`, GaugeLength, schemaVersion,
  uuid, …), its `Raw[0]` group (RawDescription, RawDataUnit) holding `RawData` (time × locus,
  attr `Dimensions`) and `RawDataTime` (int64 µs since 1970, attrs PartStartTime/PartEndTime as
  ISO 8601 with a UTC offset).
- `write_terra15`: Terra15 Treble HDF5 version 6 as DASCore's `io/terra15` reader expects: root
  attrs (file_version, data_product, data_product_units, dx, nx, sensing_range_start,
  gauge_length, serial_number, …) and group `data_product` with `data` (time × distance,
  float32), `gps_time` and `posix_time` (float64 s since 1970, one per row).
- `write_silixa_h5`: Silixa iDAS HDF5 (`Acoustic` dataset, time × channel, with the attrs
  DASCore's `io/silixah5` reader maps: SamplingFrequency[Hz], GPSTimeStamp as
  `dd/mm/yyyy HH:MM:SS.ffffff (UTC)`, StartPosition[m], SpatialResolution[m], …).
- `write_dasdae`: DASCore's own DASDAE format, written by DASCore (`patch.io.write`).

Every writer takes the values (time × distance, float) and the first sample's time
(`numpy.datetime64`, ns), so tests know exactly what each file holds.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np

NS_PER_S = 1_000_000_000


def _iso(time: np.datetime64, offset: str = "") -> str:
    """ISO 8601 with microseconds (what interrogators write), optional UTC offset."""
    return str(np.datetime64(time, "us")) + offset


def _bytes(text: str) -> np.bytes_:
    return np.bytes_(text.encode())


def write_prodml(
    path: Path,
    data: np.ndarray,
    start: np.datetime64,
    rate_hz: float,
    *,
    spacing_m: float = 1.0,
    start_locus: int = 0,
    gauge_length_m: float = 10.0,
    description: str = "strain rate",
    units: str = "1/s",
    **dataset_options,
) -> Path:
    """A PRODML 2.1 file of `data` (time × locus); sample times in whole microseconds.
    `dataset_options` go to h5py's `create_dataset` of RawData (chunks, compression)."""
    import h5py

    n_time, n_loci = data.shape
    step_us = round(1e6 / rate_hz)
    times_us = start.astype("datetime64[us]").astype(np.int64) + step_us * np.arange(n_time)
    first, last = (np.datetime64(int(t), "us") for t in (times_us[0], times_us[-1]))
    with h5py.File(path, "w") as handle:
        acquisition = handle.create_group("Acquisition")
        attrs = {
            "AcquisitionDescription": _bytes("seisctf test acquisition"),
            "AcquisitionId": _bytes(str(uuid.UUID(int=1))),
            "AcquisitionSampleRate": float(rate_hz),
            "AcquisitionSampleRate.uom": _bytes("Hz"),
            "GaugeLength": float(gauge_length_m),
            "GaugeLength.uom": _bytes("m"),
            "MaximumFrequency": float(rate_hz) / 2,
            "MaximumFrequency.uom": _bytes("Hz"),
            "MeasurementStartTime": _bytes(_iso(first, "+00:00")),
            "MinimumFrequency": 0.0,
            "MinimumFrequency.uom": _bytes("Hz"),
            "NumberOfLoci": np.int32(n_loci),
            "PulseRate": float(rate_hz),
            "PulseRate.uom": _bytes("Hz"),
            "PulseWidth": 100.0,
            "PulseWidth.uom": _bytes("ns"),
            "SpatialSamplingInterval": float(spacing_m),
            "SpatialSamplingInterval.uom": _bytes("m"),
            "StartLocusIndex": np.int32(start_locus),
            "TriggeredMeasurement": _bytes("false"),
            "schemaVersion": _bytes("2.1"),
            "uuid": _bytes(str(uuid.UUID(int=2))),
        }
        acquisition.attrs.update(attrs)
        raw = acquisition.create_group("Raw[0]")
        raw.attrs.update(
            {
                "NumberOfLoci": np.int32(n_loci),
                "OutputDataRate": float(rate_hz),
                "OutputDataRate.uom": _bytes("Hz"),
                "RawDataUnit": _bytes(units),
                "RawDescription": _bytes(description),
                "StartLocusIndex": np.int32(start_locus),
                "uuid": _bytes(str(uuid.UUID(int=3))),
            }
        )
        part = {
            "PartStartTime": _bytes(_iso(first, "+00:00")),
            "PartEndTime": _bytes(_iso(last, "+00:00")),
            "StartIndex": np.int64(0),
            "Count": np.int64(n_time),
        }
        values = raw.create_dataset("RawData", data=data, **dataset_options)
        values.attrs.update({**part, "Dimensions": [_bytes("time"), _bytes("locus")]})
        clock = raw.create_dataset("RawDataTime", data=times_us)
        clock.attrs.update({**part, "Dimensions": _bytes("time")})
    return path


def write_terra15(
    path: Path,
    data: np.ndarray,
    start: np.datetime64,
    rate_hz: float,
    *,
    spacing_m: float = 2.0,
    range_start_m: float = 0.0,
    gauge_length_m: float = 8.0,
    product: str = "strain_rate",
    units: str = "1/s",
) -> Path:
    """A Terra15 Treble version 6 file of `data` (time × distance, stored float32)."""
    import h5py

    n_time, n_distance = data.shape
    start_s = start.astype("datetime64[ns]").astype(np.int64) / NS_PER_S
    times = start_s + np.arange(n_time) / rate_hz
    with h5py.File(path, "w") as handle:
        handle.attrs.update(
            {
                "acoustic_bandwidth_end": rate_hz / 2,
                "acoustic_bandwidth_start": 0.0,
                "amplifier_incoming_current": 0.5,
                "data_product": product,
                "data_product_units": units,
                "dt_computer": 1 / rate_hz,
                "dx": float(spacing_m),
                "file_start_computer_time": float(times[0]),
                "file_start_gps_time": float(times[0]),
                "file_version": "6",
                "frame_size": np.int64(n_time),
                "gauge_length": float(gauge_length_m),
                "nx": np.int64(n_distance),
                "pulse_length": 20.0,
                "pulse_rate": float(rate_hz),
                "sensing_range_end": range_start_m + (n_distance - 1) * spacing_m,
                "sensing_range_start": float(range_start_m),
                "serial_number": "T15-TEST",
            }
        )
        node = handle.create_group("data_product")
        node.create_dataset("data", data=data.astype(np.float32))
        node.create_dataset("gps_time", data=times)
        node.create_dataset("posix_time", data=times)
    return path


def write_silixa_h5(
    path: Path,
    data: np.ndarray,
    start: np.datetime64,
    rate_hz: float,
    *,
    spacing_m: float = 1.0,
    start_position_m: float = 0.0,
    gauge_length_m: float = 10.0,
) -> Path:
    """A Silixa iDAS HDF5 file of `data` (time × channel, stored float32)."""
    import h5py

    stamp = np.datetime64(start, "us").astype(object).strftime("%d/%m/%Y %H:%M:%S.%f (UTC)")
    n_time, n_channel = data.shape
    with h5py.File(path, "w") as handle:
        acoustic = handle.create_dataset("Acoustic", data=data.astype(np.float32))
        acoustic.attrs.update(
            {
                "GaugeLength": float(gauge_length_m),
                "SamplingFrequency[Hz]": float(rate_hz),
                "Fibre Length Multiplier": 1.0,
                "Start Distance (m)": float(start_position_m),
                "Stop Distance (m)": start_position_m + (n_channel - 1) * spacing_m,
                "Fibre Length per Metre": 1.0,
                "GPSTimeStamp": stamp,
                "CPUTimeStamp": stamp,
                "Tags": "seisctf test",
                "PulseWidth[ns]": 50.0,
                "MeasureLength[m]": 0.0,
                "StartPosition[m]": float(start_position_m),
                "SpatialResolution[m]": float(spacing_m),
                "SystemInfomation.Devices1.SerialNum": "iDAS-TEST",
            }
        )
    return path


def write_dasdae(
    path: Path,
    data: np.ndarray,
    start: np.datetime64,
    rate_hz: float,
    *,
    spacing_m: float = 1.0,
    gauge_length_m: float = 10.0,
    data_type: str = "strain_rate",
    units: str = "1/s",
) -> Path:
    """A DASDAE file written by DASCore itself, one patch of `data` (time × distance)."""
    import dascore as dc

    n_time, n_distance = data.shape
    step = np.timedelta64(round(NS_PER_S / rate_hz), "ns")
    coords = {
        "time": start.astype("datetime64[ns]") + step * np.arange(n_time),
        "distance": spacing_m * np.arange(n_distance),
    }
    patch = dc.Patch(
        data=data,
        coords=coords,
        dims=("time", "distance"),
        attrs={"data_type": data_type, "data_units": units, "gauge_length": gauge_length_m},
    )
    patch.io.write(path, "DASDAE")
    return path


WRITERS = {
    "PRODML": write_prodml,
    "TERRA15": write_terra15,
    "Silixa_H5": write_silixa_h5,
    "DASDAE": write_dasdae,
}
