"""`seisctf subset STORE --query Q --out URL`: the selected windows bit for bit (their encoded
chunks byte for byte), the parent's metadata rows and split, provenance, only the selected
windows read and written (shards and bytes counted), local and on S3 (SeaweedFS); the subset
opens with `open_event_windows` and `engine="seisctf"` and exports to SeisBench; bad input is
exit 3 with nothing written."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import seisbench.data as sbd
import xarray as xr
from event_window_fixtures import trace_frame, write_event_windows

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows as ew
from seisctf.catalogs.event_window_subset import PARENT_TRACE_INDEX, subset_event_windows
from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.pipeline.splits import SplitOptions, split_store

SHARD_TRACES = 32
INDEX_BYTES = 16 * SHARD_TRACES + 4  # zarr v3 shard index: (offset, nbytes) uint64 + crc32c
# Outposts, northern ones and large events of the test split: windows in a few shards only.
QUERY = 'station_network_code == "CC" and (station_latitude_deg > 50 or split == "test")'


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A split event-window store (shards of SHARD_TRACES) and the fixture Dataset it holds."""
    url = str(tmp_path_factory.mktemp("subset") / "parent.zarr")
    source = write_event_windows(url, shard_traces=SHARD_TRACES, n_events=80)
    split_store(StoreLocation(url), SplitOptions("event", seed=3), quiet=True)
    return url, source


def expected_selection(url: str, query: str) -> np.ndarray:
    """The positions `query` selects, from the parent's table as the fixture reads it."""
    return trace_frame(storage.open_dataset(StoreLocation(url))).query(query).index.to_numpy()


def shard_chunks(array_folder: Path) -> list[bytes]:
    """The encoded chunks of every window, in trace order, read from the shard files' own
    indexes (index at the end; missing chunks skipped)."""
    chunks = []
    shards = sorted((array_folder / "c").iterdir(), key=lambda p: int(p.name))
    for shard in shards:
        data = (shard / "0" / "0").read_bytes()
        index = np.frombuffer(data[-INDEX_BYTES:-4], "<u8").reshape(SHARD_TRACES, 2)
        chunks += [data[o : o + n] for o, n in index.tolist() if o != 2**64 - 1]
    return chunks


@pytest.fixture
def seisctf(dask_cluster):
    """`seisctf ARGV --quiet` on the test cluster: its exit code."""
    return lambda *argv: main([*argv, "--quiet", "--scheduler", dask_cluster.address])


def assert_subset_of(subset_url: str, parent_url: str, source, selected, options=None) -> None:
    """The subset holds the parent's selected windows bit for bit and its metadata rows."""
    subset = ew.open_event_windows(subset_url, options)
    parent = ew.open_event_windows(parent_url, options)
    assert subset.sizes[cv.TRACE] == len(selected)
    windows = subset[cv.EVENT_WINDOWS_VAR].values
    assert windows.tobytes() == source[cv.EVENT_WINDOWS_VAR].values[selected].tobytes()
    assert (subset[PARENT_TRACE_INDEX].values == selected).all()
    for name, variable in parent.variables.items():
        if cv.TRACE not in variable.dims or name == cv.EVENT_WINDOWS_VAR:
            continue
        kept = subset[name]
        assert kept.dtype == variable.dtype, name
        assert (name in subset.coords) == (name in parent.coords), name
        if variable.dtype.kind in "fcmM":  # NaN and NaT equal themselves here
            np.testing.assert_array_equal(kept.values, variable.values[selected], err_msg=name)
        else:
            assert kept.values.tolist() == variable.values[selected].tolist(), name
    assert set(subset.attrs) >= set(parent.attrs) - {cv.ATTR_SPLIT_AUDIT}
    catalog = ew.read_catalog(StoreLocation(subset_url, options))
    parent_catalog = (
        ew.read_catalog(StoreLocation(parent_url, options)).iloc[selected].reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(catalog.drop(columns=[PARENT_TRACE_INDEX]), parent_catalog)
    # engine="seisctf" gives the same Dataset
    xr.testing.assert_identical(
        xr.open_dataset(subset_url, engine="seisctf", storage_options=options), subset
    )


def test_subset_copies_exactly_the_selected_windows(parent, tmp_path, seisctf):
    url, source = parent
    selected = expected_selection(url, QUERY)
    parent_shards = set(selected // SHARD_TRACES)
    n_parent_shards = -(-source.sizes[cv.TRACE] // SHARD_TRACES)
    assert 0 < len(parent_shards) < n_parent_shards  # the query leaves shards out
    # A copy of the parent without the shards that hold no selected window: reading one of
    # them would give NaN (the fill value), not the windows.
    hollow = tmp_path / "hollow.zarr"
    shutil.copytree(url, hollow)
    for shard in range(n_parent_shards):
        if shard not in parent_shards:
            shutil.rmtree(hollow / cv.EVENT_WINDOWS_VAR / "c" / str(shard))
    out = tmp_path / "subset.zarr"
    assert seisctf("subset", str(hollow), "--query", QUERY, "--out", str(out)) == 0
    assert_subset_of(str(out), url, source, selected)

    # Written: ceil(n / shard) shards of exactly the selected windows' encoded chunks.
    folder = out / cv.EVENT_WINDOWS_VAR
    written = [p for p in (folder / "c").rglob("*") if p.is_file()]
    assert len(written) == -(-len(selected) // SHARD_TRACES)
    parent_chunks = shard_chunks(Path(url) / cv.EVENT_WINDOWS_VAR)
    assert shard_chunks(folder) == [parent_chunks[i] for i in selected]  # byte for byte
    assert sum(p.stat().st_size for p in written) == (
        sum(len(parent_chunks[i]) for i in selected) + len(written) * INDEX_BYTES
    )

    attrs = storage.read_attrs(StoreLocation(out))
    catalog_sha = hashlib.sha256((Path(url) / "catalog.parquet").read_bytes()).hexdigest()
    assert attrs["subset"]["parent"] == str(hollow)
    assert attrs["subset"]["query"] == QUERY
    assert attrs["subset"]["traces"] == len(selected)
    assert attrs["subset"]["parent_traces"] == source.sizes[cv.TRACE]
    assert attrs["subset"]["parent_catalog_sha256"] == catalog_sha
    assert attrs["layout"]["shard_traces"] == SHARD_TRACES
    assert cv.ATTR_SPLIT_AUDIT not in attrs and attrs[cv.ATTR_SPLIT]["strategy"] == "event"

    # It exports to SeisBench: the selected windows, the parent's split.
    directory = tmp_path / "seisbench"
    assert seisctf("export", "seisbench", str(out), str(directory)) == 0
    dataset = sbd.WaveformDataset(directory, component_order="ZNE", cache=None)
    frame = (
        trace_frame(storage.open_dataset(StoreLocation(url))).iloc[selected].reset_index(drop=True)
    )
    assert dataset.metadata["trace_name_original"].tolist() == frame[cv.TRACE_NAME].tolist()
    for i, index in enumerate(selected):
        npts = int(frame[cv.TRACE_NPTS][i])
        waveform = dataset.get_waveforms(i)
        np.testing.assert_array_equal(
            waveform, source[cv.EVENT_WINDOWS_VAR].values[index, :, :npts]
        )
    assert len(dataset.test()) == int((frame[cv.SPLIT_VAR] == "test").sum())

    # A subset of the subset names the subset as its parent.
    nested = tmp_path / "nested.zarr"
    assert seisctf("subset", str(out), "--query", 'split == "test"', "--out", str(nested)) == 0
    again = selected[(frame[cv.SPLIT_VAR] == "test").to_numpy()]
    assert ew.open_event_windows(str(nested))[cv.EVENT_WINDOWS_VAR].values.tobytes() == (
        source[cv.EVENT_WINDOWS_VAR].values[again].tobytes()
    )
    assert storage.read_attrs(StoreLocation(nested))["subset"]["parent"] == str(out)


def test_bad_input_writes_nothing(parent, tmp_path, seisctf, capsys):
    url, _ = parent
    out = tmp_path / "out.zarr"
    cases = {
        "source_magnitude >": ["cannot be evaluated", "source_magnitude >"],
        "no_such_column > 1": ["cannot be evaluated", "no_such_column"],
        "source_magnitude > 100": ["selects none of the"],
        "source_magnitude > @limit": ["@"],
    }
    for query, fragments in cases.items():
        assert seisctf("subset", url, "--query", query, "--out", str(out)) == 3
        err = capsys.readouterr().err
        assert all(fragment in err for fragment in fragments), (query, err)
        assert not out.exists()
    for target in (url, f"{url}/inner.zarr"):  # the parent itself, or a place inside it
        assert seisctf("subset", url, "--query", QUERY, "--out", target) == 3
        assert "parent store" in capsys.readouterr().err
    assert not Path(f"{url}/inner.zarr").exists()
    missing = str(tmp_path / "missing.zarr")
    assert seisctf("subset", missing, "--query", QUERY, "--out", str(out)) == 3
    assert missing in capsys.readouterr().err
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert seisctf("subset", url, "--query", QUERY, "--out", str(out)) == 3
    assert "--overwrite" in capsys.readouterr().err and (out / "keep.txt").exists()
    assert seisctf("subset", url, "--query", QUERY, "--out", str(out), "--overwrite") == 0
    assert storage.read_attrs(StoreLocation(out))["subset"]["traces"] == len(
        expected_selection(url, QUERY)
    )


def test_subset_on_s3(parent, s3_server, s3_bucket, seisctf):
    local_url, source = parent
    options = s3_server.storage_options
    url = f"{s3_bucket}/parent.zarr"
    fs = s3_server.filesystem()
    fs.put(local_url, url, recursive=True)
    out = f"{s3_bucket}/subsets/northern.zarr"
    argv = ["subset", url, "--query", QUERY, "--out", out, *s3_server.cli_options()]
    assert seisctf(*argv) == 0
    selected = expected_selection(local_url, QUERY)
    assert_subset_of(out, url, source, selected, options)
    shards = [p for p in fs.find(f"{out}/{cv.EVENT_WINDOWS_VAR}/c")]
    assert len(shards) == -(-len(selected) // SHARD_TRACES)
    assert storage.read_attrs(StoreLocation(out, options))["subset"]["parent"] == url
    # The Python API given locations holding the options: the same subset.
    again = f"{s3_bucket}/subsets/again.zarr"
    parent_store, out_store = (StoreLocation.from_url(u, options) for u in (url, again))
    subset_event_windows(parent_store, QUERY, out_store, quiet=True)
    assert_subset_of(again, url, source, selected, options)


def test_parent_without_shards_and_several_windows_per_chunk(tmp_path):
    """A parent of chunks of 4 windows and no shards: the subset has one window per chunk
    (one file each), the same values."""

    url, out = str(tmp_path / "parent.zarr"), str(tmp_path / "noise.zarr")
    source = write_event_windows(url, shard_traces=None, chunk_traces=4, n_events=30)
    subset_event_windows(url, 'trace_category == "noise"', out, quiet=True)
    selected = np.flatnonzero(source[cv.TRACE_CATEGORY].values == "noise")
    subset = ew.open_event_windows(out)
    assert subset[cv.EVENT_WINDOWS_VAR].values.tobytes() == (
        source[cv.EVENT_WINDOWS_VAR].values[selected].tobytes()
    )
    assert storage.read_attrs(StoreLocation(out))["layout"]["shard_traces"] is None
    chunk_files = list((Path(out) / cv.EVENT_WINDOWS_VAR / "c").iterdir())
    assert len(chunk_files) == len(selected)


def test_a_failed_copy_is_never_marked_complete(tmp_path):
    """A parent shard that fails its checksum mid-copy: the error stands, and the output is
    refused as incomplete by every reader."""
    from seisctf.errors import InvalidInput

    url, out = str(tmp_path / "parent.zarr"), str(tmp_path / "subset.zarr")
    write_event_windows(url, shard_traces=SHARD_TRACES, n_events=30)
    shard = Path(url) / cv.EVENT_WINDOWS_VAR / "c" / "1" / "0" / "0"
    damaged = bytearray(shard.read_bytes())
    damaged[-100:-4] = b"\x07" * 96  # the shard index, under its crc32c
    shard.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="checksum"):
        subset_event_windows(url, "trace_npts > 0", out, quiet=True)
    assert Path(out).exists()  # written in part, never marked complete
    for opener in (ew.open_event_windows, lambda u: xr.open_dataset(u, engine="seisctf")):
        with pytest.raises(InvalidInput, match="incomplete"):
            opener(out)
