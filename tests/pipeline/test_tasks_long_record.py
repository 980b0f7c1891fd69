"""`seisctf tasks` on long, sparse records: ObsPy's shipped recordings of BW.UH1, UH2, UH3 and
UH4 (2010-05-27, 50 Hz, 230 s) and copies of them later, ingested in blocks of 1024 samples. The
gap check equals a plain numpy computation over every slot of the whole record; the same copies
spread over a record 480 times as long (250,000 blocks a station, 10^6 chunks) send no larger
graph (before: one graph over every chunk) and the command's peak memory stays that of the
shorter record. One run of the command per record gives all three: in a process of its own, on
its embedded cluster, whose scheduler (in that process) writes the size of each graph it
receives."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr
from cli_peak import peak_mib
from conftest import SHORT_LAYOUT_YAML
from graph_sizes import SIZES_FILE_ENV, read_sizes

from seisctf import conventions as cv
from seisctf import storage
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

OBSPY_DATA = Path(obspy.__file__).parent / "signal" / "tests" / "data"
TESTS = Path(__file__).parents[1]
RATE, CTF_RATE = 50.0, 10.0
BLOCK = 1024
SECRET = "long-record-tasks-secret"
FILES = {
    "BW.UH1": "BW.UH1._.SHZ.D.2010.147.cut.slist.gz",
    "BW.UH2": "BW.UH2._.SHZ.D.2010.147.cut.slist.gz",
    "BW.UH3": "BW.UH3._.SHZ.D.2010.147.cut.slist.gz",
    "BW.UH4": "BW.UH4._.EHZ.D.2010.147.cut.slist.gz",
}
# The copies start whole periods apart: 66,560 samples, 65 blocks and 256 slots of 5.2 s (40 + 12
# CTF samples at 10 Hz), so that records whose copies lie further apart hold the same blocks and
# slots. Periods after the recording -> stations copied. At period 0 UH2 misses 1 s in every 20 s
# (no ten slots of 5.2 s without a gap) and UH4 has no SHZ; period 3 lacks UH3: only the last
# copy holds ten slots of three gap-free stations, what the layout needs.
PERIOD_S = 66_560 / RATE
STATIONS = {0: tuple(FILES), 3: ("BW.UH1", "BW.UH2"), 8: ("BW.UH1", "BW.UH2", "BW.UH3")}
LONGER = 480  # the longer record's copies lie 480 times as far apart
UH2_GAPS_S = 20.0


def recordings(spacing: int) -> list[obspy.Trace]:
    """The recordings and their copies `STATIONS`' periods × `spacing` later."""
    traces = []
    for period, stations in STATIONS.items():
        for station in stations:
            trace = obspy.read(str(OBSPY_DATA / FILES[station]))[0]
            if station == "BW.UH4":
                trace.decimate(2)
            trace.stats.starttime += period * spacing * PERIOD_S
            if station == "BW.UH2" and period == 0:
                start, end = trace.stats.starttime, trace.stats.endtime
                pieces = np.arange(start.timestamp, end.timestamp, UH2_GAPS_S)
                traces += [
                    trace.slice(obspy.UTCDateTime(t), obspy.UTCDateTime(t + 19.0)) for t in pieces
                ]
                continue
            traces.append(trace)
    return traces


def ingested(root: Path, spacing: int) -> str:
    archive = root / "archive"
    archive.mkdir(parents=True)
    for i, trace in enumerate(recordings(spacing)):
        trace.write(str(archive / f"{trace.id}.{i}.mseed"), format="MSEED")
    url = str(root / "continuous.zarr")
    ingest_waveforms([str(archive)], StoreLocation(url), block_samples=BLOCK, quiet=True)
    return url


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """The record and the longer one, each ingested and made a bundle by the command line (its
    embedded cluster's scheduler loading `graph_sizes`): per record, its store, truth bundle,
    the sizes of the graphs the command sent and its peak RSS (MiB)."""
    root = tmp_path_factory.mktemp("tasks-long-record")
    layout = root / "short.yaml"
    layout.write_text(SHORT_LAYOUT_YAML)
    result = {}
    for name, spacing in (("long", 1), ("longer", LONGER)):
        store = ingested(root / name, spacing)
        sizes = root / name / "graph-sizes.txt"
        environment = {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.getenv("PYTHONPATH")])),
            "DASK_DISTRIBUTED__SCHEDULER__PRELOAD": '["graph_sizes"]',
            SIZES_FILE_ENV: str(sizes),
        }
        peak = peak_mib(tasks_argv(store, root / name, layout), environment)
        truth = root / name / "truth.zarr"
        result[name] = {"store": store, "truth": truth, "graphs": read_sizes(sizes), "peak": peak}
    return result


def tasks_argv(store: str, folder: Path, layout: Path) -> list[str]:
    public, truth = folder / "public.zarr", folder / "truth.zarr"
    return [
        "tasks", store, "--public", str(public), "--truth", str(truth), "--layout", str(layout),
        "--rate", str(CTF_RATE), "--channel", "SHZ", "--secret", SECRET, "--quiet",
    ]  # fmt: skip


def usable_slots(values: np.ndarray, slot_samples: int, max_lead: int) -> np.ndarray:
    """Bool (slot,) of one trace: the slot's first finite sample is at most `max_lead` samples
    in and every sample from it on is finite."""
    n_slots = values.size // slot_samples
    usable = np.zeros(n_slots, dtype=bool)
    for slot in range(n_slots):
        finite = np.isfinite(values[slot * slot_samples : (slot + 1) * slot_samples])
        first = int(np.argmax(finite))
        usable[slot] = finite.any() and first <= max_lead and finite[first:].all()
    return usable


def test_gap_check_equals_numpy_over_the_whole_record(bundles):
    long = bundles["long"]
    archive = storage.read_attrs(StoreLocation(long["truth"]))[cv.ATTR_ARCHIVE]
    group = zarr.open_group(long["store"], mode="r")
    stations = [str(s) for s in group[cv.STATION][:]]
    shz = [str(c) for c in group[cv.CHANNEL][:]].index("SHZ")
    data = group[cv.WAVEFORM_VAR][:, shz, :]
    assert data.shape[1] > 8 * PERIOD_S * RATE
    down = round(RATE / CTF_RATE)
    slot_samples = (archive["guard_steps"] + archive["segment_steps"]) * down
    max_lead = (down - 1) // 2  # less than half a CTF sample
    usable = np.array([usable_slots(row, slot_samples, max_lead) for row in data])
    complete = np.stack(
        [usable[:, s : s + 10].all(axis=1) for s in range(usable.shape[1] - 9)], axis=1
    )
    first = int(np.argmax(complete.sum(axis=0)))
    kept = sorted(s for s, ok in zip(stations, complete[:, first], strict=True) if ok)
    assert sorted(archive["stations"]) == kept == ["BW.UH1", "BW.UH2", "BW.UH3"]
    assert sorted(archive["stations_dropped"]) == ["BW.UH4"]
    start = obspy.UTCDateTime(str(group.attrs[cv.ATTR_START_TIME]))
    slot_s = slot_samples / RATE
    guard_s = archive["guard_steps"] / CTF_RATE
    expected = [start + (first + j) * slot_s + guard_s for j in range(10)]
    got = [obspy.UTCDateTime(t) for t in archive["segment_start_times"]]
    assert got == expected and got[0] - start > 8 * PERIOD_S  # in the last copy


def test_graphs_do_not_grow_with_the_record(bundles):
    long, longer = bundles["long"], bundles["longer"]
    assert zarr.open_group(longer["store"])[cv.WAVEFORM_VAR].nchunks > 990_000
    # The gap check's waves may cut the copies differently; none is larger than the shorter
    # record's largest. (Both schedulers loaded `graph_sizes`: each command's graphs are there.)
    assert long["graphs"] and longer["graphs"]
    assert max(longer["graphs"]) <= max(long["graphs"]), (longer["graphs"], long["graphs"])
    # The same segments, cut from the last copy, (LONGER − 1) × 8 periods later.
    first, second = (
        storage.read_attrs(StoreLocation(b["truth"]))[cv.ATTR_ARCHIVE] for b in (long, longer)
    )
    assert second["stations"] == first["stations"]
    shift = (LONGER - 1) * 8 * PERIOD_S
    for a, b in zip(first["segment_start_times"], second["segment_start_times"], strict=True):
        assert obspy.UTCDateTime(b) - obspy.UTCDateTime(a) == pytest.approx(shift, abs=1e-6)


def test_peak_memory_does_not_grow_with_the_record(bundles):
    """The command with its embedded cluster, whose scheduler shares its process: selecting the
    channel built a task per chunk of the store, and optimising a graph that reduces a selection
    (the gap check's, the segments' filters and offsets) listed every chunk's key, each about
    300 MiB more at 10^6 chunks; now 34 MiB more (the gap check's waves and coverage reads)."""
    peaks = {name: bundles[name]["peak"] for name in ("long", "longer")}
    assert peaks["longer"] - peaks["long"] < 64, peaks
