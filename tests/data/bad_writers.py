"""Writers of the small deterministic files the hostile input corpus is made of
(`make_bad_inputs.py`): zips dated 1980-01-01, .npy/.npz/zarr submissions of the tiny truth's
shapes, HDF5 without timestamps, SeisBench and STEAD stubs, and obspy's shipped test files as
real starting points."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

ZIP_DATE = (1980, 1, 1, 0, 0, 0)
# The submissions are for a truth of these shapes: the tiny bundle of tests/conftest.py
# (`write_tiny_truth`: TINY_LAYOUT over 48 sensors).
CTF_SHAPES = {
    "X1test": (100, 48),
    "X2test": (200, 48),
    "X3test": (100, 48),
    "X4test": (200, 48),
    "X5test": (100, 48),
    "X6test": (100, 48),
    "X7test": (100, 48),
    "X8test": (100, 48),
    "X9test": (100, 48),
}


def obspy_data(relative: str) -> Path:
    """A test file shipped with obspy (real recordings of real stations)."""
    import obspy

    return Path(obspy.__file__).parent / relative


MSEED_10_RECORDS = "io/mseed/tests/data/BW.BGLD.__.EHE.D.2008.001.first_10_records"
SAC_FILE = "io/sac/tests/data/test.sac"
SAC_NPTS_OFFSET = 316  # int header word 9 (after 70 floats)
SAC_NVHDR_OFFSET = 304  # int header word 6: header version, 6
SAC_DATA_OFFSET = 632  # the samples (float32) follow the header


# --- writers of small deterministic files ------------------------------------------------------


def write_zip(path: Path, members: dict[str, bytes], deflate: bool = True) -> Path:
    """A zip of `members`, every entry dated 1980-01-01 with mode 0644."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, payload in members.items():
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
            info.external_attr = 0o100644 << 16
            archive.writestr(info, payload)
    return path


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=array.dtype.hasobject)
    return buffer.getvalue()


def npy_header(shape: tuple[int, ...], descr: str = "<f4") -> bytes:
    """A .npy header alone: what a file declares before its data."""
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def zero_arrays(**replace: np.ndarray | None) -> dict[str, np.ndarray]:
    """A valid all-zero float32 submission (compresses to almost nothing); `replace` swaps or
    (None) drops arrays."""
    arrays = {name: np.zeros(shape, dtype=np.float32) for name, shape in CTF_SHAPES.items()}
    for name, array in replace.items():
        arrays.pop(name, None)
        if array is not None:
            arrays[name] = array
    return arrays


def write_npz(path: Path, arrays: dict[str, np.ndarray], extra: dict[str, bytes] | None = None):
    members = {f"{name}.npy": npy_bytes(array) for name, array in arrays.items()}
    return write_zip(path, {**members, **(extra or {})})


def write_npy_folder(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    path.mkdir()
    for name, array in arrays.items():
        (path / f"{name}.npy").write_bytes(npy_bytes(array))
    return path


def write_zarr_group(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """A zarr v3 group with every chunk stored (all-zero ones too: the referee refuses a
    submission with a missing chunk)."""
    import zarr

    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, array in arrays.items():
        stored = group.create_array(
            name,
            shape=array.shape,
            dtype=array.dtype,
            chunks=(50, 48),
            config={"write_empty_chunks": True},
        )
        stored[...] = array  # through this handle: `group[name]` reopens with the default config
    return path


def zip_folder(folder: Path, archive: Path, extra: dict[str, bytes] | None = None) -> Path:
    members = {
        file.relative_to(folder).as_posix(): file.read_bytes()
        for file in sorted(folder.rglob("*"))
        if file.is_file()
    }
    return write_zip(archive, {**members, **(extra or {})})


def with_value(name: str, where: tuple[int, int], value: float) -> dict[str, np.ndarray]:
    array = np.zeros(CTF_SHAPES[name], dtype=np.float32)
    array[where] = value
    return zero_arrays(**{name: array})


def flip_bits(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    """`data` with bit `bit` of byte `offset` inverted for each (offset, bit)."""
    changed = bytearray(data)
    for offset, bit in flips:
        changed[offset] ^= 1 << bit
    return bytes(changed)


def write_hdf5(path: Path, datasets: dict[str, object], attrs: dict | None = None) -> Path:
    import h5py

    with h5py.File(path, "w") as handle:
        for name, values in datasets.items():
            handle.create_dataset(name, data=values)
        for key, value in (attrs or {}).items():
            handle.attrs[key] = value
    return path


STATIONXML = """<?xml version="1.0" encoding="UTF-8"?>
<FDSNStationXML xmlns="http://www.fdsn.org/xml/station/1" schemaVersion="1.1">
  <Source>seisctf hostile corpus</Source>
  <Created>2020-01-01T00:00:00Z</Created>
  <Network code="BW">
    <Station code="BGLD" startDate="2000-01-01T00:00:00Z">
{coordinates}      <Site><Name>hostile</Name></Site>
      <Channel code="EHE" locationCode="" startDate="2000-01-01T00:00:00Z">
{coordinates}        <Depth>0</Depth>
        <SampleRate>200</SampleRate>
      </Channel>
    </Station>
  </Network>
</FDSNStationXML>
"""
COORDINATES = "      <Latitude>48.0</Latitude>\n      <Longitude>12.0</Longitude>\n" + (
    "      <Elevation>500</Elevation>\n"
)

SEISBENCH_COLUMNS = "trace_name,station_network_code,station_code,trace_sampling_rate_hz"


def seisbench_dataset(
    path: Path, metadata: str | bytes, waveforms: bytes | None = None, n_samples: int = 100
) -> Path:
    """A SeisBench dataset folder: metadata.csv as given, waveforms.hdf5 holding bucket0 of
    four 3 × n_samples windows (or the bytes given)."""
    path.mkdir()
    raw = metadata.encode() if isinstance(metadata, str) else metadata
    (path / "metadata.csv").write_bytes(raw)
    if waveforms is not None:
        (path / "waveforms.hdf5").write_bytes(waveforms)
        return path
    bucket = np.arange(4 * 3 * n_samples, dtype=np.float32).reshape(4, 3, n_samples)
    data_format = {"dimension_order": "CW", "component_order": "ZNE", "sampling_rate": 100.0}
    datasets = {f"data_format/{key}": value for key, value in data_format.items()}
    return write_hdf5(path / "waveforms.hdf5", {"data/bucket0": bucket, **datasets}).parent


def seisbench_rows(names: list[str]) -> str:
    rows = [f'"{name}",XX,S{i},100.0' for i, name in enumerate(names)]
    return "\n".join([SEISBENCH_COLUMNS, *rows]) + "\n"


STEAD_COLUMNS = "trace_name,network_code,receiver_code,receiver_type,p_arrival_sample"


def stead_hdf5(path: Path) -> Path:
    return write_hdf5(path, {"data/XX.S1_EV": np.zeros((100, 3), dtype=np.float32)})


RUNS_COLUMNS = "approach,budget,data_draw,training_seed,metric,value"


# --- small stores of seisctf's layouts, written with zarr directly -----------------------------

Variable = tuple[tuple[str, ...], np.ndarray]  # (dimension names, values)


def write_store(
    path: Path,
    data_vars: dict[str, Variable],
    coords: dict[str, Variable],
    attrs: dict,
    extra: dict[str, bytes] | None = None,
) -> Path:
    """A zarr v3 store as seisctf's writers leave it: one chunk per array (every chunk written),
    data variables listing the non-dimension `coords` in their `coordinates` attribute, the
    `extra` files inside the store, then `attrs` with the completion marker and the consolidated
    metadata, last. Nothing records a time or a library version."""
    import zarr

    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    listed = " ".join(name for name, (dims, _) in coords.items() if dims != (name,))
    for name, (dims, values) in {**coords, **data_vars}.items():
        values = np.asarray(values)
        text = values.dtype.kind in "OU"
        stored = group.create_array(
            name,
            shape=values.shape,
            dtype=str if text else values.dtype,
            chunks=values.shape,
            fill_value="" if text else np.nan if values.dtype.kind == "f" else 0,
            dimension_names=dims,
            attributes={"coordinates": listed} if name in data_vars and listed else {},
            config={"write_empty_chunks": True},
        )
        stored[...] = values
    group.attrs.update({**attrs, "seisctf_complete": True})
    zarr.consolidate_metadata(group.store)
    for relative, payload in (extra or {}).items():  # after listing the group: no zarr nodes
        (path / relative).write_bytes(payload)
    return path


def waveform_store(
    path: Path, stations: list[str], n_samples: int, rate_hz: float, codes: bool = True
) -> Path:
    """A continuous waveform store (docs/contract.md): data(station, channel, time) float32 of
    `stations` × BHZ × `n_samples` at `rate_hz` from 2020-01-01, seeded noise without gaps;
    `codes`: the network, station_code and location arrays (split from the ids)."""
    data = np.random.default_rng(7).standard_normal((len(stations), 1, n_samples))
    coords: dict[str, Variable] = {
        "station": (("station",), np.array(stations, dtype=object)),
        "channel": (("channel",), np.array(["BHZ"], dtype=object)),
        "latitude": (("station",), np.linspace(40.0, 41.0, len(stations))),
        "longitude": (("station",), np.linspace(10.0, 11.0, len(stations))),
        "elevation": (("station",), np.zeros(len(stations))),
    }
    if codes:
        parts = [(station.split(".") + [""])[:3] for station in stations]
        for index, name in enumerate(("network", "station_code", "location")):
            coords[name] = (("station",), np.array([p[index] for p in parts], dtype=object))
    attrs = {
        "start_time": "2020-01-01T00:00:00Z",
        "start_time_ns": 1577836800 * 10**9,
        "sampling_rate": rate_hz,
        "block_samples": n_samples,
        "time_offsets_s": {station: [0.0] for station in stations},
        "channel_metadata": {station: {} for station in stations},
        "ingest_problems": [],
        "inputs": [],
        "resampling": None,
        "response_removed": None,
    }
    data_vars: dict[str, Variable] = {
        "data": (("station", "channel", "time"), data.astype(np.float32)),
        "coverage": (("station", "block"), np.ones((len(stations), 1), dtype=np.float32)),
    }
    return write_store(path, data_vars, coords, attrs)


def event_window_store(path: Path, catalog: bytes | None) -> Path:
    """An event-window store (docs/contract.md) of four 3 × 100-sample windows at 100 Hz, two
    stations × two events, whose attr `catalog` names `catalog.parquet` inside it, holding
    `catalog` (None: no such file)."""
    names = np.array([f"XX.S{i % 2}_EV{i // 2}" for i in range(4)], dtype=object)
    coords: dict[str, Variable] = {
        "channel": (("channel",), np.array(["Z", "N", "E"], dtype=object)),
        "trace_name": (("trace",), names),
        "trace_npts": (("trace",), np.full(4, 100, dtype=np.int64)),
        "station_network_code": (("trace",), np.array(["XX"] * 4, dtype=object)),
        "station_code": (("trace",), np.array([f"S{i % 2}" for i in range(4)], dtype=object)),
        "source_id": (("trace",), np.array([f"EV{i // 2}" for i in range(4)], dtype=object)),
    }
    waveforms = np.random.default_rng(8).standard_normal((4, 3, 100)).astype(np.float32)
    attrs = {"sampling_rate": 100.0, "component_order": "ZNE", "catalog": "catalog.parquet"}
    extra = None if catalog is None else {"catalog.parquet": catalog}
    return write_store(path, {"waveforms": (("trace", "channel", "sample"), waveforms)}, coords,
                       attrs, extra)  # fmt: skip


QUAKEML_ONE_PICK = """<?xml version="1.0" encoding="UTF-8"?>
<q:quakeml xmlns:q="http://quakeml.org/xmlns/quakeml/1.2" xmlns="http://quakeml.org/xmlns/bed/1.2">
  <eventParameters publicID="smi:local/corpus">
    <event publicID="smi:local/corpus/event/1">
      <preferredOriginID>smi:local/corpus/origin/1</preferredOriginID>
      <origin publicID="smi:local/corpus/origin/1">
        <time><value>2020-01-01T00:00:10.000000Z</value></time>
        <latitude><value>40.5</value></latitude>
        <longitude><value>10.5</value></longitude>
        <depth><value>10000.0</value></depth>
      </origin>
      <pick publicID="smi:local/corpus/pick/1">
        <time><value>2020-01-01T00:00:30.000000Z</value></time>
        <waveformID networkCode="IM" stationCode="I59H1" locationCode="" channelCode="BHZ"/>
        <phaseHint>P</phaseHint>
      </pick>
    </event>
  </eventParameters>
</q:quakeml>
"""  # one event (origin at 10 s) and one P pick (at 30 s) at IM.I59H1, times of `waveform_store`
