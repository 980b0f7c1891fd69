"""`seisctf export seisbench`: an export read back with `seisbench.data.WaveformDataset` gives
the store's waveforms, metadata and train()/dev()/test() membership; `--metadata-only` puts the
store's split into an existing SeisBench dataset."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import seisbench.data as sbd
from event_window_fixtures import trace_frame, write_event_windows

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.pipeline.splits import SplitOptions, split_store


@pytest.fixture(scope="module")
def split_store_url(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("export") / "windows.zarr")
    write_event_windows(url, shard_traces=50)
    split_store(StoreLocation(url), SplitOptions("source-clusters", seed=7), quiet=True)
    return url


def same(a: pd.Series, b: pd.Series) -> bool:
    """Equal column values, NaN and empty text alike (CSV cannot tell them apart); SeisBench
    parses `*_time` columns as times."""
    if pd.api.types.is_datetime64_any_dtype(a):
        times = pd.to_datetime(b.replace("", None), utc=True, format="ISO8601")
        return bool(((a == times) | (a.isna() & times.isna())).all())
    if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
        return np.allclose(a.to_numpy(float), b.to_numpy(float), equal_nan=True, rtol=0, atol=0)
    left = a.astype(object).where(a.notna(), "").astype(str)
    right = b.astype(object).where(b.notna(), "").astype(str)
    return (left == right).all()


def test_export_reads_back_with_seisbench(split_store_url, tmp_path, dask_cluster):
    directory = tmp_path / "dataset"
    assert (
        main(
            [
                "export",
                "seisbench",
                split_store_url,
                str(directory),
                "--quiet",
                "--scheduler",
                dask_cluster.address,
            ]
        )
        == 0
    )
    assert not (directory / ".seisctf-export").exists()
    store = storage.open_dataset(StoreLocation(split_store_url))
    frame = trace_frame(store)
    windows = store[cv.EVENT_WINDOWS_VAR].values
    dataset = sbd.WaveformDataset(directory, component_order="ZNE", cache=None)
    assert len(dataset) == len(frame)
    metadata = dataset.metadata
    # Rows in store order; the writer's block names replace trace_name, the store's is kept.
    original = metadata["trace_name_original"].where(
        metadata["trace_name_original"].notna(), metadata["trace_name"]
    )
    assert (original.to_numpy() == frame[cv.TRACE_NAME].to_numpy()).all()
    for column in frame.columns:
        if column == cv.TRACE_NAME:
            continue
        assert column in metadata, column
        assert same(metadata[column].reset_index(drop=True), frame[column]), column
    for i in range(len(frame)):
        npts = int(frame[cv.TRACE_NPTS][i])
        waveform = dataset.get_waveforms(i)
        assert waveform.shape == (3, npts)
        np.testing.assert_array_equal(waveform, windows[i, :, :npts])
        assert np.isfinite(waveform).all()
    assert float(dataset.data_format["sampling_rate"]) == store.attrs[cv.ATTR_SAMPLING_RATE]
    assert dataset.data_format["component_order"] == "ZNE"
    for name, part in (
        ("train", dataset.train()),
        ("dev", dataset.dev()),
        ("test", dataset.test()),
    ):
        names = part.metadata["trace_name_original"].fillna(part.metadata["trace_name"])
        assert set(names) == set(frame.loc[frame[cv.SPLIT_VAR] == name, cv.TRACE_NAME]), name
        assert len(part) == int((frame[cv.SPLIT_VAR] == name).sum())


def seisbench_dataset_with_store_names(store_url: str, directory) -> pd.DataFrame:
    """A SeisBench dataset (seisbench's writer, one HDF5 dataset per trace so the trace names
    are the store's), with an old split of its own; returns its metadata."""
    store = storage.open_dataset(StoreLocation(store_url))
    frame = trace_frame(store)
    windows = store[cv.EVENT_WINDOWS_VAR].values
    with sbd.WaveformDataWriter(directory / "metadata.csv", directory / "waveforms.hdf5") as writer:
        writer.bucket_size = 1  # (bucketer = None fails in seisbench 0.12)
        writer.data_format = {
            "dimension_order": "CW",
            "component_order": "ZNE",
            "sampling_rate": 100.0,
        }
        for i, name in enumerate(frame[cv.TRACE_NAME]):
            writer.add_trace(
                {"trace_name": name, "split": "train", "trace_snr_db": f"{i}.50"},
                windows[i, :, : frame[cv.TRACE_NPTS][i]],
            )
    return pd.read_csv(directory / "metadata.csv", dtype=str, keep_default_na=False)


def test_metadata_only_puts_the_store_split_into_an_existing_dataset(
    split_store_url, tmp_path, dask_cluster, capsys
):
    directory = tmp_path / "existing"
    before = seisbench_dataset_with_store_names(split_store_url, directory)
    # An extra row the store does not have: it gets no split.
    extra = before.iloc[[0]].assign(trace_name="not-in-store")
    pd.concat([before, extra]).to_csv(directory / "metadata.csv", index=False)
    scheduler = ["--scheduler", dask_cluster.address, "--quiet"]
    assert (
        main(
            ["export", "seisbench", split_store_url, str(directory), "--metadata-only", *scheduler]
        )
        == 0
    )
    after = pd.read_csv(directory / "metadata.csv", dtype=str, keep_default_na=False)
    assert (directory / "metadata.csv.orig").is_file()
    for column in before.columns:
        if column != "split":
            assert (after[column].iloc[:-1].to_numpy() == before[column].to_numpy()).all()
    frame = trace_frame(storage.open_dataset(StoreLocation(split_store_url)))
    assert (after["split"].iloc[:-1].to_numpy() == frame[cv.SPLIT_VAR].to_numpy()).all()
    assert after["split"].iloc[-1] == ""
    dataset = sbd.WaveformDataset(directory, component_order="ZNE", cache=None)
    for name in cv.SPLIT_VALUES:
        part = getattr(dataset, name)()
        assert set(part.metadata["trace_name"]) == set(
            frame.loc[frame[cv.SPLIT_VAR] == name, cv.TRACE_NAME]
        )

    # Without a dataset there: metadata.csv from the store's columns.
    fresh = tmp_path / "fresh"
    assert (
        main(["export", "seisbench", split_store_url, str(fresh), "--metadata-only", *scheduler])
        == 0
    )
    written = pd.read_csv(fresh / "metadata.csv", keep_default_na=False)
    assert list(written[cv.TRACE_NAME]) == list(frame[cv.TRACE_NAME])
    assert list(written["split"]) == list(frame[cv.SPLIT_VAR])

    # Bad input: no store; a store without a split; another dataset's names.
    missing = str(tmp_path / "missing.zarr")
    assert main(["export", "seisbench", missing, str(fresh), *scheduler]) == 3
    assert missing in capsys.readouterr().err
    unsplit = str(tmp_path / "unsplit.zarr")
    write_event_windows(unsplit, n_events=30)
    assert (
        main(["export", "seisbench", unsplit, str(directory), "--metadata-only", *scheduler]) == 3
    )
    err = capsys.readouterr().err
    assert unsplit in err and "split" in err
    split_store(StoreLocation(unsplit), SplitOptions("event"), quiet=True)
    other = tmp_path / "other"
    other.mkdir()
    pd.DataFrame({"trace_name": ["x", "y"]}).to_csv(other / "metadata.csv", index=False)
    assert main(["export", "seisbench", unsplit, str(other), "--metadata-only", *scheduler]) == 3
    assert str(other) in capsys.readouterr().err


def test_filter_exports_exactly_the_queried_traces(split_store_url, tmp_path, dask_cluster, capsys):
    query = 'split != "train" and (source_magnitude >= 2 or trace_category == "noise")'
    scheduler = ["--scheduler", dask_cluster.address, "--quiet"]
    directory = tmp_path / "filtered"
    argv = ["export", "seisbench", split_store_url, str(directory), "--filter", query]
    assert main([*argv, *scheduler]) == 0
    store = storage.open_dataset(StoreLocation(split_store_url))
    frame = trace_frame(store)
    chosen = np.flatnonzero(
        (frame[cv.SPLIT_VAR] != "train").to_numpy()
        & (
            (frame["source_magnitude"] >= 2).to_numpy()
            | (frame[cv.TRACE_CATEGORY] == "noise").to_numpy()
        )
    )
    assert 0 < len(chosen) < len(frame)
    windows = store[cv.EVENT_WINDOWS_VAR].values
    dataset = sbd.WaveformDataset(directory, component_order="ZNE", cache=None)
    assert dataset.metadata["trace_name_original"].tolist() == (
        frame[cv.TRACE_NAME].to_numpy()[chosen].tolist()
    )
    for row, index in enumerate(chosen):
        npts = int(frame[cv.TRACE_NPTS][index])
        np.testing.assert_array_equal(dataset.get_waveforms(row), windows[index, :, :npts])
    assert len(dataset.train()) == 0
    assert len(dataset.dev()) + len(dataset.test()) == len(chosen)

    # A query pandas cannot evaluate, or one that selects nothing: exit 3, nothing written.
    for bad, fragment in (("source_magnitude >>", "cannot be evaluated"),
                          ("source_magnitude > 99", "selects none")):  # fmt: skip
        empty = tmp_path / "empty"
        argv = ["export", "seisbench", split_store_url, str(empty), "--filter", bad]
        assert main([*argv, *scheduler]) == 3
        assert fragment in capsys.readouterr().err
        assert not empty.exists()
