"""Tests of `seisctf ingest das` on DAS files in vendor formats (PRODML, Terra15, Silixa H5) and
DASDAE, written by `das_vendor_files`: DASCore identifies each, and the store holds, value for
value (float32), what DASCore's own read of the same files gives, laid on one time grid with a
gap, an overlap (the later-starting file wins) and a sub-sample start offset."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import dascore as dc
import dask
import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import on_one_and_two_workers
from das_vendor_files import WRITERS, write_dasdae, write_prodml
from dask.callbacks import Callback

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.formats.das import das_files, das_inputs, das_runs
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation

START = np.datetime64("2024-01-02T03:04:05", "ns")
RATE = 50.0
STEP_NS = 20_000_000
CHANNELS = 12
BLOCK = 64
# (first grid sample, samples, start offset ns) per file: a 20-sample gap after file 0; file 2
# starts 6 ms (0.3 sample) after grid sample 240, so it overlaps file 1 by 30 samples.
LAYOUT = ((0, 150, 0), (170, 100, 0), (240, 120, 6_000_000))
QUANTITY = {"PRODML": "strain_rate", "TERRA15": "strain_rate", "Silixa_H5": "raw",
            "DASDAE": "strain_rate"}  # fmt: skip
GAUGE = {"PRODML": 10.0, "TERRA15": 8.0, "Silixa_H5": 10.0, "DASDAE": 10.0}
SPACING = {"PRODML": 1.0, "TERRA15": 2.0, "Silixa_H5": 1.0, "DASDAE": 1.0}


def write_series(folder: Path, fmt: str, seed: int = 0, layout=LAYOUT, **options) -> list[Path]:
    """Files of one format laid out as `layout`, random float64 values (float32 where the
    format stores float32)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for index, (first, samples, offset_ns) in enumerate(layout):
        start = START + np.timedelta64(first * STEP_NS + offset_ns, "ns")
        data = rng.standard_normal((samples, CHANNELS))
        path = folder / f"{fmt.lower()}_{seed}_{index}.h5"
        files.append(WRITERS[fmt](path, data, start, RATE, **options))
    return files


def dascore_expected(files: list[Path]) -> tuple[int, np.ndarray, np.ndarray]:
    """Independent expectation from DASCore's own reads: (grid start ns, values time × distance
    float32 with NaN where no file has data, distance). Each file's samples start at its nearest
    grid sample; in an overlap the later-starting file wins."""
    patches = [dc.read(str(path))[0].transpose("time", "distance") for path in files]
    time = [patch.get_coord("time") for patch in patches]
    starts = [int(np.datetime64(c.min(), "ns").astype(np.int64)) for c in time]
    step = int(np.timedelta64(time[0].step, "ns").astype(np.int64))
    firsts = [int(np.floor((start - min(starts)) / step + 0.5)) for start in starts]
    n_time = max(first + patch.data.shape[0] for first, patch in zip(firsts, patches, strict=True))
    values = np.full((n_time, patches[0].data.shape[1]), np.nan, dtype=np.float32)
    for first, _, patch in sorted(zip(firsts, [str(f) for f in files], patches, strict=True)):
        values[first : first + patch.data.shape[0]] = np.asarray(patch.data).astype(np.float32)
    return min(starts), values, patches[0].get_coord("distance").values


def _open(url: Path | str, **kwargs) -> xr.Dataset:
    ds = xr.open_zarr(str(url), consolidated=True, **kwargs)
    assert ds.attrs[cv.ATTR_COMPLETE] is True
    return ds


def _assert_store_equals_dascore(url: Path, files: list[Path]) -> xr.Dataset:
    ds = _open(url)
    variable = cv.validate_das_store(ds)
    start_ns, expected, distance = dascore_expected(files)
    assert ds.attrs["start_time_ns"] == start_ns
    stored = ds[variable].values
    assert stored.dtype == np.float32 and ds[variable].dims == cv.DAS_DIMS
    np.testing.assert_array_equal(stored, expected)  # NaN where NaN, bit for bit elsewhere
    np.testing.assert_allclose(ds[cv.DISTANCE].values, distance, rtol=0, atol=1e-9)
    block = ds.attrs["block_samples"]
    fractions = [
        np.isfinite(expected[i : i + block]).mean() for i in range(0, len(expected), block)
    ]
    np.testing.assert_allclose(ds[cv.DAS_COVERAGE_VAR].values, fractions, rtol=1e-6)
    return ds


@pytest.mark.parametrize("fmt", ["PRODML", "TERRA15", "Silixa_H5", "DASDAE"])
def test_vendor_files_ingest_as_dascore_reads_them_with_gap_overlap_and_offset(tmp_path, fmt):
    files = write_series(tmp_path / "files", fmt)
    assert all(dc.get_format(str(path))[0] == fmt for path in files)
    out = tmp_path / "store.zarr"
    report = ingest_das(
        [str(tmp_path / "files")], StoreLocation(out), block_samples=BLOCK, quiet=True
    )
    assert report.problems == ()
    ds = _assert_store_equals_dascore(out, files)
    assert cv.das_variable(ds) == QUANTITY[fmt] == ds.attrs[cv.ATTR_QUANTITY]
    assert ds.sizes == {"time": 360, "distance": CHANNELS, "block": 6}
    attrs = ds.attrs
    assert attrs[cv.ATTR_SAMPLING_RATE] == RATE and abs(attrs["time_step_ns"] - STEP_NS) <= 2
    assert attrs[cv.ATTR_START_TIME] == "2024-01-02T03:04:05Z"
    assert attrs[cv.ATTR_GAUGE_LENGTH] == GAUGE[fmt]
    assert attrs[cv.ATTR_CHANNEL_SPACING] == SPACING[fmt]
    assert attrs[cv.ATTR_UNITS] == ("" if fmt == "Silixa_H5" else "1 / s")
    assert attrs[cv.ATTR_INTERROGATOR].startswith(fmt)
    assert [(g["first_sample"], g["samples"], g["before"]) for g in attrs["gaps"]] == [
        (150, 20, str(files[1]))
    ]
    assert [(o["first_sample"], o["samples"], o["kept"]) for o in attrs["overlaps"]] == [
        (240, 30, str(files[2]))
    ]
    placed = das_inputs.read_recorded(StoreLocation(out)).placed
    offsets = {found.patch.path: found.offset_s for found in placed}
    assert offsets == pytest.approx({str(files[0]): 0, str(files[1]): 0, str(files[2]): 0.006},
                                    abs=1e-6)  # fmt: skip
    assert recorded_inputs(StoreLocation(out)) == [
        {"path": str(path), "size": path.stat().st_size,
         "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        for path in files
    ]  # fmt: skip
    assert ds[QUANTITY[fmt]].encoding["chunks"] == (BLOCK, CHANNELS)
    again = ingest_das(
        [str(path) for path in files], StoreLocation(out), block_samples=BLOCK, quiet=True
    )
    assert again.up_to_date


def test_differing_rate_or_channels_are_problems_and_strict_is_fatal(tmp_path):
    """PRODML and DASDAE files on one axis make one store (both interrogators named); a file at
    another rate and one with other channels are problems, not ingested."""
    folder = tmp_path / "files"
    prodml = write_series(folder, "PRODML", layout=LAYOUT[:2])
    dasdae = write_series(folder, "DASDAE", seed=1, layout=LAYOUT[2:])
    rng = np.random.default_rng(5)
    late = START + np.timedelta64(1000 * STEP_NS, "ns")
    slow = write_prodml(folder / "slow.h5", rng.standard_normal((50, CHANNELS)), late, 25.0)
    narrow = write_dasdae(folder / "narrow.h5", rng.standard_normal((50, 8)), late, RATE)
    out = tmp_path / "store.zarr"
    report = ingest_das([str(folder)], StoreLocation(out), block_samples=BLOCK, quiet=True)
    assert len(report.problems) == 2
    assert f"{slow}: patch 0: time step 0.04 s (25 Hz) differs" in report.problems[1]
    assert f"{narrow}: patch 0: distance axis (8 channels" in report.problems[0]
    ds = _assert_store_equals_dascore(out, prodml + dasdae)
    assert ds.attrs[cv.ATTR_INTERROGATOR] == "DASDAE 1; PRODML 2.1"
    assert ds.attrs["ingest_problems"] == list(report.problems)

    with pytest.raises(InvalidInput, match="2 input problem") as error:
        ingest_das([str(folder)], StoreLocation(tmp_path / "strict.zarr"), strict=True, quiet=True)
    assert str(slow) in error.value.problem and str(narrow) in error.value.problem
    assert not (tmp_path / "strict.zarr").exists()


def _corrupt_first_chunk(path: Path) -> None:
    """Zero the bytes of RawData's first (gzip) chunk: the headers stay readable."""
    with h5py.File(path, "r") as handle:
        info = handle["Acquisition/Raw[0]/RawData"].id.get_chunk_info(0)
    raw = bytearray(path.read_bytes())
    raw[info.byte_offset : info.byte_offset + info.size] = bytes(info.size)
    path.write_bytes(bytes(raw))


def _bad_folder(root: Path) -> dict[str, Path]:
    """A good PRODML file, then one whose first data chunk is damaged, and files DASCore cannot
    identify: random bytes, a truncated HDF5 file, an HDF5 file of another kind."""
    rng = np.random.default_rng(3)
    root.mkdir(parents=True)
    good = write_prodml(root / "a_good.h5", rng.standard_normal((100, CHANNELS)), START, RATE)
    later = START + np.timedelta64(100 * STEP_NS, "ns")
    damaged = write_prodml(root / "b_damaged.h5", rng.standard_normal((100, CHANNELS)), later,
                           RATE, chunks=(50, CHANNELS), compression="gzip")  # fmt: skip
    _corrupt_first_chunk(damaged)
    junk = root / "c_junk.h5"
    junk.write_bytes(rng.bytes(4000))
    truncated = root / "d_truncated.h5"
    truncated.write_bytes(good.read_bytes()[:3000])
    other = root / "e_other.h5"
    with h5py.File(other, "w") as handle:
        handle["waveform"] = np.arange(10)
    return {"good": good, "damaged": damaged, "junk": junk, "truncated": truncated,
            "other": other}  # fmt: skip


def test_bad_files_are_problems_by_name_and_good_data_kept(tmp_path):
    files = _bad_folder(tmp_path / "bad")
    out = tmp_path / "store.zarr"
    report = ingest_das(
        [str(tmp_path / "bad")], StoreLocation(out), block_samples=BLOCK, quiet=True
    )
    text = "\n".join(report.problems)
    assert f"{files['junk']}: not a DAS file DASCore knows" in text
    assert f"{files['truncated']}: corrupt HDF5 file (h5py:" in text
    assert f"{files['other']}: HDF5 file in no DAS format DASCore knows" in text
    # The damaged chunk holds the file's samples 0-49: blocks 1 and 2 read some of them.
    for span in ("0-28", "28-92"):
        assert f"{files['damaged']}: DASCore cannot read samples {span} of patch 0" in text
    ds = _open(out)
    values = ds["strain_rate"].values
    good = dc.read(str(files["good"]))[0].transpose("time", "distance").data
    np.testing.assert_array_equal(values[:100], good.astype(np.float32))
    assert np.isnan(values[100:192]).all()
    readable = dc.read(str(files["damaged"]), time=(START + np.timedelta64(3840, "ms"), None))
    np.testing.assert_array_equal(values[192:], readable[0].data.astype(np.float32))
    assert ds.attrs["ingest_problems"] == list(report.problems)
    # Damaged data shows only when read: fatal with --strict, the store never marked complete.
    strict = tmp_path / "strict.zarr"
    with pytest.raises(InvalidInput, match="2 input problem") as error:
        ingest_das(
            [str(files["good"]), str(files["damaged"])],
            StoreLocation(strict),
            strict=True,
            block_samples=BLOCK,
            quiet=True,
        )
    assert str(files["damaged"]) in error.value.problem
    assert cv.ATTR_COMPLETE not in zarr.open_group(str(strict)).attrs


def _cli(*args: str, scheduler: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "das", *args]
    return subprocess.run(
        [*command, "--scheduler", scheduler, "--quiet"], capture_output=True, text=True, timeout=120
    )


def test_cli_bad_inputs_exit_3_naming_the_file(tmp_path, dask_cluster):
    files = _bad_folder(tmp_path / "bad")
    address = dask_cluster.address
    strict = _cli(str(tmp_path / "bad"), "--out", str(tmp_path / "s.zarr"), "--strict",
                  scheduler=address)  # fmt: skip
    assert strict.returncode == 3, strict.stderr
    assert "Traceback" not in strict.stderr
    for name in ("junk", "truncated", "other"):
        assert str(files[name]) in strict.stderr
    assert not (tmp_path / "s.zarr").exists()

    lenient = _cli(str(files["good"]), str(files["junk"]), "--out", str(tmp_path / "l.zarr"),
                   scheduler=address)  # fmt: skip
    assert lenient.returncode == 0, lenient.stderr
    assert f"problem: {files['junk']}: not a DAS file" in lenient.stdout
    assert "wrote" in lenient.stdout and "strain_rate 100 samples x 12 channels" in lenient.stdout

    nothing = _cli(str(files["truncated"]), "--out", str(tmp_path / "n.zarr"), scheduler=address)
    assert nothing.returncode == 3 and "Traceback" not in nothing.stderr
    assert f"{files['truncated']}: no input is readable" in nothing.stderr
    assert "corrupt HDF5" in nothing.stderr


def _chunk_files(url: Path, variable: str = "strain_rate") -> dict[str, tuple[str, int]]:
    """{path in the store: (sha256, mtime_ns)} of every chunk file of the variable."""
    return {
        str(path.relative_to(url)): (
            hashlib.sha256(path.read_bytes()).hexdigest(),
            path.stat().st_mtime_ns,
        )  # fmt: skip
        for path in sorted((url / variable / "c").rglob("*"))
        if path.is_file()
    }


def _digest(url: Path, skip: tuple[Path, ...] = (), tables: bool = True) -> str:
    """sha256 of every file of the store (`tables` false: not those of its inputs tables)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in url.rglob("*") if p.is_file() and p not in skip):
        name = str(path.relative_to(url))
        if tables or not name.startswith("inputs"):
            digest.update(name.encode() + path.read_bytes())
    return digest.hexdigest()


class _MoveAwayAfter(Callback):
    """Once `after` run tasks have finished, move the folder away (the later run tasks then
    fail to read their files, as on a lost mount)."""

    def __init__(self, after: int, folder: Path, elsewhere: Path):
        super().__init__()
        self.after, self.folder, self.elsewhere, self.finished = after, folder, elsewhere, 0

    def _posttask(self, key, result, dsk, state, worker_id):
        name = key[0] if isinstance(key, tuple) else key
        if str(name).startswith("ingest_das_run"):
            self.finished += 1
            if self.finished == self.after:
                self.folder.rename(self.elsewhere)


class _Started(Callback):
    """Counts the tasks run whose key names `function`."""

    def __init__(self, function: str):
        super().__init__()
        self.function, self.count = function, 0

    def _pretask(self, key, dsk, state):
        name = key[0] if isinstance(key, tuple) else key
        self.count += str(name).startswith(f"{self.function}-")


def test_interrupted_ingest_resumes_to_identical_bytes(tmp_path):
    folder = tmp_path / "files"
    files = write_series(folder, "PRODML")
    whole, out = tmp_path / "whole.zarr", tmp_path / "resumed.zarr"
    ingest_das([str(folder)], StoreLocation(whole), block_samples=BLOCK, quiet=True)
    with dask.config.set(scheduler="synchronous"), _MoveAwayAfter(2, folder, tmp_path / "moved"):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            ingest_das([str(folder)], StoreLocation(out), block_samples=BLOCK, quiet=True)
    group = zarr.open_group(str(out))
    assert cv.ATTR_COMPLETE not in group.attrs
    assert (group["ingest_progress"][:] != "").sum() == 2
    before = _chunk_files(out)
    assert len(before) == 2
    (tmp_path / "moved").rename(folder)
    with _Started("scan_das_files") as scans:  # the inputs table has every unchanged file's
        report = ingest_das([str(folder)], StoreLocation(out), block_samples=BLOCK, quiet=True)
    assert not report.up_to_date and scans.count == 0
    _assert_store_equals_dascore(out, files)
    after = _chunk_files(out)
    assert all(after[name] == before[name] for name in before)  # not rewritten: same mtime_ns
    assert _digest(out) == _digest(whole)  # every byte, attrs and metadata included
    assert "ingest_progress" not in zarr.open_group(str(out))


def test_runs_of_several_blocks_resume_to_the_bytes_of_one_block_runs(tmp_path, monkeypatch):
    """43 blocks of 8 samples with data (2 of the 45 fall in the gap) in runs of 10 (MIN_RUNS
    4): a task and a record a run, each record holding its blocks' coverage; interrupted after
    2 runs, the re-run writes the other 3 and the store is, byte for byte, the one written in
    runs of one block (MIN_RUNS 45) and what DASCore reads."""
    folder = tmp_path / "files"
    files = write_series(folder, "PRODML")
    single, out = tmp_path / "single.zarr", tmp_path / "runs.zarr"
    monkeypatch.setattr(das_runs, "MIN_RUNS", 45)
    ingest_das([str(folder)], StoreLocation(single), block_samples=8, quiet=True)
    monkeypatch.setattr(das_runs, "MIN_RUNS", 4)
    with dask.config.set(scheduler="synchronous"), _MoveAwayAfter(2, folder, tmp_path / "moved"):
        with pytest.raises(InvalidInput, match="re-run to resume"):
            ingest_das([str(folder)], StoreLocation(out), block_samples=8, quiet=True)
    progress = zarr.open_group(str(out))["ingest_progress"][:]
    done = {number: json.loads(record) for number, record in enumerate(progress) if record}
    assert len(progress) == 5 and len(done) == 2  # runs of 10, 10, 10, 10 and 3 blocks
    assert all(len(record["coverage"]) == (3 if n == 4 else 10) for n, record in done.items())
    (tmp_path / "moved").rename(folder)
    with _Started("ingest_das_run") as runs:
        ingest_das([str(folder)], StoreLocation(out), block_samples=8, quiet=True)
    assert runs.count == 3
    _assert_store_equals_dascore(out, files)
    assert _digest(out, skip=(out / "zarr.json",)) == _digest(single, skip=(single / "zarr.json",))


class _RunGraphs(Callback):
    """The number of `ingest_das_run` tasks of each graph computed."""

    def __init__(self):
        super().__init__()
        self.runs: list[int] = []

    def _start(self, dsk):
        runs = sum(str(key[0] if isinstance(key, tuple) else key).startswith("ingest_das_run")
                   for key in dsk)  # fmt: skip
        if runs:
            self.runs.append(runs)


def _run_waves(tmp_path, monkeypatch, limit: str, value: int) -> list[int]:
    """The `ingest_das_run` tasks of each wave of an ingest of the PRODML series at 8 samples a
    block (43 blocks in 22 runs of 2, the last 1) with `das_files.<limit>` = `value`; the
    store must be DASCore's read."""
    folder = tmp_path / "files"
    files = write_series(folder, "PRODML")
    monkeypatch.setattr(das_files, limit, value)
    out = tmp_path / "store.zarr"
    with _RunGraphs() as graphs:
        ingest_das([str(folder)], StoreLocation(out), block_samples=8, quiet=True)
    _assert_store_equals_dascore(out, files)
    return graphs.runs


def test_runs_go_in_waves_of_at_most_max_tasks_per_wave_blocks(tmp_path, monkeypatch):
    """With MAX_TASKS_PER_WAVE 8, waves of 4 runs."""
    runs = _run_waves(tmp_path, monkeypatch, "MAX_TASKS_PER_WAVE", 8)
    assert runs == [4, 4, 4, 4, 4, 2]


def test_runs_go_in_waves_of_at_most_max_pieces_per_wave_pieces(tmp_path, monkeypatch):
    """With at most 3 pieces a wave: each run of 2 blocks paints 2 to 4 pieces (a block where
    two files meet has two), so no wave holds more than one or two runs."""
    runs = _run_waves(tmp_path, monkeypatch, "MAX_PIECES_PER_WAVE", 3)
    assert sum(runs) == 22 and len(runs) >= 11 and max(runs) <= 2


def test_append_extends_time_and_keeps_old_chunks(tmp_path):
    first = write_series(tmp_path / "day1", "PRODML", seed=1, layout=((0, 150, 0), (150, 150, 0)))
    second = write_series(tmp_path / "day2", "PRODML", seed=2,
                          layout=((280, 100, 0), (400, 90, 4_000_000)))  # fmt: skip
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    ingest_das([str(tmp_path / "day1")], StoreLocation(appended), block_samples=BLOCK, quiet=True)
    before = _chunk_files(appended)
    assert len(before) == 5  # 300 samples: blocks 0-3 and 44 samples of block 4
    # An append interrupted after one block leaves an unfinished store; appending again resumes.
    with dask.config.set(scheduler="synchronous"):
        with _MoveAwayAfter(1, tmp_path / "day2", tmp_path / "moved"):
            with pytest.raises(InvalidInput, match="re-run to resume"):
                ingest_das(
                    [str(tmp_path / "day2")], StoreLocation(appended), append=True, quiet=True
                )
    assert zarr.open_group(str(appended)).attrs[cv.ATTR_COMPLETE] is False
    (tmp_path / "moved").rename(tmp_path / "day2")
    with pytest.raises(InvalidInput, match="interrupted append of other files"):
        ingest_das([str(second[0])], StoreLocation(appended), append=True, quiet=True)
    report = ingest_das([str(tmp_path / "day2")], StoreLocation(appended), append=True, quiet=True)
    assert not report.up_to_date and report.plan.n_time == 490
    ingest_das(
        [str(tmp_path / "day1"), str(tmp_path / "day2")],
        StoreLocation(whole),
        block_samples=BLOCK,
        quiet=True,
    )
    ds = _assert_store_equals_dascore(appended, first + second)
    reference = _open(whole)
    # The same attrs (gaps, overlaps, fingerprint), and the append's table, written beside the
    # first one, named: the same inputs and patches as the one-shot ingest's table.
    assert ds.attrs.pop("inputs_table") == "inputs_next"
    assert ds.attrs == reference.attrs
    assert len(ds.attrs["gaps"]) == 1 and len(ds.attrs["overlaps"]) == 1
    assert das_inputs.read_recorded(StoreLocation(appended)) == das_inputs.read_recorded(
        StoreLocation(whole)
    )
    assert recorded_inputs(StoreLocation(appended)) == recorded_inputs(StoreLocation(whole))
    assert not (appended / "inputs").exists()  # the first table, dropped when finished
    assert _digest(appended, (appended / "zarr.json",), tables=False) == _digest(
        whole, (whole / "zarr.json",), tables=False
    )
    after = _chunk_files(appended)
    rewritten = {name for name in before if after[name] != before[name]}
    assert rewritten == {"strain_rate/c/4/0"}  # the partial block the new files complete

    assert ingest_das([str(second[0])], StoreLocation(appended), append=True, quiet=True).up_to_date
    early = write_prodml(tmp_path / "early.h5", np.ones((10, CHANNELS)),
                         START - np.timedelta64(1, "s"), RATE)  # fmt: skip
    with pytest.raises(InvalidInput, match="starts before the store") as error:
        ingest_das([str(early)], StoreLocation(appended), append=True, quiet=True)
    assert error.value.what == str(early)
    write_prodml(first[1], np.zeros((150, CHANNELS)), START + np.timedelta64(3, "s"), RATE)
    later = write_prodml(tmp_path / "later.h5", np.ones((10, CHANNELS)),
                         START + np.timedelta64(5, "s"), RATE)  # fmt: skip
    with pytest.raises(InvalidInput, match="changed since it was ingested") as error:
        ingest_das(
            [str(later)], StoreLocation(whole), append=True, quiet=True
        )  # reads block 4 again
    assert error.value.what == str(first[1])
    with pytest.raises(InvalidInput, match="needs an existing store"):
        ingest_das([str(later)], StoreLocation(tmp_path / "none.zarr"), append=True, quiet=True)


def test_one_and_two_workers_write_identical_bytes(tmp_path):
    files = write_series(tmp_path / "files", "TERRA15")

    def digest(root: Path) -> str:
        out = root / "store.zarr"
        ingest_das(
            [str(path) for path in files], StoreLocation(out), block_samples=BLOCK, quiet=True
        )
        _assert_store_equals_dascore(out, files)
        return _digest(out, skip=(out / "zarr.json",))  # its attrs hold this run's tmp_path

    one, two = on_one_and_two_workers(digest, tmp_path)
    assert one == two


def test_s3_inputs_and_store_give_the_bytes_of_local_ones(
    tmp_path, s3_server, s3_bucket, dask_cluster
):
    from distributed import Client

    files = write_series(tmp_path / "files", "PRODML") + write_series(
        tmp_path / "files", "PRODML", seed=9, layout=((500, 80, 0),)
    )
    fs = s3_server.filesystem()
    fs.invalidate_cache()
    bucket = s3_bucket.removeprefix("s3://")
    for path in files:
        fs.put_file(str(path), f"{bucket}/files/{path.name}")
    local = tmp_path / "local.zarr"
    ingest_das([str(tmp_path / "files")], StoreLocation(local), block_samples=BLOCK, quiet=True)
    remote = f"{s3_bucket}/store.zarr"
    with Client(dask_cluster.address):
        report = ingest_das(
            [f"{s3_bucket}/files/"],
            StoreLocation(remote, s3_server.storage_options),
            block_samples=BLOCK,
            quiet=True,
        )
    assert report.problems == ()
    ds = _open(remote, storage_options=s3_server.storage_options)
    assert ds.attrs["ingest_fingerprint"] == _open(local).attrs["ingest_fingerprint"]
    assert [
        e["path"] for e in recorded_inputs(StoreLocation(remote, s3_server.storage_options))
    ] == [f"{s3_bucket}/files/{path.name}" for path in files]
    objects = {
        name.removeprefix(f"{bucket}/store.zarr/"): fs.cat(name)
        for name in fs.find(f"{bucket}/store.zarr")
    }
    local_files = {
        str(p.relative_to(local)): p.read_bytes() for p in local.rglob("*") if p.is_file()
    }
    assert objects.keys() == local_files.keys()
    for name, content in local_files.items():
        if name != "zarr.json" and not name.startswith("inputs/"):  # the inputs' paths differ
            assert objects[name] == content, name
    expected = dascore_expected(files)[1]
    np.testing.assert_array_equal(ds["strain_rate"].values, expected)
    shutil.rmtree(local)
