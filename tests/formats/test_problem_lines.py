"""An ingest's problem lines beyond what the root attrs hold (`problem_lines`): the root attr
`ingest_problems` keeps the first `ATTR_PROBLEM_LINES`, `ingest_problem_count` says how many
there are, the group `problems` holds them all; a store with few keeps them all in the attr, as
before. Waveforms and DAS, through a re-run (up to date) and an append; `ingest quakeml`'s
event-window store likewise, every line in its store and its command's summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr
from das_vendor_files import write_prodml
from obspy.core.event import Catalog, Event, Origin, Pick, WaveformStreamID
from test_quakeml import START as CONTINUOUS_START
from test_quakeml import continuous_dataset

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared.problem_lines import read_problems
from seisctf.location import StoreLocation

LIMIT = 3  # ATTR_PROBLEM_LINES in these tests (1,000 in use)
START = obspy.UTCDateTime("2022-05-06T07:00:00")


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(cv, "ATTR_PROBLEM_LINES", LIMIT)


def _good_file(folder: Path, station: str, start: obspy.UTCDateTime) -> Path:
    path = folder / f"{station}_{int(start.timestamp)}.mseed"
    data = np.random.default_rng(len(station)).standard_normal(400).astype(np.float32)
    header = {"network": "XX", "station": station, "channel": "HHZ", "sampling_rate": 20.0}
    obspy.Trace(data, {**header, "starttime": start}).write(str(path), format="MSEED")
    return path


def _bad_files(folder: Path, count: int) -> list[Path]:
    """`count` files no reader knows (each a problem line naming it)."""
    paths = [folder / f"bad_{index:02d}.mseed" for index in range(count)]
    for index, path in enumerate(paths):
        path.write_bytes(b"not a seismogram %d\n" % index * 40)
    return paths


def _root_attrs(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())["attributes"]


def _lines_in_group(store: Path) -> list[str]:
    """The group's lines, read with zarr alone."""
    return [str(line) for line in zarr.open_group(store, mode="r")["problems"]["line"][:]]


def test_waveform_problems_beyond_the_attrs_go_to_their_group(tmp_path, small_limit):
    archive = tmp_path / "archive"
    archive.mkdir()
    _good_file(archive, "GOOD", START)
    bad = _bad_files(archive, 7)
    store = tmp_path / "store.zarr"
    report = ingest_waveforms([str(archive)], StoreLocation(store), quiet=True)
    problems = read_problems(zarr.open_group(store, mode="r"))
    assert len(problems) == 7 and all(any(str(p) in line for line in problems) for p in bad)
    # The report holds the first lines (those of the root attrs) and their number.
    assert list(report.problems) == problems[:LIMIT] and report.n_problems == 7
    attrs = _root_attrs(store)
    assert attrs[cv.ATTR_PROBLEMS] == problems[:LIMIT]
    assert attrs[cv.ATTR_PROBLEM_COUNT] == 7
    assert _lines_in_group(store) == problems

    # The same inputs again: up to date, the same problems (the root attrs' and the count).
    again = ingest_waveforms([str(archive)], StoreLocation(store), quiet=True)
    assert again.up_to_date and list(again.problems) == problems[:LIMIT]
    assert again.n_problems == 7

    # An append keeps the old problems and adds the new file's.
    later = tmp_path / "later"
    later.mkdir()
    _good_file(later, "GOOD", START + 3600)
    more_bad = _bad_files(later, 2)
    appended = ingest_waveforms(
        [str(archive), str(later)], StoreLocation(store), append=True, quiet=True
    )
    every = _lines_in_group(store)
    assert set(problems) < set(every) and appended.n_problems == len(every) == 9
    assert all(any(str(p) in line for line in every) for p in more_bad)
    assert list(appended.problems) == every[:LIMIT]
    assert _root_attrs(store)[cv.ATTR_PROBLEM_COUNT] == 9

    # The root attrs hold LIMIT lines whatever the number of bad files.
    many = tmp_path / "many"
    many.mkdir()
    _good_file(many, "GOOD", START)
    _bad_files(many, 20)
    ingest_waveforms([str(many)], StoreLocation(tmp_path / "many.zarr"), quiet=True)
    assert len(_root_attrs(tmp_path / "many.zarr")[cv.ATTR_PROBLEMS]) == LIMIT


def test_few_waveform_problems_stay_in_the_attrs_alone(tmp_path, small_limit):
    archive = tmp_path / "archive"
    archive.mkdir()
    _good_file(archive, "GOOD", START)
    _bad_files(archive, LIMIT)
    store = tmp_path / "store.zarr"
    report = ingest_waveforms([str(archive)], StoreLocation(store), quiet=True)
    attrs = _root_attrs(store)
    assert attrs[cv.ATTR_PROBLEMS] == list(report.problems) and len(report.problems) == LIMIT
    assert cv.ATTR_PROBLEM_COUNT not in attrs
    assert "problems" not in zarr.open_group(store, mode="r")
    assert read_problems(zarr.open_group(store, mode="r")) == list(report.problems)


def test_das_problems_beyond_the_attrs_go_to_their_group(tmp_path, small_limit, dask_cluster):
    """On a cluster: the plan's lines stay with its partitions (the client holds their count
    and first lines); the store's group has them all, sorted; the report the first LIMIT and
    their number; an append keeps the store's lines and adds its own."""
    from distributed import Client, futures_of

    from seisctf.formats.das import das_files

    folder = tmp_path / "das"
    folder.mkdir()
    data = np.random.default_rng(3).standard_normal((120, 8))
    start = np.datetime64("2024-01-02T03:04:05", "ns")
    write_prodml(folder / "good.h5", data, start, 50.0)
    _bad_files(folder, 5)
    store = tmp_path / "das.zarr"
    plans = []
    write = das_files._write

    def spy(parted, *args, **kwargs):
        plans.append(parted.plan)
        return write(parted, *args, **kwargs)

    with Client(dask_cluster.address, set_as_default=True), pytest.MonkeyPatch.context() as patch:
        patch.setattr(das_files, "_write", spy)
        report = ingest_das([str(folder)], StoreLocation(store), block_samples=64, quiet=True)
        lines = _lines_in_group(store)
        assert len(lines) == 5 and lines == sorted(lines)
        assert all(line.startswith(str(folder / "bad_")) for line in lines)
        (plan,) = plans
        assert len(plan.problems) == 5 and futures_of(plan.problems.nonempty_parts())
        assert report.n_problems == 5 and list(report.problems) == lines[:LIMIT]
        attrs = _root_attrs(store)
        assert attrs[cv.ATTR_PROBLEMS] == lines[:LIMIT]
        assert attrs[cv.ATTR_PROBLEM_COUNT] == 5
        again = ingest_das([str(folder)], StoreLocation(store), block_samples=64, quiet=True)
        assert again.up_to_date and list(again.problems) == lines[:LIMIT]
        assert again.n_problems == 5
        later = tmp_path / "later"
        later.mkdir()
        write_prodml(later / "good.h5", data, start + np.timedelta64(120 * 20_000_000, "ns"), 50.0)
        (later / "bad_zz.h5").write_bytes(b"not a DAS file\n" * 40)
        appended = ingest_das([str(later)], StoreLocation(store), append=True, quiet=True)
    every = _lines_in_group(store)
    assert every == sorted([*lines, *(line for line in every if "later" in line)])
    assert len(every) == 6 and appended.n_problems == 6 and list(appended.problems) == every[:LIMIT]
    assert read_problems(zarr.open_group(store, mode="r")) == every


def test_quakeml_problems_beyond_the_old_cap_are_all_in_the_store_and_the_summary(
    tmp_path, capsys, dask_cluster
):
    """More unmatched stations than the root attrs hold (ATTR_PROBLEM_LINES, 1,000, as in
    use): each is a problem line in the store's record (`read_problems`) and in the summary."""
    continuous = tmp_path / "continuous.zarr"
    storage.write_dataset(continuous_dataset(), StoreLocation(continuous), quiet=True)
    origin = CONTINUOUS_START + 200
    event = Event(origins=[Origin(time=origin, latitude=45.0, longitude=7.0, depth=8e3)])
    unknown = [f"S{index:04d}" for index in range(cv.ATTR_PROBLEM_LINES + 5)]
    for network, station in [("XX", "A01"), *(("ZZ", code) for code in unknown)]:
        wid = WaveformStreamID(network, station, None, "HHZ")
        event.picks.append(Pick(time=origin + 3, waveform_id=wid, phase_hint="P"))
    catalog = tmp_path / "catalog.xml"
    Catalog(events=[event]).write(str(catalog), format="QUAKEML")
    out = tmp_path / "windows.zarr"
    code = main(["ingest", "quakeml", str(catalog), "--archive", str(continuous), "--out",
                 str(out), "--window", "20", "--pre-arrival", "5", "--noise-windows", "0",
                 "--quiet", "--scheduler", dask_cluster.address])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0, printed
    expected = [f"picks at ZZ.{code}: station not in the waveform store" for code in unknown]
    stored = read_problems(zarr.open_group(out, mode="r"))
    assert stored == expected
    assert _lines_in_group(out) == expected
    attrs = _root_attrs(out)
    assert attrs[cv.ATTR_PROBLEMS] == expected[: cv.ATTR_PROBLEM_LINES]
    assert attrs[cv.ATTR_PROBLEM_COUNT] == len(expected)
    summary = [line.removeprefix("problem: ") for line in printed.splitlines()
               if line.startswith("problem: ")]  # fmt: skip
    assert summary == expected
    assert f"1 earthquake and 0 noise windows, {len(expected)} problem(s)" in printed


def test_the_command_prints_the_first_lines_and_how_many_more(monkeypatch, capsys):
    """Beyond the report's first lines (the root attrs'), `ingest waveforms` prints how many
    more there are, and counts them all in its summary."""
    import argparse
    from types import SimpleNamespace

    from seisctf.cli import ingest as cli_ingest

    plan = SimpleNamespace(stations=("A",), channels=("HHZ",), n_time=10, sampling_rate=1.0)
    report = SimpleNamespace(plan=plan, problems=("x: bad", "y: bad"), n_problems=5,
                             up_to_date=False)  # fmt: skip
    monkeypatch.setattr(cli_ingest, "_registered", lambda kind: lambda *a, **k: report)
    options = dict.fromkeys(("kind", "sources", "inventory", "rate", "strict", "quiet", "append",
                             "remove_response", "pre_filt", "water_level"))  # fmt: skip
    args = argparse.Namespace(**options, out="out.zarr", storage_option=None)
    monkeypatch.setattr(cli_ingest, "store_location", lambda *a: None)
    cli_ingest._run_ingest_waveforms(args)
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["problem: x: bad", "problem: y: bad"]
    assert printed[2].startswith("problem: and 3 more, every one in the store's `problems` group")
    assert printed[3].endswith(", 5 problem(s)")
