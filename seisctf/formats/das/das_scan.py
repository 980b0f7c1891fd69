"""The header scan of a DAS ingest: each input read once, hashed, and its patches described
without reading their data.

`scan_das_file` copies or hashes a file as it reads it (`das_staging.fetched`: the copy is kept
on the host for the block tasks) and asks DASCore for its format (`dascore.get_format`) and its
patches' headers (the format's `FiberIO.scan`: time range, time step, distance axis, data type
and units, gauge length). A file DASCore does not know, or cannot scan, is a problem (text)
naming it; a file that cannot be read at all is InvalidInput.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from seisctf import conventions as cv
from seisctf.formats.das.das_plan import DasFileScan, DasPatch
from seisctf.formats.das.das_staging import fetched, named_like
from seisctf.location import StoreLocation

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _unknown_format(path: str, local: str) -> str:
    """Why DASCore knows no format for the file: a corrupt HDF5 file, an HDF5 file of another
    kind, or anything else."""
    with open(local, "rb") as handle:
        signature = handle.read(len(HDF5_SIGNATURE))
    if signature != HDF5_SIGNATURE:
        return f"{path}: not a DAS file DASCore knows (no format recognised)"
    import h5py

    try:
        with h5py.File(local, "r") as handle:
            names = sorted(handle)[:5]
    except Exception as error:  # noqa: BLE001 - any failure to open is a damaged file
        return f"{path}: corrupt HDF5 file (h5py: {str(error).splitlines()[0]})"
    return f"{path}: HDF5 file in no DAS format DASCore knows (top-level names {names})"


def _metres(value: Any, units: Any) -> float:
    """A length in m from a DASCore value and its units (None: taken as m)."""
    if value is None:
        return math.nan
    value = float(value)
    if units is None or str(units) in ("", "m", "meter", "1 m"):
        return value
    from dascore.units import get_quantity

    return value * float(get_quantity(units).to("m").magnitude)


def _describe(path: str, index: int, attrs: Any, fmt: str, version: str) -> DasPatch | str:
    """A DasPatch from DASCore's PatchAttrs, or the problem (text)."""
    import numpy as np
    from dascore.units import get_quantity_str

    where = f"{path}: patch {index}"
    if set(attrs.dim_tuple) != set(cv.DAS_DIMS):
        return f"{where} has dims {attrs.dim_tuple}, not (time, distance); not ingested"
    time, distance = attrs.coords["time"], attrs.coords["distance"]
    step = time.step
    if step is None or np.isnat(np.timedelta64(step)) or int(np.timedelta64(step, "ns")) <= 0:
        return f"{where} has an uneven time axis (DASCore gives no time step); not ingested"
    step_ns = int(np.timedelta64(step, "ns").astype(np.int64))
    start_ns = int(np.datetime64(time.min, "ns").astype(np.int64))
    end_ns = int(np.datetime64(time.max, "ns").astype(np.int64))
    distance_step = distance.step
    if distance_step is None or not np.isfinite(float(distance_step)) or distance_step == 0:
        return f"{where} has an uneven distance axis; not ingested"
    n_distance = round((float(distance.max) - float(distance.min)) / float(distance_step)) + 1
    data_type = str(attrs.data_type or "")
    extra = attrs.model_dump()
    return DasPatch(
        path=path,
        index=index,
        file_format=fmt,
        file_version=version,
        start_ns=start_ns,
        step_ns=step_ns,
        n_time=round((end_ns - start_ns) / step_ns) + 1,
        distance_start_m=_metres(distance.min, distance.units),
        distance_step_m=_metres(distance_step, distance.units),
        n_distance=n_distance,
        quantity=data_type if data_type in cv.DAS_QUANTITIES else "raw",
        units=get_quantity_str(attrs.data_units) or "",
        gauge_length_m=_metres(extra.get("gauge_length"), extra.get("gauge_length_units")),
        data_type=data_type,
        instrument_id=str(attrs.instrument_id or ""),
    )


def scan_das_file(input_file: StoreLocation, cache_run: str = "") -> DasFileScan:
    """Hash one input and scan its headers with DASCore (module doc); with a `cache_run`, its
    copy is kept on this host for the block tasks that read it."""
    import dascore as dc
    from dascore.exceptions import UnknownFiberFormatError
    from dascore.io.core import FiberIO

    path = input_file.url
    with fetched(input_file, cache_run) as (copy, sha256, size):
        entry = {"path": path, "size": size, "sha256": sha256}
        local = named_like(copy, path)
        try:
            fmt, version = dc.get_format(local)
        except UnknownFiberFormatError:
            return DasFileScan(path, entry, problems=(_unknown_format(path, local),))
        try:
            found = FiberIO.manager.get_fiberio(format=fmt, version=version).scan(local)
        except Exception as error:  # noqa: BLE001 - DASCore's readers raise many types
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            problem = f"{path}: DASCore's {fmt} {version} reader cannot scan it ({message})"
            return DasFileScan(path, entry, problems=(problem,))
    patches: list[DasPatch] = []
    problems: list[str] = []
    for index, attrs in enumerate(found):
        described = _describe(path, index, attrs, str(fmt), str(version))
        if isinstance(described, str):
            problems.append(described)
        else:
            patches.append(described)
    if not found:
        problems.append(f"{path}: DASCore found no data in it ({fmt} {version})")
    return DasFileScan(path, entry, tuple(patches), tuple(problems))


def scan_das_files(
    paths: Sequence[str], storage_options: dict | None, cache_run: str = ""
) -> list[DasFileScan]:
    """`scan_das_file` of each path (one scan task's batch)."""
    return [scan_das_file(StoreLocation(path, storage_options), cache_run) for path in paths]
