"""Event-window stores from SeisBench-format datasets (written by SeisBench's own
WaveformDataWriter) and from STEAD's original layout (written with h5py): value-exact round
trips, metadata names and dtypes, the Parquet catalogue, identical bytes for 1 and 2 workers and
any task partition, and bad input (exit 3, nothing marked complete)."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from event_window_fixtures import event_window_dataset
from scipy.signal import resample_poly

from seisctf import conventions as cv
from seisctf.catalogs import event_windows as ew
from seisctf.cli import main
from seisctf.cluster import SCHEDULER_ENV, dask_client
from seisctf.location import StoreLocation

logging.getLogger("seisbench").setLevel(logging.ERROR)

N_TRACES = 36


def seisbench_traces(seed: int, n: int = N_TRACES):
    """(metadata, waveform (C, W) float32) pairs: 100 Hz and 50 Hz traces of mixed lengths,
    earthquakes and noise, some in ENZ order, every kind of column."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        slow = i % 3 == 0
        quake = i % 4 != 0
        order = "ENZ" if i % 5 == 2 else "ZNE"
        meta = {
            "trace_name": f"XX.S{i % 6}_{i:03d}",
            "trace_sampling_rate_hz": 50.0 if slow else 100.0,
            "trace_component_order": order,
            "station_network_code": "XX",
            "station_code": f"S{i % 6}",
            "station_location_code": "" if i % 2 else "00",
            "station_latitude_deg": 40.0 + 0.1 * (i % 6),
            "trace_category": "earthquake_local" if quake else "noise",
            "trace_p_arrival_sample": int(rng.integers(20, 60)) if quake else np.nan,
            "trace_s_arrival_sample": int(rng.integers(70, 110)) if quake else np.nan,
            "trace_coda_end_sample": int(rng.integers(150, 190)),
            "trace_has_spikes": bool(i % 7 == 0),
            "source_id": f"ev{i // 2:03d}" if quake else None,
            "source_origin_time": f"2020-01-01T00:{i // 60:02d}:{i % 60:02d}.250000Z"
            if quake
            else None,
            "source_magnitude": float(rng.uniform(1, 3)) if quake else np.nan,
            "split": ("train", "dev", "test")[i % 3],
        }
        n_samples = int(rng.integers(100, 140)) if slow else int(rng.integers(220, 300))
        yield meta, (rng.normal(size=(3, n_samples)) * 100).astype(np.float32)


def write_seisbench(folder: Path, seed: int = 0, bucket_size: int = 5, chunk: str = "") -> Path:
    import seisbench.data as sbd

    with sbd.WaveformDataWriter(
        folder / f"metadata{chunk}.csv", folder / f"waveforms{chunk}.hdf5"
    ) as writer:
        writer.data_format = {"dimension_order": "CW", "component_order": "ZNE", "unit": "counts"}
        writer.bucket_size = bucket_size
        for meta, waveform in seisbench_traces(seed):
            writer.add_trace(meta, waveform)
    return folder


def open_seisbench(folder: Path, **options):
    import seisbench.data as sbd

    return sbd.WaveformDataset(folder, component_order="ZNE", dimension_order="NCW", **options)


@pytest.fixture(scope="module")
def seisbench_dir(tmp_path_factory) -> Path:
    return write_seisbench(tmp_path_factory.mktemp("seisbench"))


@pytest.fixture(scope="module")
def seisbench_store(seisbench_dir, tmp_path_factory) -> str:
    from seisctf.formats.seisbench.ingest import ingest_seisbench

    url = str(tmp_path_factory.mktemp("stores") / "sb.zarr")
    ingest_seisbench(str(seisbench_dir), StoreLocation(url), quiet=True)
    return url


def expected_window(dataset, i: int) -> np.ndarray:
    """SeisBench's own trace at the store's 100 Hz: get_waveforms, resampled with scipy's
    resample_poly where the trace is at 50 Hz, as float32."""
    waveform = dataset.get_waveforms(i)
    if dataset.metadata["trace_sampling_rate_hz"].iloc[i] == 50.0:
        waveform = resample_poly(waveform.astype(np.float64), 2, 1, axis=-1)
    return waveform.astype(np.float32)


def test_seisbench_round_trip_is_value_exact(seisbench_dir, seisbench_store):
    dataset = open_seisbench(seisbench_dir)
    store = xr.open_zarr(seisbench_store, chunks=None)
    assert store.attrs[cv.ATTR_SAMPLING_RATE] == 100.0
    assert store[cv.CHANNEL].values.tolist() == ["Z", "N", "E"]
    waveforms = store[cv.EVENT_WINDOWS_VAR].values
    assert waveforms.dtype == np.float32 and waveforms.shape[0] == N_TRACES
    npts = store[cv.TRACE_NPTS].values
    native = 0
    for i in range(N_TRACES):
        expected = expected_window(dataset, i)
        assert npts[i] == expected.shape[-1]
        np.testing.assert_array_equal(waveforms[i, :, : npts[i]], expected)
        assert np.isnan(waveforms[i, :, npts[i] :]).all()
        native += dataset.metadata["trace_sampling_rate_hz"].iloc[i] == 100.0
    assert native == 24 and waveforms.shape[2] == npts.max()
    # the longest 100 Hz trace sets the window; block padding (bucket width) never shows
    assert store.attrs["resampling"]["resampled_traces"] == N_TRACES - native


def test_training_read_path_gives_the_same_batches(seisbench_store):
    """`open_event_windows` (TensorStore) returns what xarray on zarr-python returns, for random
    batches with repeats, single windows and sample slices."""
    fast = ew.open_event_windows(seisbench_store)
    plain = xr.open_zarr(seisbench_store, chunks=None)
    assert type(fast[cv.EVENT_WINDOWS_VAR].variable._data).__name__ == "LazilyIndexedArray"
    rng = np.random.default_rng(3)
    for selection in (
        {cv.TRACE: rng.choice(N_TRACES, 16, replace=False)},
        {cv.TRACE: np.array([5, 1, 5, 30])},
        {cv.TRACE: 7, cv.SAMPLE: slice(10, 50)},
        {cv.TRACE: slice(3, 20, 4), cv.CHANNEL: [2, 0]},
    ):
        got = fast[cv.EVENT_WINDOWS_VAR].isel(selection)
        expected = plain[cv.EVENT_WINDOWS_VAR].isel(selection)
        np.testing.assert_array_equal(got.values, expected.values)
        assert got[cv.TRACE_NAME].values.tolist() == expected[cv.TRACE_NAME].values.tolist()


def test_seisbench_metadata_keeps_names_dtypes_and_values(seisbench_dir, seisbench_store):
    metadata = open_seisbench(seisbench_dir).metadata
    csv_columns = pd.read_csv(seisbench_dir / "metadata.csv", nrows=0).columns
    store = xr.open_zarr(seisbench_store, chunks=None)
    factor = 100.0 / metadata["trace_sampling_rate_hz"].to_numpy()
    assert store.attrs["trace_name_unique"] is True
    for name in csv_columns:
        assert name in store.variables, name
        values = store[name].values
        source = metadata[name]
        if name.endswith("_sample"):  # rescaled to the store's rate
            np.testing.assert_array_equal(values, source.to_numpy(float) * factor)
        elif name == "trace_sampling_rate_hz":
            assert (values == 100.0).all()
        elif name == "trace_component_order":  # the waveforms were reordered to the store's
            assert set(values.tolist()) == {"ZNE"} and set(source) == {"ZNE", "ENZ"}
        elif name == "source_origin_time":
            assert values.dtype.kind == "M"
            expected = source.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[ns]")
            np.testing.assert_array_equal(values.astype("datetime64[ns]"), expected)
        elif source.dtype.kind in "biuf":
            assert values.dtype == source.dtype, name
            np.testing.assert_array_equal(values, source.to_numpy())
        else:  # text: missing is ""
            assert values.dtype.kind in "OTU", name
            assert [str(v) for v in values] == ["" if pd.isna(v) else str(v) for v in source]
    assert store[cv.SPLIT_VAR].dims == (cv.TRACE,) and cv.SPLIT_VAR in store.data_vars
    names = store[cv.TRACE_NAME].values.tolist()
    assert names == metadata["trace_name"].tolist()
    # blocked traces are named by their block slice; a bucket of one trace keeps its own name
    blocked = [re.fullmatch(r"bucket\d+\$\d+,:3,:(\d+)", name) for name in names]
    assert sum(m is not None for m in blocked) >= N_TRACES - 4
    assert any("$" not in name for name in names)
    for i, match in enumerate(blocked):  # each slice is the trace's own (source-rate) length
        if match:
            assert int(match[1]) == open_seisbench(seisbench_dir).get_waveforms(i).shape[-1]
    np.testing.assert_array_equal(
        store["trace_source_sampling_rate_hz"].values, metadata["trace_sampling_rate_hz"]
    )


def test_catalogue_equals_the_store_coordinates(seisbench_store):
    catalog = ew.read_catalog(StoreLocation(seisbench_store))
    store = xr.open_zarr(seisbench_store, chunks=None)
    assert Path(seisbench_store).joinpath("catalog.parquet").is_file()  # inside the store
    assert store.attrs["catalog"] == "catalog.parquet"
    per_trace = [n for n, v in store.variables.items() if v.dims == (cv.TRACE,)]
    assert sorted(catalog.columns) == sorted(per_trace)
    for name in per_trace:
        values = store[name].values
        if values.dtype.kind in "OTU":
            assert catalog[name].tolist() == [str(v) for v in values], name
        elif values.dtype.kind == "M":
            np.testing.assert_array_equal(
                catalog[name].to_numpy("datetime64[ns]"), values.astype("datetime64[ns]")
            )
        else:
            assert catalog[name].dtype == values.dtype, name
            np.testing.assert_array_equal(catalog[name].to_numpy(), values)


@pytest.fixture(scope="module")
def clusters(dask_cluster_one_worker, dask_cluster):
    """Real schedulers with 1 and 2 worker processes (as `--scheduler ADDR` gives; the
    session's): addresses."""
    return {1: dask_cluster_one_worker.address, 2: dask_cluster.address}


def tree_bytes(*roots: str) -> dict[str, str]:
    """sha256 of every file under the roots, by relative path."""
    digests = {}
    for root in roots:
        base = Path(root)
        for file in sorted(p for p in base.rglob("*") if p.is_file()):
            digests[f"{base.name}/{file.relative_to(base)}"] = hashlib.sha256(
                file.read_bytes()
            ).hexdigest()
    return digests


def test_identical_bytes_for_one_and_two_workers_and_any_task_partition(
    seisbench_dir, tmp_path, clusters
):
    from seisctf.formats.seisbench.ingest import ingest_seisbench

    layout = ew.WindowLayout(chunk_traces=1, shard_traces=4, compress=True)
    runs = []
    for run, (workers, per_task) in enumerate([(1, 4), (2, 8), (2, 36)]):
        url = str(tmp_path / f"run{run}" / "sb.zarr")
        with dask_client(clusters[workers], quiet=True):
            ingest_seisbench(
                str(seisbench_dir),
                StoreLocation(url),
                layout=layout,
                traces_per_task=per_task,
                quiet=True,
            )
        runs.append(tree_bytes(url))
    assert len(runs[0]) > 10  # chunk files, shards, metadata, the catalogue
    assert "sb.zarr/catalog.parquet" in runs[0]
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("shard_traces", [4, None])
def test_local_waveforms_are_the_bytes_zarr_python_writes(tmp_path, shard_traces):
    """Local stores' waveforms are written through TensorStore (event_windows.window_writes);
    zarr-python, given the same values, codecs and layout, writes the same files: NaN-padded
    windows, and a window of NaN only (its chunk left out, as zarr-python leaves it)."""
    import zarr

    dataset = event_window_dataset(n_events=12, per_event=3, noise_per_station=0)
    values = dataset[cv.EVENT_WINDOWS_VAR].values.copy()
    values[5] = np.nan
    dataset[cv.EVENT_WINDOWS_VAR] = (cv.EVENT_WINDOWS_DIMS, values)
    url = str(tmp_path / "ts.zarr")
    layout = ew.WindowLayout(chunk_traces=1, shard_traces=shard_traces, compress=True)
    ew.write_event_windows(dataset, StoreLocation(url), layout=layout, quiet=True)
    written = zarr_array(url)
    reference = zarr.create_array(
        str(tmp_path / "zarr-python.zarr"),
        shape=written.shape,
        chunks=written.chunks,
        shards=written.shards,
        dtype=written.dtype,
        compressors=written.compressors,
        fill_value=np.nan,
    )
    reference[:] = values
    ours = {
        k.split("/waveforms/")[1]: v for k, v in tree_bytes(url).items() if "/waveforms/c/" in k
    }
    theirs = {
        k.split("/", 1)[1]: v
        for k, v in tree_bytes(str(tmp_path / "zarr-python.zarr")).items()
        if "/c/" in k
    }
    assert len(ours) > 1 and ours == theirs
    assert np.array_equal(xr.open_zarr(url, chunks=None)[cv.EVENT_WINDOWS_VAR], values, True)


def test_other_layouts_and_source_buckets_give_the_same_values(
    seisbench_dir, seisbench_store, tmp_path
):
    from seisctf.formats.seisbench.ingest import ingest_seisbench

    reference = xr.open_zarr(seisbench_store, chunks=None)
    rebucketed = write_seisbench(tmp_path / "rebucketed", bucket_size=11)
    for folder, options in [
        (seisbench_dir, {"shard_traces": 0, "compress": False}),
        (rebucketed, {}),
    ]:
        url = str(tmp_path / f"{folder.name}-{len(options)}.zarr")
        ingest_seisbench(str(folder), StoreLocation(url), quiet=True, **options)
        other = xr.open_zarr(url, chunks=None)
        np.testing.assert_array_equal(
            other[cv.EVENT_WINDOWS_VAR].values, reference[cv.EVENT_WINDOWS_VAR].values
        )
        assert other.attrs["layout"]["compress"] is options.get("compress", True)
    no_shards = zarr_array(str(tmp_path / f"{seisbench_dir.name}-2.zarr"))
    assert no_shards.shards is None and no_shards.chunks == (1, 3, reference.sizes[cv.SAMPLE])


def zarr_array(url: str):
    import zarr

    return zarr.open_group(url, mode="r")[cv.EVENT_WINDOWS_VAR]


def test_chunked_seisbench_dataset(tmp_path):
    from seisctf.formats.seisbench.ingest import ingest_seisbench

    folder = tmp_path / "chunked"
    write_seisbench(folder, seed=1, chunk="_a")
    write_seisbench(folder, seed=1, chunk="_b")  # the same names: they repeat across chunks
    (folder / "chunks").write_text("_a\n_b\n")
    url = str(tmp_path / "chunked.zarr")
    ingest_seisbench(str(folder), StoreLocation(url), quiet=True)
    dataset = open_seisbench(folder)
    store = xr.open_zarr(url, chunks=None)
    assert store.sizes[cv.TRACE] == 2 * N_TRACES
    assert store["trace_chunk"].values.tolist() == dataset.metadata["trace_chunk"].tolist()
    assert store.attrs["trace_name_unique"] is False  # bucket names repeat across chunks
    assert store.attrs["seisbench_chunks"] == ["_a", "_b"]
    for i in (0, 3, N_TRACES, 2 * N_TRACES - 1):
        n = int(store[cv.TRACE_NPTS][i])
        np.testing.assert_array_equal(
            store[cv.EVENT_WINDOWS_VAR].values[i, :, :n], expected_window(dataset, i)
        )


# --- STEAD ---------------------------------------------------------------------------------------

STEAD_ROWS = 10


def write_stead(folder: Path, n: int = STEAD_ROWS) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """STEAD's layout: data/<trace_name> (samples, E N Z) float32 with attrs, plus the CSV."""
    rng = np.random.default_rng(5)
    folder.mkdir(parents=True, exist_ok=True)
    rows, raw = [], {}
    for i in range(n):
        quake = i % 3 != 0
        name = f"ST{i:02d}.TA_2006110316{i:04d}_{'EV' if quake else 'NO'}"
        rows.append(
            {
                "network_code": "TA",
                "receiver_code": f"ST{i:02d}",
                "receiver_type": "HH",
                "receiver_latitude": 35.0 + i,
                "receiver_longitude": -120.0,
                "p_arrival_sample": float(rng.integers(500, 900)) if quake else np.nan,
                "p_status": "manual" if quake else None,
                "s_arrival_sample": float(rng.integers(1000, 1500)) if quake else np.nan,
                "coda_end_sample": f"[[{rng.integers(2000, 3000)}.]]" if quake else None,
                "source_id": str(1000 + i) if quake else None,
                "source_latitude": 36.0 + i if quake else np.nan,
                "source_magnitude": 2.5 if quake else np.nan,
                "source_distance_km": 12.5 if quake else np.nan,
                "trace_start_time": f"2006-11-03 16:12:{i:02d}",
                "trace_category": "earthquake_local" if quake else "noise",
                "trace_name": name,
            }
        )
        raw[name] = (rng.normal(size=(6000 if i != 4 else 5000, 3)) * 50).astype(np.float32)
    frame = pd.DataFrame(rows)
    hdf5, csv = folder / "merged.hdf5", folder / "merged.csv"
    with h5py.File(hdf5, "w") as file:
        data = file.create_group("data")
        for row in rows:
            dataset = data.create_dataset(row["trace_name"], data=raw[row["trace_name"]])
            for key, value in row.items():
                dataset.attrs[key] = "" if value is None else value
    frame.to_csv(csv, index=False)
    return hdf5, csv, raw


@pytest.fixture(scope="module")
def stead_files(tmp_path_factory):
    return write_stead(tmp_path_factory.mktemp("stead"))


def test_stead_round_trip_and_column_names(stead_files, tmp_path):
    from seisctf.formats.stead.ingest import ingest_stead

    hdf5, csv, raw = stead_files
    url = str(tmp_path / "stead.zarr")
    report = ingest_stead(str(hdf5), str(csv), StoreLocation(url), quiet=True)
    assert (report.n_traces, report.n_samples) == (STEAD_ROWS, 6000)
    store = xr.open_zarr(url, chunks=None)
    assert store.attrs[cv.ATTR_SAMPLING_RATE] == 100.0
    assert store[cv.CHANNEL].values.tolist() == ["Z", "N", "E"]
    source = pd.read_csv(csv)
    names = store[cv.TRACE_NAME].values.tolist()
    assert names == source["trace_name"].tolist()
    for i, name in enumerate(names):
        n = raw[name].shape[0]
        assert int(store[cv.TRACE_NPTS][i]) == n
        np.testing.assert_array_equal(
            store[cv.EVENT_WINDOWS_VAR].values[i, :, :n], raw[name].T[::-1]
        )
        assert np.isnan(store[cv.EVENT_WINDOWS_VAR].values[i, :, n:]).all()
    renamed = {
        "network_code": cv.NETWORK_CODE,
        "receiver_code": cv.STATION_CODE,
        "receiver_latitude": cv.STATION_LATITUDE,
        "p_arrival_sample": cv.P_ARRIVAL_SAMPLE,
        "s_arrival_sample": cv.S_ARRIVAL_SAMPLE,
        "source_latitude": cv.SOURCE_LATITUDE,
        "p_status": "trace_p_status",
        "coda_end_sample": "trace_coda_end_sample",
        "receiver_type": "trace_channel",
        "source_distance_km": "source_distance_km",  # not named by SeisBench: kept
    }
    for stead_name, name in renamed.items():
        values, expected = store[name].values, source[stead_name]
        if expected.dtype.kind == "f":
            assert values.dtype == np.float64
            np.testing.assert_array_equal(values, expected.to_numpy())
        else:
            assert [str(v) for v in values] == ["" if pd.isna(v) else str(v) for v in expected]
    assert store[cv.SOURCE_ID].values.tolist()[:2] == ["", "1001"]  # identifiers stay text
    catalog = ew.read_catalog(StoreLocation(url))
    assert catalog[cv.TRACE_NAME].tolist() == names


# --- bad input -----------------------------------------------------------------------------------


def assert_refused(argv: list[str], out: str, capsys, *needles: str) -> None:
    assert main([*argv, "--out", out, "--quiet"]) == 3
    message = capsys.readouterr().err
    assert message.startswith("seisctf: invalid input:") and "Traceback" not in message
    for needle in needles:
        assert needle in message, message
    assert not (Path(out) / "zarr.json").exists() or not xr.open_zarr(out).attrs.get(
        cv.ATTR_COMPLETE
    )


def test_cli_ingests_stead_and_refuses_bad_input(
    stead_files, seisbench_dir, tmp_path, capsys, monkeypatch, clusters
):
    monkeypatch.setenv(SCHEDULER_ENV, clusters[2])
    hdf5, csv, _ = stead_files
    out = str(tmp_path / "ok.zarr")
    assert main(["ingest", "stead", str(hdf5), str(csv), "--out", out, "--quiet"]) == 0
    assert f"wrote {out}: {STEAD_ROWS} windows" in capsys.readouterr().out
    assert xr.open_zarr(out).attrs[cv.ATTR_COMPLETE] is True

    bad = tmp_path / "bad"
    bad.mkdir()
    no_name = bad / "no_name.csv"
    pd.read_csv(csv).drop(columns="trace_name").to_csv(no_name, index=False)
    assert_refused(
        ["ingest", "stead", str(hdf5), str(no_name)], str(bad / "a.zarr"), capsys,
        str(no_name), "trace_name",
    )  # fmt: skip
    not_hdf5 = bad / "merged.hdf5"
    not_hdf5.write_text("not hdf5")
    assert_refused(
        ["ingest", "stead", str(not_hdf5), str(csv)], str(bad / "b.zarr"), capsys,
        str(not_hdf5), "not an HDF5 file",
    )  # fmt: skip
    unknown = bad / "unknown.csv"
    frame = pd.read_csv(csv)
    frame.loc[3, "trace_name"] = "NOPE.XX_1_EV"
    frame.to_csv(unknown, index=False)
    assert_refused(
        ["ingest", "stead", str(hdf5), str(unknown)], str(bad / "c.zarr"), capsys,
        "trace 'NOPE.XX_1_EV'", "not found",
    )  # fmt: skip

    # SeisBench: a waveform file that is not HDF5, a metadata row naming an unknown block
    broken = bad / "seisbench"
    broken.mkdir()
    (broken / "metadata.csv").write_bytes((seisbench_dir / "metadata.csv").read_bytes())
    (broken / "waveforms.hdf5").write_text("not hdf5")
    assert_refused(
        ["ingest", "seisbench", str(broken)], str(bad / "d.zarr"), capsys,
        "waveforms.hdf5", "not an HDF5 file",
    )  # fmt: skip
    (broken / "waveforms.hdf5").write_bytes((seisbench_dir / "waveforms.hdf5").read_bytes())
    metadata = pd.read_csv(seisbench_dir / "metadata.csv")
    metadata.loc[2, "trace_name"] = "bucket99$0,:3,:250"
    metadata.to_csv(broken / "metadata.csv", index=False)
    assert_refused(
        ["ingest", "seisbench", str(broken)], str(bad / "e.zarr"), capsys,
        "trace 'bucket99$0,:3,:250'", "not found",
    )  # fmt: skip
    assert_refused(
        ["ingest", "seisbench", str(bad / "missing")], str(bad / "f.zarr"), capsys, "missing"
    )


def test_stead_store_and_catalogue_on_object_storage(stead_files, s3_server, s3_bucket):
    from seisctf import storage
    from seisctf.formats.stead.ingest import ingest_stead

    hdf5, csv, raw = stead_files
    url = f"{s3_bucket}/windows/stead.zarr"
    options = s3_server.storage_options
    ingest_stead(str(hdf5), str(csv), StoreLocation(url, options), quiet=True)
    store = storage.open_dataset(StoreLocation(url, options))
    assert store.attrs[cv.ATTR_COMPLETE] is True
    name = store[cv.TRACE_NAME].values.tolist()[4]
    np.testing.assert_array_equal(
        store[cv.EVENT_WINDOWS_VAR][4, :, :5000].values, raw[name].T[::-1]
    )
    assert ew.find_catalog(StoreLocation(url, options)).url == f"{url}/catalog.parquet"
    assert s3_server.filesystem().exists(f"{url}/catalog.parquet")
    catalog = ew.read_catalog(StoreLocation(url, options))
    assert catalog[cv.TRACE_NAME].tolist() == store[cv.TRACE_NAME].values.tolist()
    # a remote store opens for training too (zarr-python: the same values)
    batch = ew.open_event_windows(url, options)[cv.EVENT_WINDOWS_VAR].isel(trace=[4, 0]).values
    np.testing.assert_array_equal(batch, store[cv.EVENT_WINDOWS_VAR].isel(trace=[4, 0]).values)
