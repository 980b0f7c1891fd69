"""The inputs of a DAS store in a table beside its data (`das_inputs`), and each input byte read
once: through `seisctf ingest das` on DAS files written by `das_vendor_files`, the root
`zarr.json` does not grow with the files, a re-run reads no unchanged file, an append scans its
new files only, a store written before the table still reads and appends, and the bytes read
from S3 (SeaweedFS's own count) are the input bytes, on 2 workers."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from das_vendor_files import write_prodml
from s3_metrics import bucket_sent_bytes, metrics_options
from servers import S3_KEY, start_s3, stop_s3
from test_das_ingest import RATE, START, STEP_NS, dascore_expected, write_series

from seisctf.formats.das import das_inputs
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.location import StoreLocation

SCAN_LINE = re.compile(r"^scan DAS files: (\d+) tasks?\b", re.MULTILINE)
BUCKET = "das-reads"
# Contiguous files of 100 samples: no gap or overlap to list in the attrs.
SAMPLES = 100


def _contiguous(folder: Path, count: int, first: int = 0, seed: int = 0) -> list[Path]:
    """`count` PRODML files of SAMPLES samples each, end to end, the first at file `first`."""
    layout = tuple(((first + i) * SAMPLES, SAMPLES, 0) for i in range(count))
    files = write_series(folder, "PRODML", seed=seed, layout=layout)
    return [path.rename(folder / f"f{first + i:03d}.h5") for i, path in enumerate(files)]


def _ingest(*args: str, scheduler: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`seisctf ingest das ARGS` with its progress lines (stderr), which must succeed."""
    command = [
        sys.executable,
        "-m",
        "seisctf.cli",
        "ingest",
        "das",
        *args,
        "--scheduler",
        scheduler,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def _scans(done: subprocess.CompletedProcess) -> list[int]:
    """The task count of each of the scan's progress lines (`scan DAS files: N tasks done in
    …`, or `… N tasks … done in …` when announced while running): a file a task here."""
    return [int(found) for found in SCAN_LINE.findall(done.stderr)]


def _data(store: Path) -> dict[str, bytes]:
    """The bytes of every chunk of the variable and `distance`, and the coverage values."""
    found = {
        str(path.relative_to(store)): path.read_bytes()
        for folder in ("strain_rate", "distance")
        for path in sorted((store / folder).rglob("*"))
        if path.is_file()
    }
    return {**found, "coverage": zarr.open_group(str(store), mode="r")["coverage"][:].tobytes()}


def _manifest(files: list[Path]) -> list[dict]:
    """path, size and sha256 of each file, computed here."""
    digests = [hashlib.sha256(path.read_bytes()).hexdigest() for path in files]
    return [
        {"path": str(path), "size": path.stat().st_size, "sha256": digest}
        for path, digest in zip(files, digests, strict=True)
    ]


def test_the_root_metadata_does_not_grow_with_the_files(tmp_path, dask_cluster):
    sizes = {}
    for count in (2, 12):
        files = _contiguous(tmp_path / f"in{count}", count)
        out = tmp_path / f"s{count}.zarr"
        _ingest(str(tmp_path / f"in{count}"), "--out", str(out), "--quiet",
                scheduler=dask_cluster.address)  # fmt: skip
        assert recorded_inputs(StoreLocation(out)) == _manifest(files)
        np.testing.assert_array_equal(
            zarr.open_group(str(out))["strain_rate"][:], dascore_expected(files)[1]
        )
        attrs = json.loads((out / "zarr.json").read_text())["attributes"]
        assert not {"inputs", "segments", "time_offsets_s"} & attrs.keys()
        sizes[count] = (out / "zarr.json").stat().st_size
    # 10 more files: the arrays' shapes gain a digit; a file in the attrs took ~1 KB
    # (its `inputs` entry, its `segments` entry, its `time_offsets_s`).
    assert sizes[12] - sizes[2] < 100, sizes


def test_a_rerun_reads_no_file_whose_size_and_mtime_are_unchanged(tmp_path, dask_cluster):
    folder = tmp_path / "in"
    files = _contiguous(folder, 3)
    out = tmp_path / "s.zarr"
    first = _ingest(str(folder), "--out", str(out), scheduler=dask_cluster.address)
    assert len(_scans(first)) == 1  # one scan (of the folder's listing by tasks: its tasks too)
    written = _data(out)
    # Other bytes of the same size and mtime in every file: a run that read one would see
    # another sha256 (and no DAS file at all).
    originals = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files}
    rng = np.random.default_rng(1)
    for path, (raw, mtime_ns) in originals.items():
        path.write_bytes(rng.bytes(len(raw)))
        os.utime(path, ns=(mtime_ns, mtime_ns))
    again = _ingest(str(folder), "--out", str(out), scheduler=dask_cluster.address)
    assert f"up to date: {out}" in again.stdout
    assert _scans(again) == []  # no scan task at all
    assert _data(out) == written
    # A file whose mtime changed is read again (its bytes as ingested: still up to date).
    raw, mtime_ns = originals[files[1]]
    files[1].write_bytes(raw)
    os.utime(files[1], ns=(mtime_ns + 10**9, mtime_ns + 10**9))
    touched = _ingest(str(folder), "--out", str(out), scheduler=dask_cluster.address)
    assert f"up to date: {out}" in touched.stdout
    assert _scans(touched) == [1]


def test_an_append_scans_only_its_new_files(tmp_path, dask_cluster):
    """Two files in one partial block (12 channels: blocks of 87,381 samples): appending a
    third rewrites that block (reading the old files' pieces again) and scans the new file
    alone."""
    layout = ((0, 150, 0), (150, 150, 0), (300, 120, 0), (420, 50, 0))
    files = write_series(tmp_path / "all", "PRODML", seed=3, layout=layout)
    for path in files[:2]:
        (tmp_path / "old").mkdir(exist_ok=True)
        path.rename(tmp_path / "old" / path.name)
    old = sorted((tmp_path / "old").iterdir())
    new = sorted((tmp_path / "all").iterdir())
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    address = dask_cluster.address
    _ingest(str(tmp_path / "old"), "--out", str(appended), scheduler=address)
    one = _ingest(str(new[0]), "--out", str(appended), "--append", scheduler=address)
    assert _scans(one) == [1]
    assert "wrote" in one.stdout
    _ingest(str(tmp_path / "old"), str(tmp_path / "all"), "--out", str(whole), "--quiet",
            scheduler=address)  # fmt: skip
    assert _data(appended) != _data(whole)  # one file still to come
    two = _ingest(str(tmp_path / "all"), "--out", str(appended), "--append", scheduler=address)
    assert _scans(two) == [1]  # the one not in the store yet
    assert _data(appended) == _data(whole)
    assert (
        recorded_inputs(StoreLocation(appended))
        == recorded_inputs(StoreLocation(whole))
        == _manifest(sorted(old + new))
    )
    assert das_inputs.read_recorded(StoreLocation(appended)) == das_inputs.read_recorded(
        StoreLocation(whole)
    )


def _as_written_before_the_table(store: Path) -> list[dict]:
    """Turn a store into one as ingests wrote them before the inputs table: its inputs, patches
    and offsets in the root attrs, no table. Returns the attr `inputs`."""
    recorded = das_inputs.read_recorded(StoreLocation(store))
    inputs = recorded_inputs(StoreLocation(store))
    segments = [
        {**p.patch.to_json(), "first_index": p.first_index, "time_offset_s": p.offset_s}
        for p in recorded.placed
    ]
    offsets = {p.patch.path: [round(p.offset_s, 9)] for p in recorded.placed}
    group = zarr.open_group(str(store), mode="r+", use_consolidated=False)
    del group["inputs"]
    group.attrs.update({"inputs": inputs, "segments": segments, "time_offsets_s": offsets})
    zarr.consolidate_metadata(group.store)
    return inputs


def test_a_store_written_before_the_table_reads_and_appends(tmp_path, dask_cluster):
    folder = tmp_path / "old"
    old = write_series(folder, "PRODML", seed=5, layout=((0, 150, 0), (170, 100, 3_000_000)))
    new = write_series(tmp_path / "new", "PRODML", seed=6, layout=((300, 80, 0),))
    store, whole = tmp_path / "store.zarr", tmp_path / "whole.zarr"
    address = dask_cluster.address
    _ingest(str(folder), "--out", str(store), "--quiet", scheduler=address)
    inputs = _as_written_before_the_table(store)
    assert inputs == _manifest(old)
    assert recorded_inputs(StoreLocation(store)) == inputs  # read from the attr
    # A re-run of such a store reads its files (no table to take scans from): up to date.
    rerun = _ingest(str(folder), "--out", str(store), scheduler=address)
    assert "up to date" in rerun.stdout and _scans(rerun) == [2]
    _ingest(str(new[0]), "--out", str(store), "--append", "--quiet", scheduler=address)
    _ingest(str(folder), str(tmp_path / "new"), "--out", str(whole), "--quiet",
            scheduler=address)  # fmt: skip
    assert _data(store) == _data(whole)
    attrs = json.loads((store / "zarr.json").read_text())["attributes"]
    assert not {"inputs", "segments", "time_offsets_s"} & attrs.keys()
    assert (
        recorded_inputs(StoreLocation(store))
        == recorded_inputs(StoreLocation(whole))
        == _manifest(sorted(old + new))
    )
    assert (
        das_inputs.read_recorded(StoreLocation(store)).placed
        == das_inputs.read_recorded(StoreLocation(whole)).placed
    )


@pytest.fixture(scope="module")
def counted_s3(tmp_path_factory):
    """A SeaweedFS whose metrics count the bytes it sends: (server, metrics port)."""
    options, port = metrics_options()
    server = start_s3(tmp_path_factory.mktemp("seaweedfs-das-reads"), options=options)
    server.filesystem().mkdir(BUCKET)
    yield server, port
    stop_s3(server)


def test_s3_inputs_are_read_once_on_two_workers_and_not_again_by_a_rerun(
    counted_s3, tmp_path, dask_cluster
):
    """Six files of 1024 channels (blocks of 1024 samples: 4 block tasks) on the session's
    2 workers, which share this host's input cache."""
    server, port = counted_s3
    rng = np.random.default_rng(8)
    (tmp_path / "files").mkdir()
    files = [
        write_prodml(tmp_path / "files" / f"f{i}.h5", rng.standard_normal((600, 1024)),
                     START + np.timedelta64(i * 600 * STEP_NS, "ns"), RATE)
        for i in range(6)
    ]  # fmt: skip
    fs = server.filesystem()
    for path in files:
        fs.put_file(str(path), f"{BUCKET}/files/{path.name}")
    input_bytes = sum(path.stat().st_size for path in files)
    out = tmp_path / "store.zarr"
    command = [f"s3://{BUCKET}/files/", "--out", str(out),
               f"--storage-option=endpoint_url={server.endpoint_url}"]  # fmt: skip
    credentials = {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_KEY}
    before = bucket_sent_bytes(port, BUCKET)
    _ingest(*command, "--quiet", scheduler=dask_cluster.address, env=credentials)
    read = bucket_sent_bytes(port, BUCKET) - before
    assert read <= 1.05 * input_bytes, read / input_bytes
    np.testing.assert_array_equal(
        zarr.open_group(str(out))["strain_rate"][:], dascore_expected(files)[1]
    )
    before = bucket_sent_bytes(port, BUCKET)
    again = _ingest(*command, scheduler=dask_cluster.address, env=credentials)
    assert "up to date" in again.stdout and _scans(again) == []
    assert bucket_sent_bytes(port, BUCKET) - before < 0.01 * input_bytes  # the listing only


def test_a_waveform_ingest_onto_a_das_store_replaces_it(tmp_path, dask_cluster):
    """A DAS store's inputs table is not a waveform one: `ingest waveforms` onto its URL reads
    it as no record (it scans its files) and writes a waveform store, without a traceback."""
    from test_waveforms import I59_DATA

    store = tmp_path / "store.zarr"
    _ingest(*map(str, _contiguous(tmp_path / "das", 2)), "--out", str(store),
            scheduler=dask_cluster.address)  # fmt: skip
    command = [sys.executable, "-m", "seisctf.cli", "ingest", "waveforms", str(I59_DATA),
               "--out", str(store), "--scheduler", dask_cluster.address]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert [e["path"] for e in recorded_inputs(StoreLocation(store))] == [str(I59_DATA)]
    assert "strain_rate" not in zarr.open_group(str(store)) and "data" in zarr.open_group(
        str(store)
    )
