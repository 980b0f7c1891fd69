"""Event windows and their split back to SeisBench users (`seisctf export seisbench`).

Full export: `DIR/metadata.csv` + `DIR/waveforms.hdf5` written by seisbench's own
`WaveformDataWriter` (its buckets; `data_format`: `dimension_order` `CW`, `sampling_rate`, and
`component_order`, the store's `channel` letters, when every trace has every component), one
row per trace in store order with every per-trace column of the store (the `split` column
included). Each waveform is the store's window cut to `trace_npts` samples (the NaN padding is
not exported), holding only the components it has (`window_components`: a component all NaN in
the window is left out), listed in the row's `trace_component_order` in the store's order, so
that SeisBench's `missing_components` fills the others when reading, as it does for any
dataset (a window without any sample is written whole, as zeros). Gaps inside a component are
written as zeros, as SeisBench's converters write them, and `trace_gap_fraction` says which
share of each trace they are (the store's column; measured here for a store written without
it). The writer names traces by their block (`bucket0$3,:3,:6000`) and keeps the store's
`trace_name` as `trace_name_original`; a store that already has `trace_name_original` (from a
SeisBench dataset) keeps it. Waveforms
are read with Dask, about 64 MiB of whole chunks at a time, and written as they come; the files are
written in `DIR/.seisctf-export/` and moved into place when complete.

Metadata only (`metadata_only=True`): for an existing SeisBench dataset in DIR, its metadata
file(s) (`metadata.csv`, or `metadata{chunk}.csv` of a chunked dataset) get the store's `split`
column, rows matched by `trace_name` (the store keeps the dataset's own names); every other
column is kept as written (read and written back as text). Rows the store does not have get an
empty split (no `train()`/`dev()`/`test()`). The original is kept once as `metadata….csv.orig`.
Without an existing dataset, `DIR/metadata.csv` is written from the store's columns.

Filter (`query`, `--filter`): only the traces a pandas query on the store's metadata selects
(`trace_query.select_traces`, store order) are exported, in both modes (metadata only: the
other rows of an existing dataset get an empty split); a query that cannot be evaluated or
selects nothing is InvalidInput, before anything is written.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs.trace_query import select_traces
from seisctf.catalogs.trace_table import read_trace_table
from seisctf.catalogs.window_components import gap_fractions, own_components
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

# Bytes of waveforms computed per round (whole store chunks): what the writer holds at once.
ROUND_BYTES = 64 * 2**20
WORK_DIR = ".seisctf-export"


def component_order(ds) -> str:
    channels = [str(c) for c in ds[cv.CHANNEL].values]
    if not all(len(c) == 1 for c in channels):
        raise InvalidInput(
            "store", f"channel labels {channels} are not component letters (Z, N, E, …)"
        )
    return "".join(channels)


def data_format(ds, whole: bool = True) -> dict[str, Any]:
    """The writer's `data_format`; `component_order` only when every trace is `whole` (has
    every component): SeisBench warns when it differs from a row's `trace_component_order`."""
    found = {"dimension_order": "CW", "sampling_rate": cv.sampling_rate_hz(ds.attrs, "store")}
    if whole:
        found["component_order"] = component_order(ds)
    for key in ("measurement", "unit", "instrument_response"):
        if key in ds.attrs:
            found[key] = ds.attrs[key]
    return found


def trace_metadata(table: pd.DataFrame) -> list[dict[Hashable, Any]]:
    """Rows for the writer: NaN stays NaN, text stays text; the store's `trace_name` goes to
    the writer (which keeps it as `trace_name_original`) unless the store already has one."""
    if cv.TRACE_NAME_ORIGINAL in table:
        table = table.drop(columns=[cv.TRACE_NAME])
    return table.to_dict(orient="records")


def trace_rounds(chunks: tuple[int, ...], bytes_per_trace: int) -> list[tuple[int, int]]:
    """(start, stop) trace ranges of whole store chunks, each about ROUND_BYTES (at least one
    chunk)."""
    rounds, start, stop = [], 0, 0
    for size in chunks:
        if stop > start and (stop - start + size) * bytes_per_trace > ROUND_BYTES:
            rounds.append((start, stop))
            start = stop
        stop += size
    if stop > start:
        rounds.append((start, stop))
    return rounds


def trace_blocks(waveforms, quiet: bool):
    """Yield (first trace, numpy block) over rounds of the store's trace chunks, each computed
    with Dask."""
    _, n_channel, n_sample = waveforms.shape
    rounds = trace_rounds(waveforms.data.chunks[0], 4 * n_channel * n_sample)
    for number, (start, stop) in enumerate(rounds):
        label = f"export waveforms {number + 1}/{len(rounds)}"
        (block,) = compute(waveforms.data[start:stop], label=label, quiet=quiet)
        yield start, np.asarray(block)


def export_full(ds, table: pd.DataFrame, directory: Path, quiet: bool) -> list[Path]:
    from seisbench.data import WaveformDataWriter

    work = directory / WORK_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    npts = (
        table[cv.TRACE_NPTS].to_numpy(dtype=np.int64)
        if cv.TRACE_NPTS in table
        else np.full(len(table), ds.sizes[cv.SAMPLE], dtype=np.int64)
    )
    order, whole = component_order(ds), True
    stored_gaps = cv.TRACE_GAP_FRACTION in table  # else measured here (a store written before)
    # The writer's progress bar goes to stderr; --quiet silences it.
    with (
        contextlib.redirect_stderr(io.StringIO()) if quiet else contextlib.nullcontext(),
        WaveformDataWriter(work / "metadata.csv", work / "waveforms.hdf5") as writer,
    ):
        writer.set_total(len(table))
        for first, block in trace_blocks(ds[cv.EVENT_WINDOWS_VAR], quiet):
            rows = trace_metadata(table.iloc[first : first + len(block)])
            block_npts = npts[first : first + len(block)]
            fractions = None if stored_gaps else gap_fractions(block, block_npts)
            for offset, (row, window) in enumerate(zip(rows, block, strict=True)):
                trace, row[cv.TRACE_COMPONENT_ORDER] = own_components(
                    window[:, : block_npts[offset]], order
                )
                if fractions is not None:
                    row[cv.TRACE_GAP_FRACTION] = float(fractions[offset])
                whole &= row[cv.TRACE_COMPONENT_ORDER] == order
                writer.add_trace(row, np.ascontiguousarray(trace))
        writer.data_format = data_format(ds, whole)  # written when the writer closes
    written = []
    for name in ("waveforms.hdf5", "metadata.csv"):  # metadata last: it makes the dataset
        os.replace(work / name, directory / name)
        written.append(directory / name)
    shutil.rmtree(work, ignore_errors=True)
    return written


def metadata_files(directory: Path) -> list[Path]:
    """The metadata files of an existing SeisBench dataset in `directory` (its chunks, as
    seisbench finds them; a folder of metadata files without waveforms counts too)."""
    from seisbench.data import WaveformDataset

    if not directory.is_dir():
        return []
    try:
        chunks = WaveformDataset.available_chunks(directory)
    except FileNotFoundError:  # seisbench wants waveforms beside the metadata
        chunks = sorted(
            p.name[len("metadata") : -len(".csv")] for p in directory.glob("metadata*.csv")
        )
    return [p for p in (directory / f"metadata{c}.csv" for c in chunks) if p.is_file()]


def add_split_column(path: Path, split_of: pd.Series) -> tuple[int, int]:
    """Set `path`'s `split` column from `split_of` (trace_name → split), keeping every other
    value as written; returns (rows, rows matched)."""
    metadata = pd.read_csv(path, dtype=str, keep_default_na=False)
    if cv.TRACE_NAME not in metadata:
        raise InvalidInput(str(path), f"has no {cv.TRACE_NAME!r} column")
    split = metadata[cv.TRACE_NAME].map(split_of)
    metadata[cv.SPLIT_VAR] = split.fillna("")
    backup = path.with_name(path.name + ".orig")
    if not backup.exists():
        shutil.copy2(path, backup)
    temporary = path.with_name(path.name + ".seisctf-tmp")
    metadata.to_csv(temporary, index=False)
    os.replace(temporary, path)
    return len(metadata), int(split.notna().sum())


def export_metadata_only(table: pd.DataFrame, directory: Path, url: str) -> list[Path]:
    if cv.SPLIT_VAR not in table:
        raise InvalidInput(url, "has no split yet: run `seisctf split` on it first")
    existing = metadata_files(directory)
    if not existing:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "metadata.csv"
        temporary = directory / "metadata.csv.seisctf-tmp"
        table.to_csv(temporary, index=False)
        os.replace(temporary, path)
        return [path]
    names = table[cv.TRACE_NAME]
    if names.duplicated().any():
        raise InvalidInput(url, f"trace names repeat ({names[names.duplicated()].iloc[0]})")
    split_of = pd.Series(table[cv.SPLIT_VAR].to_numpy(), index=names.to_numpy())
    matched = 0
    for path in existing:
        _, found = add_split_column(path, split_of)
        matched += found
    if matched == 0:
        raise InvalidInput(
            str(directory), f"none of its trace names is in the store {url} (another dataset?)"
        )
    return existing


def export_seisbench(
    store: StoreLocation,
    directory: str,
    *,
    metadata_only: bool = False,
    query: str | None = None,
    quiet: bool = False,
) -> list[Path]:
    """Export the event-window store at `store` (the traces `query` selects, if given) to the
    SeisBench dataset folder `directory` (module doc); returns the files written."""
    url = store.url
    ds = cv.validate_event_window_store(storage.open_dataset(store), url)
    table = read_trace_table(ds, quiet=quiet)
    if query is not None:
        selected = select_traces(table, query, url)
        ds = ds.isel({cv.TRACE: selected})
        table = table.iloc[selected].reset_index(drop=True)
    target = Path(directory)
    if metadata_only:
        return export_metadata_only(table, target, url)
    target.mkdir(parents=True, exist_ok=True)
    return export_full(ds, table, target, quiet)
