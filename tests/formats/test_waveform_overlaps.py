"""`seisctf ingest waveforms` on overlapping copies of obspy's IU.ANMO minute (2018-001, 40 Hz)
whose samples disagree: each disagreement is a problem line naming both files, the channel,
the span, how many samples differ and by how much (numpy on obspy's reads), and whose samples
the store keeps; the stored samples are those of the copy the contract's merge rule names,
compared with obspy's own read of that file; identical overlaps stay silent; a file of which
nothing is stored says so in `inputs`, after an `--append` too."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import obspy
from test_waveforms import TSINDEX, _cli, _open

from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation

ANMO = TSINDEX / "IU/2018/001/IU.ANMO.10.BHZ.2018.001_first_minute.mseed"
ANMO_ID = "IU.ANMO.10.BHZ"
START = "2018-01-01T00:00:00.019500Z"  # the first sample (the grid's start)
END = "2018-01-01T00:00:59.994500Z"  # the last, 2399 samples later


def _counts(path: Path) -> np.ndarray:
    return obspy.read(str(path))[0].data.astype(np.float64)


def _doubled(path: Path) -> Path:
    """ANMO's minute with every count doubled, written by obspy."""
    stream = obspy.read(str(ANMO))
    stream[0].data = stream[0].data * 2
    stream.write(str(path), format="MSEED", encoding="STEIM2")
    return path


def _problems(stdout: str) -> list[str]:
    return [line.removeprefix("problem: ") for line in stdout.splitlines() if "problem:" in line]


def _line(dropped: Path, kept: Path, span: tuple[str, str, int], a, b) -> str:
    """The expected problem line; counts and largest difference from numpy."""
    return (
        f"{dropped}: {ANMO_ID} from {span[0]} to {span[1]} ({span[2]} samples) overlaps {kept} "
        f"with other values ({np.count_nonzero(a != b)} differ, by up to "
        f"{np.abs(a - b).max():g}); the store keeps {kept}'s samples there"
    )


def _not_stored(url: Path) -> list[str]:
    return [
        e["path"] for e in recorded_inputs(StoreLocation(url)) if e.get("samples_stored") is False
    ]


def test_two_copies_of_a_day_the_first_path_is_stored_and_the_other_reported(
    tmp_path, dask_cluster
):
    for first, second in (("a.mseed", "b-doubled.mseed"), ("0-doubled.mseed", "a.mseed")):
        folder = tmp_path / first.split(".")[0]
        folder.mkdir()
        original = Path(shutil.copy(ANMO, folder / ("a.mseed")))
        doubled = _doubled(folder / (first if "doubled" in first else second))
        out = tmp_path / f"{folder.name}.zarr"
        run = _cli(str(folder), "--out", str(out), scheduler=dask_cluster.address)
        assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
        kept, dropped = (folder / first, folder / second)  # the path sorting first wins
        expected = _line(dropped, kept, (START, END, 2400), _counts(dropped), _counts(kept))
        assert _problems(run.stdout) == [expected]
        assert "1 problem(s)" in run.stdout and _open(out).attrs["ingest_problems"] == [expected]
        stored = _open(out)["data"].values[0, 0]
        np.testing.assert_array_equal(stored, _counts(kept).astype(np.float32))
        assert not np.array_equal(_counts(original), _counts(doubled))
        assert _not_stored(out) == [str(dropped)]


def test_constant_values_inside_the_day_are_reported_and_an_identical_copy_is_silent(
    tmp_path, dask_cluster
):
    folder = tmp_path / "archive"
    folder.mkdir()
    day = Path(shutil.copy(ANMO, folder / "a.mseed"))
    shutil.copy(ANMO, folder / "c-identical-copy.mseed")
    flat = obspy.read(str(ANMO))[0].slice(
        obspy.UTCDateTime(START) + 10, obspy.UTCDateTime(START) + 19.975
    )
    flat.data = np.full(flat.stats.npts, 7, dtype=np.int32)  # a stuck digitizer: 400 samples
    flat.write(str(folder / "b-constant.mseed"), format="MSEED", encoding="STEIM2")
    out = tmp_path / "store.zarr"
    run = _cli(str(folder), "--out", str(out), scheduler=dask_cluster.address)
    assert run.returncode == 0, run.stderr
    inside = _counts(day)[400:800]
    span = ("2018-01-01T00:00:10.019500Z", "2018-01-01T00:00:19.994500Z", 400)
    # One line for the constant trace, not one per identical copy of the day it overlaps.
    assert _problems(run.stdout) == [
        _line(folder / "b-constant.mseed", day, span, np.full(400, 7.0), inside)
    ]
    np.testing.assert_array_equal(_open(out)["data"].values[0, 0], _counts(day))
    assert _not_stored(out) == [str(folder / "b-constant.mseed")]


def test_an_append_of_a_changed_copy_is_reported_and_not_claimed(tmp_path, dask_cluster):
    first = Path(shutil.copy(ANMO, tmp_path / "a.mseed"))
    changed = _doubled(tmp_path / "b-doubled.mseed")
    out = tmp_path / "store.zarr"
    address = dask_cluster.address
    assert _cli(str(first), "--out", str(out), scheduler=address).returncode == 0
    run = _cli(str(changed), "--out", str(out), "--append", scheduler=address)
    assert run.returncode == 0, run.stderr
    expected = _line(changed, first, (START, END, 2400), _counts(changed), _counts(first))
    assert _problems(run.stdout) == [expected]
    ds = _open(out)
    np.testing.assert_array_equal(ds["data"].values[0, 0], _counts(first).astype(np.float32))
    assert [e["path"] for e in recorded_inputs(StoreLocation(out))] == [str(first), str(changed)]
    assert _not_stored(out) == [str(changed)]  # listed, but as giving the store nothing
    assert ds.attrs["ingest_problems"] == [expected]

    # --strict: the disagreement is fatal, one line naming both files, nothing complete.
    strict = _cli(str(first), str(changed), "--out", str(tmp_path / "strict.zarr"), "--strict",
                  scheduler=address)  # fmt: skip
    assert strict.returncode == 3 and "Traceback" not in strict.stderr
    assert strict.stderr.strip().splitlines() == [
        f"seisctf: invalid input: --strict: 1 input problem(s): {expected}"
    ]
