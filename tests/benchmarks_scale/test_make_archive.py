"""benchmarks/make_archive.py, run as a user runs it, at small sizes: the SDS tree read back with
obspy (samples, gaps, overlaps, record lengths, STEIM2, damage) against its summary, its
StationXML, `seisctf ingest waveforms` of it; the chunked SeisBench dataset opened with
SeisBench and ingested with `seisctf ingest seisbench`."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import obspy
import pytest
import zarr
from obspy.io.mseed.util import get_record_information

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "make_archive.py"
SEISCTF = [sys.executable, "-m", "seisctf.cli"]
STEIM2 = 11  # SEED data encoding code
RATE = 5.0  # Hz: a day file of 432,000 samples keeps the tree small
SDS_ARGS = ["--stations", "4", "--days", "2", "--rate", str(RATE), "--seed", "7",
            "--gaps", "2", "--overlaps", "2", "--mixed-rate", "1", "--damaged", "3"]  # fmt: skip
FLIPPED = ("flipped-bit-quality", "flipped-bit-data-offset")


def run(*argv: str) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(argv)} -> {result.returncode}\n{result.stderr}"
    return result


def make_archive(*argv: str) -> subprocess.CompletedProcess:
    return run(sys.executable, str(SCRIPT), *argv)


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("archive") / "small"
    printed = make_archive("sds", str(out), *SDS_ARGS, "--workers", "2").stdout
    summary = json.loads((out / "summary.json").read_text())
    assert f"wrote {summary['files']} files" in printed and "MB/s" in printed
    return out, summary


def read(path: Path) -> obspy.Stream:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # libmseed names a truncated record
        return obspy.read(str(path))


def record_walk(raw: bytes) -> tuple[list[dict], int]:
    """obspy's header of every whole record, and the bytes left after the last whole one.
    (`get_record_information` reads the file's first record instead of the one at `offset`
    when the bytes from `offset` on are no multiple of 128: it is given whole 128-byte units.)"""
    records, offset = [], 0
    while len(raw) - offset >= 128:
        units = (len(raw) - offset) // 128 * 128
        info = get_record_information(io.BytesIO(raw[offset : offset + units]))
        if offset + info["record_length"] > len(raw):
            break
        records.append(info)
        offset += info["record_length"]
    return records, len(raw) - offset


def by_path(summary: dict, key: str) -> dict[str, dict]:
    return {entry["path"]: entry for entry in summary[key]}


def test_tree_reads_back_as_the_summary_says(archive):
    out, summary = archive
    files = sorted(p for p in (out / "sds").rglob("*") if p.is_file())
    assert [str(p.relative_to(out)) for p in files] == sorted(
        e["path"] for e in summary["file_list"]
    )
    assert summary["files"] == len(files) == 4 * 3 * 2
    assert summary["bytes"] == sum(p.stat().st_size for p in files)
    damaged = by_path(summary, "damaged")
    assert sorted(d["damage"] for d in damaged.values()) == sorted(["truncated", *FLIPPED])
    mixed = by_path(summary, "mixed_rate")
    total = 0
    for entry in summary["file_list"]:
        path = out / entry["path"]
        if damaged.get(entry["path"], {}).get("damage") in FLIPPED:
            with pytest.raises(Exception):  # noqa: B017 - obspy raises several types
                read(path)
            assert entry["samples"] == 0
            continue
        stream = read(path)
        assert sum(tr.stats.npts for tr in stream) == entry["samples"]
        assert len(stream) == entry["traces"]
        total += entry["samples"]
        first = stream[0].stats
        assert {tr.stats.sampling_rate for tr in stream} == {entry["rate"]}
        assert entry["rate"] == (RATE / 2 if entry["path"] in mixed else RATE)
        assert all(tr.data.dtype == np.int32 for tr in stream)
        # The SDS path: YEAR/NET/STA/CHAN.D/NET.STA.LOC.CHAN.D.YEAR.DOY of the first sample.
        year, doy = first.starttime.year, first.starttime.julday
        assert entry["path"] == (
            f"sds/{year}/{first.network}/{first.station}/{first.channel}.D/"
            f"{stream[0].id}.D.{year}.{doy:03d}"
        )
        if entry["path"] in damaged:  # truncated: whole records read, the cut one is not
            records, left = record_walk(path.read_bytes())
            assert 0 < left < entry["record_length"]
            assert entry["samples"] == sum(r["npts"] for r in records)
            assert entry["samples"] < entry["samples_written"]
    assert total == summary["samples"]


def test_gaps_and_overlaps_where_the_summary_says(archive):
    out, summary = archive
    gaps, overlaps = by_path(summary, "gaps"), by_path(summary, "overlaps")
    assert len(gaps) == len(overlaps) == 2 and not set(gaps) & set(overlaps)
    damaged = by_path(summary, "damaged")
    for entry in summary["file_list"]:
        if entry["path"] in damaged:
            continue
        found = read(out / entry["path"]).get_gaps()
        expected = gaps.get(entry["path"]) or overlaps.get(entry["path"])
        if expected is None:
            assert found == [], entry["path"]
            continue
        ((*_, end_of_first, start_of_second, delta, samples),) = found
        assert str(end_of_first) == expected["end_of_first"]
        assert str(start_of_second) == expected["start_of_second"]
        # obspy: samples missing (gap, delta > 0) or held twice (overlap, delta < 0).
        assert abs(samples) == expected["anomaly_samples"] > 0
        assert (delta > 0) == (entry["path"] in gaps)
        if entry["path"] in overlaps:  # the overlap's samples are the same in both traces
            first, second = read(out / entry["path"])
            both = first.slice(second.stats.starttime, first.stats.endtime)
            np.testing.assert_array_equal(both.data, second.data[: both.stats.npts])


def test_record_lengths_and_steim2(archive):
    out, summary = archive
    damaged = by_path(summary, "damaged")
    assert set(summary["record_lengths"].values()) == {512, 4096}
    for entry in summary["file_list"]:
        raw = (out / entry["path"]).read_bytes()
        if damaged.get(entry["path"], {}).get("damage") == "flipped-bit-quality":
            continue  # its first record is no longer one
        records, left = record_walk(raw)
        station = entry["id"].rsplit(".", 1)[0]
        assert {r["record_length"] for r in records} == {summary["record_lengths"][station]}
        assert {r["record_length"] for r in records} == {entry["record_length"]}
        assert {r["encoding"] for r in records} == {STEIM2}
        assert left == 0 or entry["path"] in damaged
        if entry["path"] not in damaged:
            # Compression as on real broadband day files: 1 to 2.5 bytes per sample.
            assert 1.0 < len(raw) / entry["samples"] < 2.5, entry


def test_stationxml_matches_every_file(archive):
    out, summary = archive
    inventory = obspy.read_inventory(str(out / summary["inventory"]))
    mixed = by_path(summary, "mixed_rate")
    seen = set()
    for entry in summary["file_list"]:
        network, station, location, channel = entry["id"].split(".")
        found = inventory.select(network, station, location, channel)
        ((chan,),) = [[c for s in n for c in s] for n in found]
        seen.add(entry["id"])
        nominal = entry["rate"] * 2 if entry["path"] in mixed else entry["rate"]
        assert chan.sample_rate == nominal == RATE
        assert np.isfinite([chan.latitude, chan.longitude, chan.elevation]).all()
        assert chan.dip == (-90.0 if channel.endswith("Z") else 0.0)
        # A broadband velocity response: flat at 1 Hz at its stated sensitivity (counts/(m/s)).
        gains = abs(chan.response.get_evalresp_response_for_frequencies([0.1, 1.0], "VEL"))
        gain = gains[1]
        assert gains[0] == pytest.approx(gain, rel=0.05)  # flat from 0.1 Hz (a 120 s sensor)
        sensitivity = chan.response.instrument_sensitivity
        assert sensitivity.input_units == "M/S" and sensitivity.output_units == "COUNTS"
        assert gain == pytest.approx(sensitivity.value, rel=1e-3)
        assert sensitivity.value == pytest.approx(1500.0 * 4.0e5, rel=1e-3)  # sensor × digitiser
    assert len(seen) == 4 * 3 == len(inventory.get_contents()["channels"])


def test_same_bytes_whatever_the_number_of_processes(tmp_path):
    small = ["--stations", "2", "--days", "1", "--rate", "1", "--seed", "3"]
    for workers in ("1", "2"):
        make_archive("sds", str(tmp_path / workers), *small, "--workers", workers)
    one, two = (sorted((tmp_path / w / "sds").rglob("*")) for w in ("1", "2"))
    assert [p.relative_to(tmp_path / "1") for p in one] == [
        p.relative_to(tmp_path / "2") for p in two
    ]
    for a, b in zip(one, two, strict=True):
        assert a.is_dir() or a.read_bytes() == b.read_bytes()
    assert (tmp_path / "1" / "stations.xml").read_bytes() == (
        tmp_path / "2" / "stations.xml"
    ).read_bytes()


def test_too_many_anomalies_is_refused(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "sds", str(tmp_path / "x"), "--stations", "1",
         "--days", "1", "--rate", "1", "--damaged", "5"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "anomalous files asked" in result.stderr and "--damaged" in result.stderr
    assert not (tmp_path / "x" / "sds").exists()


def test_ingest_waveforms_reports_exactly_the_damaged_and_mixed_rate_files(archive, tmp_path):
    out, summary = archive
    store = tmp_path / "waveforms.zarr"
    result = run(*SEISCTF, "ingest", "waveforms", str(out / "sds"), "--inventory",
                 str(out / "stations.xml"), "--out", str(store), "--quiet")  # fmt: skip
    problems = [line for line in result.stdout.splitlines() if line.startswith("problem: ")]
    named = {line.split(": ")[1] for line in problems}
    expected = {str(out / e["path"]) for e in summary["damaged"] + summary["mixed_rate"]}
    assert named == expected and len(problems) == len(expected)
    group = zarr.open_group(str(store), mode="r")
    assert group.attrs["seisctf_complete"] is True
    stations = [str(s) for s in group["station"][:]]
    channels = [str(c) for c in group["channel"][:]]
    start = obspy.UTCDateTime(group.attrs["start_time"])
    assert stations == [f"XA.S{i:04d}.00" for i in range(4)]
    assert start == obspy.UTCDateTime("2024-01-01")
    data = group["data"]
    unusual = expected | {str(out / p) for p in by_path(summary, "gaps")}
    unusual |= {str(out / p) for p in by_path(summary, "overlaps")}
    for entry in summary["file_list"]:  # every plain file's counts, exactly
        path = str(out / entry["path"])
        network, station, location, channel = entry["id"].split(".")
        row = data[stations.index(f"{network}.{station}.{location}"), channels.index(channel)]
        (trace,) = read(Path(path)) if path not in unusual else [None]
        if trace is None:
            continue
        first = round((trace.stats.starttime - start) * RATE)
        np.testing.assert_array_equal(row[first : first + trace.stats.npts], trace.data)
    for entry in summary["mixed_rate"]:  # not ingested: NaN that day (no other file has it)
        network, station, location, channel = entry["id"].split(".")
        row = data[stations.index(f"{network}.{station}.{location}"), channels.index(channel)]
        day = obspy.UTCDateTime(read(out / entry["path"])[0].stats.starttime.date)
        first = round((day - start) * RATE)
        assert np.isnan(row[first : first + int(86400 * RATE)]).all()


def test_seisbench_dataset_opens_and_ingests(tmp_path):
    import seisbench.data as sbd

    logging.getLogger("seisbench").setLevel(logging.ERROR)
    folder = tmp_path / "sb"
    make_archive("seisbench", str(folder), "--windows", "300", "--samples", "3000",
                 "--rate", "100", "--chunks", "3", "--seed", "5", "--workers", "2")  # fmt: skip
    assert (folder / "chunks").read_text().split() == ["c000", "c001", "c002"]
    for chunk in ("c000", "c001", "c002"):
        assert (folder / f"metadata{chunk}.csv").is_file()
        assert (folder / f"waveforms{chunk}.hdf5").is_file()
    dataset = sbd.WaveformDataset(folder, cache=None)
    assert dataset.chunks == ["c000", "c001", "c002"] and len(dataset) == 300
    meta = dataset.metadata
    for column in ("trace_name", "station_network_code", "station_code", "trace_p_arrival_sample",
                   "trace_s_arrival_sample", "source_id", "source_origin_time",
                   "source_latitude_deg", "source_longitude_deg", "source_depth_km",
                   "source_magnitude", "split"):  # fmt: skip
        assert column in meta.columns and meta[column].notna().all(), column
    assert set(meta["split"]) == {"train", "dev", "test"}
    assert (meta.groupby("source_id")["split"].nunique() == 1).all()  # by event
    assert meta["trace_name_original"].is_unique
    p, s = meta["trace_p_arrival_sample"].to_numpy(), meta["trace_s_arrival_sample"].to_numpy()
    assert ((0 < p) & (p < s) & (s < 3000)).all()
    waves = dataset.get_waveforms(np.arange(300))
    assert waves.shape == (300, 3, 3000) and waves.dtype == np.float32
    # Arrivals: more energy in the second after P than in the second before it.
    before = np.array([waves[i, 0, p[i] - 100 : p[i]].std() for i in range(300)])
    after = np.array([waves[i, 0, p[i] : p[i] + 100].std() for i in range(300)])
    assert np.median(after / before) > 2
    store = tmp_path / "windows.zarr"
    printed = run(*SEISCTF, "ingest", "seisbench", str(folder), "--out", str(store), "--quiet")
    assert f"wrote {store}: 300 windows" in printed.stdout
    group = zarr.open_group(str(store), mode="r")
    np.testing.assert_array_equal(group["waveforms"][:], waves)
    np.testing.assert_array_equal(group["trace_p_arrival_sample"][:], p)
