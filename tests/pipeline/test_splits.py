"""`seisctf split`: source-clusters and station-disjoint splits on a store whose stations record
events of several clusters, audited against an independent pandas computation; determinism over
workers, chunkings and seeds; budgets; the in-place write; the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from event_window_fixtures import trace_frame, write_event_windows

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs.event_windows import read_catalog
from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.pipeline.splits import SplitOptions, split_store


def haversine_km(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All pairwise great-circle distances (km) between (n, 2) and (m, 2) lat/lon degrees."""
    lat1, lon1 = np.radians(a[:, 0])[:, None], np.radians(a[:, 1])[:, None]
    lat2, lon2 = np.radians(b[:, 0])[None, :], np.radians(b[:, 1])[None, :]
    h = (
        np.sin((lat2 - lat1) / 2) ** 2
        + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0088 * np.arcsin(np.sqrt(h))


def independent_audit(frame: pd.DataFrame) -> dict:
    """The audit's numbers with plain pandas, from the store's own columns."""
    frame = frame.assign(
        sta=frame[cv.NETWORK_CODE] + "." + frame[cv.STATION_CODE],
        quake=frame[cv.P_ARRIVAL_SAMPLE].notna() | frame[cv.S_ARRIVAL_SAMPLE].notna(),
    )
    splits_of = frame.groupby("sta")[cv.SPLIT_VAR].agg(set)
    shared = {s for s, found in splits_of.items() if {"train", "test"} <= found}
    test = frame[frame[cv.SPLIT_VAR] == "test"]
    quake, noise = test[test["quake"]], test[~test["quake"]]
    events = frame[frame[cv.SOURCE_ID] != ""].groupby(cv.SOURCE_ID)[cv.SPLIT_VAR].nunique()
    located = frame.dropna(subset=[cv.SOURCE_LATITUDE])
    points = {
        name: located.loc[located[cv.SPLIT_VAR] == name, [cv.SOURCE_LATITUDE, cv.SOURCE_LONGITUDE]]
        .drop_duplicates()
        .to_numpy()
        for name in ("train", "test")
    }
    return {
        "counts": frame[cv.SPLIT_VAR]
        .value_counts()
        .reindex(cv.SPLIT_VALUES, fill_value=0)
        .to_dict(),
        "shared_stations": len(shared),
        "test_earthquake_fraction_at_shared_stations": quake["sta"].isin(shared).mean(),
        "test_noise_fraction_at_shared_stations": noise["sta"].isin(shared).mean(),
        "events_in_several_splits": int((events > 1).sum()),
        "min_train_test_source_distance_km": haversine_km(points["train"], points["test"]).min(),
    }


def check_audit(audit: dict, frame: pd.DataFrame) -> None:
    expected = independent_audit(frame)
    for key in cv.AUDIT_KEYS:
        assert key in audit
    assert audit["counts"] == {k: int(v) for k, v in expected["counts"].items()}
    assert audit["shared_stations"] == expected["shared_stations"]
    for key in (
        "test_earthquake_fraction_at_shared_stations",
        "test_noise_fraction_at_shared_stations",
        "min_train_test_source_distance_km",
    ):
        assert audit[key] == pytest.approx(expected[key], rel=1e-9), key
    assert audit["events_in_several_splits"] == expected["events_in_several_splits"]


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("splits")


def fresh_store(root: Path, name: str, **layout) -> tuple[str, xr.Dataset]:
    url = str(root / name)
    return url, write_event_windows(url, **layout)


def test_source_clusters_split_audit_matches_pandas_and_leaves_waveforms(store_dir, tmp_path):
    url, original = fresh_store(store_dir, "clusters.zarr")
    chunk_files = sorted(Path(url, cv.EVENT_WINDOWS_VAR).rglob("*"))
    before = {p: p.read_bytes() for p in chunk_files if p.is_file()}
    result = split_store(StoreLocation(url), SplitOptions("source-clusters", seed=3), quiet=True)
    audit = result.audit
    ds = storage.open_dataset(
        StoreLocation(url)
    )  # complete, consolidated: the new variables are visible
    assert ds.attrs[cv.ATTR_COMPLETE] is True
    assert set(np.unique(ds[cv.SPLIT_VAR].values.tolist())) == set(cv.SPLIT_VALUES)
    assert {p: p.read_bytes() for p in before} == before  # waveforms never rewritten
    xr.testing.assert_equal(ds[cv.EVENT_WINDOWS_VAR].load(), original[cv.EVENT_WINDOWS_VAR])
    frame = trace_frame(ds)
    check_audit(audit, frame)
    catalogue = read_catalog(StoreLocation(url))  # the Parquet copy has the split too
    assert list(catalogue[cv.SPLIT_VAR]) == list(frame[cv.SPLIT_VAR])
    assert (catalogue["split_cluster"].to_numpy() == frame["split_cluster"].to_numpy()).all()
    # The fixture is built so that stations record events of several clusters: leakage shows.
    assert audit["shared_stations"] > 0
    assert 0 < audit["test_earthquake_fraction_at_shared_stations"] < 1
    assert audit["events_in_several_splits"] == 0

    # Clusters: 20 by latitude; the 4 southernmost and 4 northernmost are test.
    clusters = ds.attrs["split"]["clusters"]
    assert [c["id"] for c in clusters] == list(range(20))
    latitudes = [c["latitude"] for c in clusters]
    assert latitudes == sorted(latitudes)
    test_ids = {c["id"] for c in clusters if c["role"] == "test"}
    assert test_ids == {0, 1, 2, 3, 16, 17, 18, 19}
    cluster = frame["split_cluster"].to_numpy()
    split = frame[cv.SPLIT_VAR].to_numpy()
    assert (np.isin(cluster, list(test_ids)) == (split == "test")).all()
    # Every event in the cluster of the nearest centre; noise in the cluster nearest its station.
    centres = np.array([[c["latitude"], c["longitude"]] for c in clusters])
    quake = frame[cv.SOURCE_ID] != ""
    where = np.where(
        quake.to_numpy()[:, None],
        frame[[cv.SOURCE_LATITUDE, cv.SOURCE_LONGITUDE]].to_numpy(),
        frame[[cv.STATION_LATITUDE, cv.STATION_LONGITUDE]].to_numpy(),
    )
    nearest = ((where[:, None, :] - centres[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert (nearest == cluster).all()
    dev_events = frame.loc[quake & (frame[cv.SPLIT_VAR] == "dev"), cv.SOURCE_ID].nunique()
    central_events = frame.loc[quake & ~np.isin(cluster, list(test_ids)), cv.SOURCE_ID].nunique()
    assert dev_events == round(0.1 * central_events) or dev_events > 0

    # Budgets: C(12, b) distinct draws; never repeated; b = 12 is one draw, b = 1 all twelve.
    budgets = audit["budgets"]
    for b in (1, 3, 6, 9, 12):
        entry = budgets[str(b)]
        assert entry["distinct_draws"] == math.comb(12, b)
        draws = [tuple(d) for d in entry["draws"]]
        assert len(set(draws)) == len(draws) == min(12, math.comb(12, b)) == entry["n_draws"]
        assert all(len(d) == b and set(d) <= set(range(4, 16)) for d in draws)
        assert entry["exhaustive"] == (math.comb(12, b) <= 12)
    assert budgets["12"]["draws"] == [list(range(4, 16))] and "note" in budgets["12"]
    assert sorted(budgets["1"]["draws"]) == [[i] for i in range(4, 16)]
    first_draw = set(budgets["3"]["draws"][0])
    assert budgets["3"]["train_traces"][0] == int(
        ((split == "train") & np.isin(cluster, list(first_draw))).sum()
    )
    # Seeded: the same seed gives the same split and draws, another seed other draws.
    again = split_store(StoreLocation(url), SplitOptions("source-clusters", seed=3), quiet=True)
    assert again.audit["budgets"] == budgets
    np.testing.assert_array_equal(again.split.split, result.split.split)
    other = split_store(StoreLocation(url), SplitOptions("source-clusters", seed=4), quiet=True)
    assert other.audit["budgets"]["3"]["draws"] != budgets["3"]["draws"]


def test_station_disjoint_has_no_shared_station_and_buffers_neighbours(store_dir):
    url, _ = fresh_store(store_dir, "disjoint.zarr")
    result = split_store(StoreLocation(url), SplitOptions("station-disjoint", seed=1), quiet=True)
    frame = trace_frame(storage.open_dataset(StoreLocation(url)))
    check_audit(result.audit, frame) if result.audit["min_train_test_source_distance_km"] else None
    assert result.audit["shared_stations"] == 0
    assert result.audit["test_earthquake_fraction_at_shared_stations"] == 0.0
    assert result.audit["test_noise_fraction_at_shared_stations"] == 0.0
    stations = frame[cv.NETWORK_CODE] + "." + frame[cv.STATION_CODE]
    assert (frame.groupby(stations)[cv.SPLIT_VAR].nunique() == 1).all()
    counts = result.audit["counts"]
    assert counts["train"] > counts["test"] > 0 and counts["dev"] > 0
    assert result.audit["events_in_several_splits"] > 0  # the price of disjoint stations

    buffered = split_store(
        StoreLocation(url), SplitOptions("station-disjoint", seed=1, buffer_km=600.0), quiet=True
    )
    frame = trace_frame(storage.open_dataset(StoreLocation(url)))
    stations = frame[cv.NETWORK_CODE] + "." + frame[cv.STATION_CODE]
    per_station = (
        frame.assign(sta=stations)
        .groupby("sta")
        .agg(
            lat=(cv.STATION_LATITUDE, "first"),
            lon=(cv.STATION_LONGITUDE, "first"),
            split=(cv.SPLIT_VAR, "first"),
            unit=("split_cluster", "first"),
        )
    )
    distance = haversine_km(
        per_station[["lat", "lon"]].to_numpy(), per_station[["lat", "lon"]].to_numpy()
    )
    close = distance < 600.0
    split = per_station["split"].to_numpy()
    assert (split[:, None] == split[None, :])[close].all()
    unit = per_station["unit"].to_numpy()
    assert (unit[:, None] == unit[None, :])[close].all()
    assert buffered.audit["shared_stations"] == 0


def test_event_and_time_splits(store_dir):
    url, _ = fresh_store(store_dir, "event.zarr")
    event = split_store(StoreLocation(url), SplitOptions("event", seed=2), quiet=True)
    assert event.audit["events_in_several_splits"] == 0
    frame = trace_frame(storage.open_dataset(StoreLocation(url)))
    check_audit(event.audit, frame)
    time = split_store(StoreLocation(url), SplitOptions("time"), quiet=True)
    frame = trace_frame(storage.open_dataset(StoreLocation(url)))
    when = pd.to_datetime(
        frame["source_origin_time"].where(
            frame["source_origin_time"] != "", frame["trace_start_time"]
        ),
        utc=True,
    )
    by_split = {name: when[frame[cv.SPLIT_VAR] == name] for name in cv.SPLIT_VALUES}
    assert by_split["train"].max() <= by_split["dev"].min()
    assert by_split["dev"].max() <= by_split["test"].min()
    assert time.audit["events_in_several_splits"] == 0
    assert abs(time.audit["counts"]["train"] / len(frame) - 0.7) < 0.05


def run_split(url: str, scheduler: str, *extra: str) -> np.ndarray:
    assert (
        main(
            [
                "split",
                url,
                "--strategy",
                "source-clusters",
                "--seed",
                "5",
                "--quiet",
                "--scheduler",
                scheduler,
                *extra,
            ]
        )
        == 0
    )
    group = zarr.open_group(url, mode="r")
    return np.array(
        [
            np.asarray(group[cv.SPLIT_VAR][:].tolist(), dtype=object),
            np.asarray(group["split_cluster"][:]),
        ]
    )


def test_splits_identical_for_one_and_two_workers_and_any_chunking(
    store_dir, tmp_path, dask_cluster, dask_cluster_one_worker, capsys
):
    url_a, _ = fresh_store(tmp_path, "a.zarr", shard_traces=64)
    url_b, _ = fresh_store(tmp_path, "b.zarr", shard_traces=None, chunk_traces=7)
    assert zarr.open_group(url_b)[cv.EVENT_WINDOWS_VAR].chunks[0] == 7
    one = run_split(url_a, dask_cluster_one_worker.address)
    capsys.readouterr()
    two = run_split(
        url_b,
        dask_cluster.address,
        "--audit",
        str(tmp_path / "audit.json"),
        "--map",
        str(tmp_path / "map.png"),
    )
    np.testing.assert_array_equal(one, two)
    assert capsys.readouterr().out == ""  # --quiet: the audit goes to its file only
    written = json.loads((tmp_path / "audit.json").read_text())
    assert written["strategy"] == "source-clusters"
    assert set(cv.AUDIT_KEYS) <= set(written)
    png = (tmp_path / "map.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_cli_bad_input_exits_3_naming_it(store_dir, tmp_path, dask_cluster, capsys):
    scheduler = ["--scheduler", dask_cluster.address, "--quiet"]
    missing = str(tmp_path / "nothing.zarr")
    assert main(["split", missing, "--strategy", "event", *scheduler]) == 3
    assert missing in capsys.readouterr().err
    url, _ = fresh_store(store_dir, "bad.zarr")
    assert (
        main(["split", url, "--strategy", "source-clusters", "--clusters", "500", *scheduler]) == 3
    )
    err = capsys.readouterr().err
    assert url in err and "500" in err and "Traceback" not in err
    assert main(["split", url, "--strategy", "source-clusters", "--clusters", "8", *scheduler]) == 3
    assert "--clusters" in capsys.readouterr().err
    assert main(["split", url, "--strategy", "event", "--fractions", "a,b", *scheduler]) == 3
    assert "--fractions" in capsys.readouterr().err
    assert cv.SPLIT_VAR not in storage.open_dataset(StoreLocation(url))  # nothing was written


def test_split_prints_the_audit_unless_it_goes_to_a_file(store_dir, tmp_path, dask_cluster):
    """As a user runs it (`python -m seisctf.cli`): without --audit the audit JSON goes to
    stdout; with --audit FILE to the file only, stdout getting a summary, and nothing at all
    with --quiet."""
    url, _ = fresh_store(store_dir, "printed.zarr")

    def split(*extra: str) -> str:
        argv = ["split", url, "--strategy", "event", "--scheduler", dask_cluster.address]
        command = [sys.executable, "-m", "seisctf.cli", *argv, *extra]
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        return run.stdout

    quiet_file = tmp_path / "quiet.json"
    assert split("--quiet", "--audit", str(quiet_file)) == ""
    audit = json.loads(quiet_file.read_text())
    assert audit["strategy"] == "event" and set(cv.AUDIT_KEYS) <= set(audit)
    summary_file = tmp_path / "summary.json"
    lines = split("--audit", str(summary_file)).splitlines()
    counts = audit["counts"]
    shared = audit["shared_stations"]
    assert lines == [
        f"split {url} (event): train {counts['train']}, dev {counts['dev']}, test "
        f"{counts['test']}; {shared} station{'' if shared == 1 else 's'} in train and test",
        f"leakage audit: {summary_file}",
    ]
    assert json.loads(summary_file.read_text()) == audit  # the same split: the same audit
    assert json.loads(split("--quiet")) == audit  # no file: the JSON on stdout


def test_split_map_of_stations_without_positions_warns_of_nothing(tmp_path, dask_cluster):
    """Stations without a position (an archive ingested without an inventory) have no place on
    the map; the map is drawn from the sources, and no numpy warning ("Mean of empty slice")
    reaches the user."""
    from event_window_fixtures import event_window_dataset

    from seisctf.catalogs import event_windows

    dataset = event_window_dataset()
    unknown = np.full(dataset.sizes[cv.TRACE], np.nan)
    dataset = dataset.assign_coords(
        {cv.STATION_LATITUDE: (cv.TRACE, unknown), cv.STATION_LONGITUDE: (cv.TRACE, unknown)}
    )
    url = str(tmp_path / "unplaced.zarr")
    event_windows.write_event_windows(dataset, StoreLocation(url), quiet=True)
    picture = tmp_path / "map.png"
    argv = ["split", url, "--strategy", "event", "--quiet", "--map", str(picture)]
    command = [sys.executable, "-m", "seisctf.cli", *argv, "--scheduler", dask_cluster.address]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    assert picture.read_bytes().startswith(b"\x89PNG")
