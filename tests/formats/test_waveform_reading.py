"""`seisctf ingest waveforms` reads what `obspy.read` reads and says what is wrong in problem
lines, not on stderr: gzip and bzip2 files (made from obspy's IU.ANMO minute), libmseed's and
obspy's warnings on obspy's own damaged test files, float64 samples beyond float32's range, the
"no input is readable" message of more than five files; and the store's `data` carries CF
`units`."""

from __future__ import annotations

import bz2
import gzip
import shutil
from pathlib import Path

import numpy as np
import obspy
from test_waveforms import I59_DATA, I59_XML, OBSPY, TSINDEX, _cli, _open

from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation

ANMO = TSINDEX / "IU/2018/001/IU.ANMO.10.BHZ.2018.001_first_minute.mseed"
MSEED_DATA = OBSPY / "io/mseed/tests/data"


def _problems(stdout: str) -> list[str]:
    return [line.removeprefix("problem: ") for line in stdout.splitlines() if "problem:" in line]


def test_gzip_and_bzip2_files_are_read_as_obspy_reads_them(tmp_path, dask_cluster):
    compressed = {
        "anmo.mseed.gz": gzip.compress(ANMO.read_bytes(), mtime=0),
        "anmo.mseed.bz2": bz2.compress(ANMO.read_bytes()),
    }
    for name, raw in compressed.items():
        folder = tmp_path / name.replace(".", "-")
        folder.mkdir()
        path = folder / name
        path.write_bytes(raw)
        out = tmp_path / f"{folder.name}.zarr"
        run = _cli(str(path), "--out", str(out), scheduler=dask_cluster.address)
        assert run.returncode == 0 and run.stderr == "", run.stderr
        assert _problems(run.stdout) == []
        expected = obspy.read(str(path))[0]  # obspy decompresses by the name's suffix
        ds = _open(out)
        assert ds.attrs["start_time_ns"] == expected.stats.starttime.ns
        np.testing.assert_array_equal(ds["data"].values[0, 0], expected.data.astype(np.float32))
        assert recorded_inputs(StoreLocation(out))[0]["size"] == len(
            raw
        )  # the file's own bytes are hashed

    # A gzip file cut short is unreadable, said so by name (the good file is ingested).
    folder = tmp_path / "cut"
    folder.mkdir()
    shutil.copy(ANMO, folder / "good.mseed")
    (folder / "cut.mseed.gz").write_bytes(compressed["anmo.mseed.gz"][:900])
    run = _cli(str(folder), "--out", str(tmp_path / "cut.zarr"), scheduler=dask_cluster.address)
    assert run.returncode == 0, run.stderr
    assert _problems(run.stdout) == [
        f"{folder / 'cut.mseed.gz'}: unreadable (a damaged gzip file: Compressed file ended "
        "before the end-of-stream marker was reached)"
    ]


def test_reader_warnings_are_problem_lines_of_their_file(tmp_path, dask_cluster):
    """obspy's own damaged test files: libmseed's warnings and obspy's miniSEED header warning
    become problem lines of their file (repeats counted), and stderr stays empty."""
    lines = {
        "wrong_blockette_numbers_specified.mseed": [
            "libmseed warned: SK_MODS__HHZ_D: Warning: Number of blockettes in fixed header (2) "
            "does not match the number parsed (1) (and 15 more like it)"
        ],
        "record_with_invalid_word_order.mseed": [
            'reading it warned: Invalid word order "95" in blockette 1000 for record with ID '
            "IU.COR..LHZ at offset 0."
        ],
        "brokenlastrecord.mseed": [
            "truncated: the record at byte 4096 needs 4096 bytes, only 2206 remain (its samples "
            "are not ingested)",
            "libmseed warned: readMSEEDBuffer(): Not a SEED record. Will skip bytes 4096 to "
            "4223. (and 16 more like it)",
        ],
    }
    for name, expected in lines.items():
        path = Path(shutil.copy(MSEED_DATA / name, tmp_path / name))
        run = _cli(str(path), "--out", str(tmp_path / f"{name}.zarr"),
                   scheduler=dask_cluster.address)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert run.stderr == ""  # no InternalMSEEDWarning, no UserWarning
        assert _problems(run.stdout) == [f"{path}: {line}" for line in expected]
        assert _open(tmp_path / f"{name}.zarr").attrs["ingest_problems"] == _problems(run.stdout)


def test_samples_beyond_float32_are_gaps_not_infinities(tmp_path, dask_cluster):
    trace = obspy.read(str(ANMO))[0]
    counts = trace.data.astype(np.float64)
    trace.data = counts.copy()
    trace.data[[100, 101, 2000]] = [1e39, -3e39, 5e38]  # float64, beyond float32's 3.4e38
    path = tmp_path / "huge.mseed"
    trace.write(str(path), format="MSEED", encoding="FLOAT64")
    out = tmp_path / "huge.zarr"
    run = _cli(str(path), "--out", str(out), scheduler=dask_cluster.address)
    assert run.returncode == 0 and run.stderr == "", run.stderr  # no RuntimeWarning: overflow
    assert _problems(run.stdout) == [
        f"{path}: 3 non-finite sample(s) (NaN or Inf) or beyond float32's range (±3.4e38: 3 of "
        f"them) in IU.ANMO.10.BHZ, the first at {trace.stats.starttime + 100 / 40}; stored as "
        "gaps (NaN)"
    ]
    stored = _open(out)["data"].values[0, 0]
    expected = counts.astype(np.float32)
    expected[[100, 101, 2000]] = np.nan
    np.testing.assert_array_equal(stored, expected)  # NaN where they were, never ±Inf


def test_no_readable_input_names_five_files_and_how_many_more(tmp_path, dask_cluster):
    folder = tmp_path / "notes"
    folder.mkdir()
    for index in range(7):
        (folder / f"note{index}.mseed").write_text("not a seismogram\n" * 20)
    run = _cli(str(folder), "--out", str(tmp_path / "none.zarr"), scheduler=dask_cluster.address)
    assert run.returncode == 3 and "Traceback" not in run.stderr
    unknown = "unreadable (no obspy reader knows its format (miniSEED, SAC, GSE2, SEG-Y, …))"
    names = [str(folder / f"note{index}.mseed") for index in range(5)]
    assert run.stderr.strip().splitlines() == [
        f"seisctf: invalid input: {', '.join(names)}, and 2 more: no input is readable (none "
        "of the 7 file(s) given holds readable data): "
        + "; ".join(f"{name}: {unknown}" for name in names)
        + "; and 2 more"
    ]
    assert not (tmp_path / "none.zarr").exists()


def test_data_carries_cf_units(tmp_path, dask_cluster):
    """Counts without response removal (no inventory, or its COUNTS); pascal after removing
    the infrasound channel's response (its input unit PA, in UDUNITS' spelling)."""
    address = dask_cluster.address
    source = str(I59_DATA)
    for args, units, inventory_units in (
        ((), "count", None),
        (("--inventory", str(I59_XML)), "count", "COUNTS"),
        (("--inventory", str(I59_XML), "--remove-response"), "Pa", "PA"),
    ):
        out = tmp_path / f"{len(args)}.zarr"
        run = _cli(source, "--out", str(out), *args, scheduler=address)
        assert run.returncode == 0, run.stderr
        ds = _open(out)
        assert ds["data"].attrs["units"] == units
        channels = ds.attrs["channel_metadata"].get("IM.I59H1", {})
        assert channels.get("BDF", {}).get("units") == inventory_units


def test_each_thread_gets_the_warnings_of_its_own_file():
    """A worker with several threads scans several damaged files at once: the process lives
    (obspy's miniSEED reader, called from two threads at once, can die of a segmentation fault
    on these files: reads take turns), each file's problem lines are those it gets alone (the
    warning hook hands a warning to the thread that raised it), and warnings raised outside a
    scan are shown as before."""
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from seisctf.formats.obspy_archive.waveform_files import scan_file

    names = ["wrong_blockette_numbers_specified.mseed", "record_with_invalid_word_order.mseed",
             "brokenlastrecord.mseed", "various_noise_records.mseed"]  # fmt: skip
    paths = [str(MSEED_DATA / name) for name in names] * 20
    alone = {path: scan_file(path).problems for path in paths[: len(names)]}
    assert all(alone.values())
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda path: scan_file(path).problems, paths))
    assert together == [alone[path] for path in paths]
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        warnings.warn("outside any scan", UserWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["outside any scan"]


def _headers(stream) -> list[dict]:
    """Each trace's stats but `_format` (which `obspy.read` adds)."""
    return [{k: v for k, v in tr.stats.items() if k != "_format"} for tr in stream]


def test_mseed_read_from_the_bytes_as_obspy_reads_the_file_and_leaves_them_whole():
    """`read_stream` hands libmseed the bytes themselves (no copy): every miniSEED file obspy
    ships decodes, headers and samples, as `obspy.read` of the file does, and its bytes are
    unchanged after (libmseed writes nothing into its buffer)."""
    import hashlib
    import warnings

    from seisctf.formats.obspy_archive.waveform_files import is_mseed, read_stream

    paths = sorted(p for p in MSEED_DATA.rglob("*") if p.is_file() and p.stat().st_size)
    compared = 0
    for path in paths:
        data = path.read_bytes()
        digest = hashlib.sha256(data).digest()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = obspy.read(str(path), format="MSEED")
            except Exception:  # noqa: BLE001 - not miniSEED obspy reads: not compared
                continue
            for headonly in (True, False):
                stream = read_stream(data, headonly=headonly)
                assert is_mseed(data), path
                assert _headers(stream) == _headers(expected), path
                if not headonly:
                    for trace, other in zip(stream, expected, strict=True):
                        np.testing.assert_array_equal(trace.data, other.data, err_msg=str(path))
        assert hashlib.sha256(data).digest() == digest, path
        compared += 1
    assert compared >= 30


def test_a_little_endian_file_with_a_fractional_start_has_no_problem():
    """obspy reads a little-endian file's first record time big-endian first and warns of the
    fractional seconds it finds there: no problem of the file (its scan and its decode are
    clean, as the big-endian file's are). A record whose own fraction is out of range keeps
    its warning."""
    import io
    from dataclasses import replace

    from seisctf.formats.obspy_archive.waveform_files import read_file, scan_file

    def written(byteorder: str) -> bytes:
        start = obspy.UTCDateTime(2024, 1, 1, 0, 0, 0, 123456)  # fraction 1235, B1001 -44 µs
        trace = obspy.Trace(np.arange(5000, dtype=np.int32), header={
            "network": "XX", "station": "ABC", "channel": "HHZ", "sampling_rate": 40.0,
            "starttime": start})  # fmt: skip
        out = io.BytesIO()
        obspy.Stream([trace]).write(out, format="MSEED", reclen=512, byteorder=byteorder)
        return out.getvalue()

    little, big = written("<"), written(">")
    assert scan_file("le", little).problems == scan_file("be", big).problems == ()
    assert [replace(h, path="") for h in scan_file("le", little).headers] == [
        replace(h, path="") for h in scan_file("be", big).headers
    ]
    assert read_file("le", little)[2] == []  # the decode's warnings
    damaged = bytearray(little)
    damaged[28:30] = (12_000).to_bytes(2, "little")  # ten-thousandths: more than a second
    assert any("fractional seconds" in line for line in scan_file("le", bytes(damaged)).problems)
