"""The hostile input corpus: every file of `tests/data/bad/` and its table `CASES.md`, made here.

    .venv/bin/python tests/data/make_bad_inputs.py [OUT]      (default: tests/data/bad)

Deterministic: the same bytes on every run (zip members dated 1980-01-01, HDF5 without
timestamps, obspy's shipped test files as the real starting points), so the committed corpus
is exactly what this script writes (tests/reliability/test_hostile_inputs.py checks it byte
for byte; Parquet files by their table, as their footer names pyarrow's version). No file is
edited by hand.

Each `Case` names its input (a file or folder under OUT), the `seisctf` command line that
reads it, and fragments its one-line error must contain. Placeholders in commands:
`{input}` the case's path, `{support}` OUT/support (valid files some commands need beside
the bad one), `{out}` a fresh output path, `{truth}` a CTF truth group of the shapes in
`CTF_SHAPES`, `{picks}` an event-window store with labels, `{scheduler}` a Dask scheduler.
Every case must exit with code 3, name its input, print no traceback, and leave no complete
output; a command given no output path (`split STORE`, in place) runs on a copy of its input,
which must stay as written (a store still complete, without a `split`). Stores are tiny ones of
seisctf's layouts written with zarr directly (`bad_writers.write_store`), not by an ingest.
"""

from __future__ import annotations

import shutil
import struct
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
DEFAULT_OUT = HERE / "bad"
from bad_waveform_archives import ARCHIVE_CASES  # noqa: E402 - beside this script
from bad_writers import (  # noqa: E402 - beside this script, run or imported
    COORDINATES,
    CTF_SHAPES,
    MSEED_10_RECORDS,
    QUAKEML_ONE_PICK,
    RUNS_COLUMNS,
    SAC_DATA_OFFSET,
    SAC_FILE,
    SAC_NPTS_OFFSET,
    SAC_NVHDR_OFFSET,
    STATIONXML,
    STEAD_COLUMNS,
    event_window_store,
    flip_bits,
    npy_bytes,
    npy_header,
    obspy_data,
    seisbench_dataset,
    seisbench_rows,
    stead_hdf5,
    waveform_store,
    with_value,
    write_hdf5,
    write_npz,
    write_zarr_group,
    zero_arrays,
    zip_folder,
)


def _missing_zarr_chunk(path: Path) -> None:
    """A zarr group whose X3test lost one chunk file (zarr would read it as the fill value)."""
    write_zarr_group(path, zero_arrays(X3test=np.ones(CTF_SHAPES["X3test"], dtype=np.float32)))
    (path / "X3test" / "c" / "1" / "0").unlink()


# --- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A hostile input, the command reading it and fragments of the one-line error."""

    name: str  # the input's file or folder name under OUT
    about: str  # what is wrong with it
    write: Callable[[Path], object]  # writes OUT/name (given that path)
    command: tuple[str, ...]  # `seisctf` arguments, with the placeholders of the module doc
    expect: tuple[str, ...]  # fragments of stderr besides the input's name


def _mseed_truncated(path: Path) -> None:
    path.write_bytes(obspy_data(MSEED_10_RECORDS).read_bytes()[:2600])  # mid 6th record


def _mseed_bitflip_header(path: Path) -> None:
    # Record 3's blockette 1000 record length exponent (byte 54 of the record: 9 -> 25).
    raw = obspy_data(MSEED_10_RECORDS).read_bytes()
    path.write_bytes(flip_bits(raw, [(1024 + 54, 4)]))


def _mseed_bitflip_encoding(path: Path) -> None:
    # Blockette 1000's encoding byte of the first record (byte 52: Steim-1 = 10) to 10 ^ 64.
    raw = obspy_data(MSEED_10_RECORDS).read_bytes()
    path.write_bytes(flip_bits(raw, [(52, 6)]))


def _sac_short_header(path: Path) -> None:
    path.write_bytes(obspy_data(SAC_FILE).read_bytes()[:300])


def _sac_npts(path: Path, npts: int) -> None:
    raw = bytearray(obspy_data(SAC_FILE).read_bytes())
    struct.pack_into("<i", raw, SAC_NPTS_OFFSET, npts)
    path.write_bytes(bytes(raw))


def _sac_version(path: Path) -> None:
    raw = bytearray(obspy_data(SAC_FILE).read_bytes())
    struct.pack_into("<i", raw, SAC_NVHDR_OFFSET, 99)
    path.write_bytes(bytes(raw))


def _empty_folder(path: Path) -> None:
    path.mkdir()
    (path / ".keep").write_bytes(b"")


def _sac_nan(path: Path) -> None:
    raw = bytearray(obspy_data(SAC_FILE).read_bytes())
    struct.pack_into("<f", raw, SAC_DATA_OFFSET + 4 * 50, float("nan"))  # sample 50
    path.write_bytes(bytes(raw))


def _zarr_with_absurd_shape(path: Path) -> None:
    """A valid zarr group whose X1test metadata declares 10^12 × 48 values (no chunk)."""
    import json

    write_zarr_group(path, zero_arrays())
    meta_path = path / "X1test" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"] = [10**12, 48]
    meta_path.write_text(json.dumps(meta, indent=2))


def _zip_bomb(path: Path) -> None:
    """An .npz whose X1test member declares 4 GiB uncompressed in a few hundred bytes (its
    local header and central directory entry say so)."""
    write_npz(path, zero_arrays())
    with zipfile.ZipFile(path) as archive:
        local, directory = archive.getinfo("X1test.npy").header_offset, archive.start_dir
    raw = bytearray(path.read_bytes())
    entry = raw.index(b"X1test.npy", directory) - 46  # a central entry's name follows 46 bytes
    struct.pack_into("<I", raw, local + 22, 0xFFFFFFF0)
    struct.pack_into("<I", raw, entry + 24, 0xFFFFFFF0)
    path.write_bytes(bytes(raw))


def _zarr_zip_slip(path: Path) -> None:
    group = write_zarr_group(path.parent / "_zip_slip_group", zero_arrays())
    zip_folder(group, path, {"../../../tmp/seisctf-evil.npy": npy_bytes(np.zeros(3))})
    shutil.rmtree(group)


def npy_stub_folder(path: Path, first: bytes = b"", link: str | None = None) -> Path:
    """A folder of .npy files whose X1test.npy (read first) holds `first` or is a symlink to
    `link`; the others are bare headers: the intake refuses X1test before reading them."""
    path.mkdir()
    for name, shape in CTF_SHAPES.items():
        (path / f"{name}.npy").write_bytes(npy_header(shape))
    (path / "X1test.npy").unlink()
    if link is not None:
        (path / "X1test.npy").symlink_to(link)
    else:
        (path / "X1test.npy").write_bytes(first)
    return path


def _truncated_npz(path: Path) -> None:
    write_npz(path, zero_arrays())
    path.write_bytes(path.read_bytes()[:700])


def _folder_with_notes(path: Path) -> None:
    path.mkdir()
    (path / "notes.txt").write_text("nothing here\n")


def _random_bytes(seed: int, size: int) -> Callable[[Path], None]:
    return _text(np.random.default_rng(seed).bytes(size))


def _corrupt_zarr_chunk(path: Path) -> None:
    """A zarr group whose X5test has one chunk of garbage bytes where a compressed chunk goes."""
    ones = np.ones(CTF_SHAPES["X5test"], dtype=np.float32)
    write_zarr_group(path, zero_arrays(X5test=ones))
    chunk = path / "X5test" / "c" / "1" / "0"
    chunk.write_bytes(b"\x02\x01garbage, not a blosc or zstd frame" * 3)


def _truncated_zarr_chunk(path: Path) -> None:
    import zarr

    ones = np.ones(CTF_SHAPES["X6test"], dtype=np.float32)
    write_zarr_group(path, zero_arrays(X6test=None))
    group = zarr.open_group(str(path), mode="r+")
    group.create_array("X6test", shape=ones.shape, dtype="f4", chunks=(50, 48), compressors=None)
    group["X6test"][...] = ones
    chunk = path / "X6test" / "c" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:1000])


def _parquet(columns: dict[str, list]) -> Callable[[Path], None]:
    """A Parquet pick table of one trace 'A' with these other columns."""

    def write(path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"trace_name": ["A"], **columns}), path)

    return write


def _w(writer: Callable, arrays: dict[str, np.ndarray]) -> Callable[[Path], object]:
    return lambda path: writer(path, arrays)


def _text(content: str | bytes) -> Callable[[Path], None]:
    raw = content.encode() if isinstance(content, str) else content
    return lambda path: path.write_bytes(raw)


def _sqlite_junk(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 4)


def _store_without_manifest(path: Path) -> None:
    import zarr

    write_zarr_group(path, zero_arrays())
    group = zarr.open_group(str(path), mode="r+")
    group.attrs["seisctf_complete"] = True
    zarr.consolidate_metadata(group.store)


def _wavefield_absurd(path: Path) -> None:
    """A complete-looking wavefield store whose `u` declares 10^6 × 10^9 time × sensor."""
    import json

    import zarr

    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    group.create_array(
        "u", shape=(1, 1), dtype="f4", chunks=(1, 1), dimension_names=("time", "sensor")
    )
    meta_path = path / "u" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"] = [10**6, 10**9], [10**6, 1]
    meta_path.write_text(json.dumps(meta, indent=2))
    group = zarr.open_group(str(path), mode="r+")
    group.attrs.update({"seisctf_complete": True, "sampling_rate": 1.0, "dataset": "absurd",
                        "start_time": "2000-01-01T00:00:00Z"})  # fmt: skip
    zarr.consolidate_metadata(group.store)


def _recipe(body: str) -> Callable[[Path], None]:
    return _text(f"recipe: 1\n{body}outputs:\n  store: {{url: wavefield.zarr}}\n")


def billion_laughs() -> str:
    """Nine levels of nine aliases: 10^9 strings once expanded, 1 KiB as written."""
    lines = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*lol{level - 1}"] * 9)
        lines.append(f"lol{level}: &lol{level} [{refs}]")
    return "\n".join(lines) + "\n"


WAVEFORMS = ("ingest", "waveforms", "{input}", "--out", "{out}", "--strict")
INVENTORY = ("ingest", "waveforms", "{support}/good.mseed", "--inventory", "{input}", "--out",
             "{out}", "--strict")  # fmt: skip
DAS = ("ingest", "das", "{input}", "--out", "{out}")
SEISBENCH = ("ingest", "seisbench", "{input}", "--out", "{out}")
SCORE = ("score", "ctf", "--truth", "{truth}", "--submission", "{input}", "--json", "{out}")
PICKS = ("score", "picks", "--truth", "{picks}", "--submission", "{input}", "--json", "{out}")
BUILD = ("build", "{input}", "--workdir", "{out}")
TRUTH = ("score", "ctf", "--truth", "{input}", "--submission", "{support}/zeros.npz", "--json",
         "{out}")  # fmt: skip
COMPARE = ("compare", "{input}", "--out", "{out}")
DEMO = ("demo", "--layout", "{input}", "--workdir", "{out}")
SPLIT = ("split", "{input}", "--strategy", "event")  # in place: the input must stay as it was
PICK_HEADER = "trace_name,detection,p_time_s,s_time_s\n"


# fmt: off
CASES: tuple[Case, ...] = (
    # --- seismogram archives (ingest waveforms --strict: a bad file is fatal) --------------------
    Case("mseed-truncated.mseed", "a real miniSEED file cut inside its 6th record",
         _mseed_truncated, WAVEFORMS, ("truncated",)),
    Case("mseed-bitflip-record-length.mseed", "one bit of record 3's blockette 1000 length "
         "exponent flipped (512 bytes -> 32 MiB)", _mseed_bitflip_header, WAVEFORMS,
         ("no input is readable", "unreadable (", "readMSEEDBuffer")),
    Case("mseed-bitflip-encoding.mseed", "one bit of the first record's encoding byte flipped "
         "(an unknown encoding)", _mseed_bitflip_encoding, WAVEFORMS,
         ("no input is readable", "not a valid MiniSEED encoding")),
    Case("mseed-empty.mseed", "zero bytes", _text(b""), WAVEFORMS,
         ("an empty file (0 bytes)",)),
    Case("mseed-text.mseed", "text named .mseed", _text("not a seismogram\n" * 20), WAVEFORMS,
         ("unreadable", "no obspy reader knows its format")),
    Case("waveforms-empty-folder", "a folder holding only a hidden file", _empty_folder,
         WAVEFORMS, ("no file in this folder",)),
    Case("sac-short-header.sac", "a SAC file cut to 300 of its 632 header bytes",
         _sac_short_header, WAVEFORMS, ("unreadable", "no obspy reader knows its format")),
    Case("sac-npts-huge.sac", "SAC header declares 2**31-1 samples, the file holds 100",
         lambda p: _sac_npts(p, 2**31 - 1), WAVEFORMS,
         ("unreadable", "Actual and theoretical file size are inconsistent")),
    Case("sac-npts-negative.sac", "SAC header declares -5 samples",
         lambda p: _sac_npts(p, -5), WAVEFORMS,
         ("unreadable", "Actual and theoretical file size are inconsistent")),
    Case("sac-header-version.sac", "SAC header version 99 (expected 6)", _sac_version,
         WAVEFORMS, ("unreadable", "no obspy reader knows its format")),
    Case("sac-nan.sac", "a real SAC file whose sample 50 is NaN", _sac_nan, WAVEFORMS,
         ("1 non-finite sample(s)", "stored as gaps")),
    *(Case(*row) for row in ARCHIVE_CASES),  # readable files whose data contradict each other
    # --- station metadata ------------------------------------------------------------------------
    Case("stationxml-no-coordinates.xml", "a station and channel without latitude/longitude",
         _text(STATIONXML.format(coordinates="")), INVENTORY,
         ("cannot read the inventory", "coordinates of every station")),
    Case("stationxml-truncated.xml", "StationXML cut in the middle of an element",
         _text(STATIONXML.format(coordinates=COORDINATES)[:400]), INVENTORY, ("inventory",)),
    Case("stationxml-binary.xml", "random bytes named .xml", _random_bytes(1, 700), INVENTORY,
         ("inventory",)),
    # --- DAS -------------------------------------------------------------------------------------
    Case("das-not-hdf5.h5", "random bytes named .h5", _random_bytes(2, 4096), DAS,
         ("no input is readable",)),
    Case("das-hdf5-signature-only.h5", "the HDF5 signature followed by garbage",
         _text(b"\x89HDF\r\n\x1a\n" + b"\x00garbage" * 64), DAS, ("no input is readable",)),
    Case("das-other-hdf5.h5", "a valid HDF5 file of no DAS format",
         lambda p: write_hdf5(p, {"waveform": np.arange(10.0)}, {"title": "not DAS"}), DAS,
         ("no input is readable",)),
    Case("das-unknown.tdms", "a TDMS lead-in followed by garbage (unknown format)",
         _text(b"TDSm\x0e\x00\x00\x00" + b"\xff" * 200), DAS, ("no input is readable",)),
    # --- event-window sources (SeisBench, STEAD, QuakeML) -----------------------------------------
    Case("seisbench-no-trace-name", "metadata.csv without the trace_name column",
         lambda p: seisbench_dataset(p, "station_code,trace_sampling_rate_hz\nS1,100\n"),
         SEISBENCH, ("trace_name",)),
    Case("seisbench-waveforms-not-hdf5", "waveforms.hdf5 is text",
         lambda p: seisbench_dataset(p, seisbench_rows(["bucket0$0,:3,:100"]), b"no hdf5\n"),
         SEISBENCH, ("not an HDF5 file",)),
    Case("seisbench-missing-bucket", "metadata names bucket7, the HDF5 file has bucket0 only",
         lambda p: seisbench_dataset(p, seisbench_rows(["bucket7$0,:3,:100"])), SEISBENCH,
         ("bucket7",)),
    Case("seisbench-slice-too-long", "a trace slice past the end of its bucket",
         lambda p: seisbench_dataset(p, seisbench_rows(["bucket0$9,:3,:100"])), SEISBENCH,
         ("bucket0",)),
    Case("seisbench-metadata-binary", "metadata.csv holds binary bytes",
         lambda p: seisbench_dataset(p, b"\xff\xfe\x00\x01" * 64), SEISBENCH, ("metadata",)),
    Case("seisbench-not-a-dataset", "a folder without metadata.csv or waveforms.hdf5",
         _folder_with_notes, SEISBENCH,
         ("no SeisBench dataset (metadata*.csv + waveforms*.hdf5)",)),
    Case("stead-not-hdf5.hdf5", "STEAD waveforms that are not HDF5", _text(b"STEAD? no\n" * 30),
         ("ingest", "stead", "{input}", "{support}/stead.csv", "--out", "{out}"),
         ("not an HDF5 file",)),
    Case("stead-no-trace-name.csv", "STEAD metadata without the trace_name column",
         _text("network_code,receiver_code\nXX,S1\n"),
         ("ingest", "stead", "{support}/stead.hdf5", "{input}", "--out", "{out}"),
         ("missing column", "trace_name")),
    Case("quakeml-junk.xml", "an event catalogue that is not QuakeML",
         _text("<quakeml><eventParameters><event>unclosed"),
         ("ingest", "quakeml", "{input}", "--archive", "{support}/good.mseed", "--out", "{out}"),
         ("not an event catalogue obspy can read",)),
    Case("waveforms-store-bad-station-id.zarr", "a continuous waveform store (tiny, written "
         "as the layout says) whose station id is 'I59H1', not NET.STA or NET.STA.LOC",
         lambda p: waveform_store(p, ["I59H1"], 100, 1.0, codes=False),
         ("ingest", "quakeml", "{support}/picks.xml", "--archive", "{input}", "--out", "{out}"),
         ("station id 'I59H1'", "is not NET.STA or NET.STA.LOC")),
    Case("ew-catalog-missing.zarr", "an event-window store (tiny, written as the layout says) "
         "whose attr catalog names catalog.parquet, which is missing",
         lambda p: event_window_store(p, None), SPLIT,
         ("catalog.parquet", "no Parquet catalogue there")),
    Case("ew-catalog-not-parquet.zarr", "an event-window store whose catalog.parquet is text",
         lambda p: event_window_store(p, b"trace_name\n"), SPLIT,
         ("catalog.parquet", "not a readable Parquet catalogue")),
    # --- CTF submissions (score ctf) -------------------------------------------------------------
    Case("ctf-nan.npz", "X3test holds a NaN", _w(write_npz, with_value("X3test", (17, 5), np.nan)),
         SCORE, ("X3test", "non-finite", "[17, 5]")),
    Case("ctf-inf.zarr", "X6test holds +Inf (zarr group)",
         _w(write_zarr_group, with_value("X6test", (0, 47), np.inf)), SCORE,
         ("X6test", "non-finite", "[0, 47]")),
    Case("ctf-wrong-shape.npz", "X5test has 99 rows, the manifest says 100",
         _w(write_npz, zero_arrays(X5test=np.zeros((99, 48), np.float32))), SCORE,
         ("X5test", "(99, 48)", "expected (100, 48)")),
    Case("ctf-missing-array.npz", "X3test missing, an unexpected X99test present",
         _w(write_npz, zero_arrays(X3test=None, X99test=np.zeros((2, 2), np.float32))), SCORE,
         ("missing arrays ['X3test']", "unexpected arrays ['X99test']")),
    Case("ctf-wrong-shape.zarr", "X5test has 99 rows, the manifest says 100 (zarr group)",
         _w(write_zarr_group, zero_arrays(X5test=np.zeros((99, 48), np.float32))), SCORE,
         ("X5test", "(99, 48)", "expected (100, 48)")),
    Case("ctf-object-dtype.npz", "X4test is an object (pickled) array",
         _w(write_npz, zero_arrays(X4test=np.full(CTF_SHAPES["X4test"], 0.0, dtype=object))),
         SCORE, ("X4test", "object arrays")),
    Case("ctf-pickled-npy", "X1test.npy is a pickled object array (folder of .npy)",
         lambda p: npy_stub_folder(p, npy_bytes(np.full((2, 2), 0.0, dtype=object))), SCORE,
         ("X1test.npy", "pickled")),
    Case("ctf-zip-slip.zip", "a zipped zarr group with a member ../../../tmp/seisctf-evil.npy",
         _zarr_zip_slip, SCORE, ("zip-slip", "seisctf-evil.npy")),
    Case("ctf-symlink-npy", "X1test.npy is a symlink to /etc/passwd (folder of .npy)",
         lambda p: npy_stub_folder(p, link="/etc/passwd"), SCORE,
         ("X1test.npy", "symlink", "/etc/passwd")),
    Case("ctf-zip-bomb.npz", "X1test.npy declares 4 GiB in a few hundred bytes", _zip_bomb,
         SCORE, ("X1test.npy", "zip bomb", "before decompressing")),
    Case("ctf-absurd-shape.zarr", "zarr metadata of X1test declares 10^12 x 48 values",
         _zarr_with_absurd_shape, SCORE, ("X1test", "1000000000000", "expected (100, 48)")),
    Case("ctf-absurd-npy-header", "X1test.npy's header declares 2**40 x 2**40 values",
         lambda p: npy_stub_folder(p, npy_header((2**40, 2**40)) + bytes(64)), SCORE,
         ("X1test.npy", "expected (100, 48)")),
    Case("ctf-integer.npz", "X7test holds int64",
         _w(write_npz, zero_arrays(X7test=np.zeros(CTF_SHAPES["X7test"], np.int64))), SCORE,
         ("X7test", "int64")),
    Case("ctf-corrupt-chunk.zarr", "a chunk of X5test is garbage bytes", _corrupt_zarr_chunk,
         SCORE, ("X5test",)),
    Case("ctf-truncated-chunk.zarr", "an uncompressed chunk of X6test cut short",
         _truncated_zarr_chunk, SCORE, ("X6test",)),
    Case("ctf-missing-chunk.zarr", "a chunk file of X3test deleted", _missing_zarr_chunk, SCORE,
         ("X3test", "X3test/c/1/0", "missing")),
    Case("ctf-truncated.npz", "an .npz cut after 700 bytes", _truncated_npz, SCORE,
         ("not an .npz archive (a zip of .npy files)",)),
    Case("ctf-text.npz", "text named .npz", _text("X1test = [1, 2, 3]\n"), SCORE,
         ("not an .npz archive (a zip of .npy files)",)),
    # --- stores given to the referee and the bundle builder --------------------------------------
    Case("truth-incomplete.zarr", "a truth group without the completion marker",
         _w(write_zarr_group, zero_arrays()), TRUTH, ("incomplete",)),
    Case("truth-no-manifest.zarr", "a complete group without the ctf manifest",
         _store_without_manifest, TRUTH, ("manifest",)),
    Case("truth-not-a-group", "a folder holding only a text file, given as the truth",
         _folder_with_notes, TRUTH, ("no zarr group found there", "a folder without zarr.json")),
    Case("public-a-file.zarr", "a text file named .zarr, given as the public bundle",
         _text("not a zarr group\n"),
         ("baseline", "zeros", "--public", "{input}", "--out", "{out}/s.zarr"),
         ("no zarr group found there", "a file, not a zarr folder")),
    Case("waveforms-too-short.zarr", "a continuous waveform store (tiny, written as the layout "
         "says) of 199 stations x BHZ x 100 samples at 1 Hz: too short for every layout",
         lambda p: waveform_store(p, [f"XX.S{i}" for i in range(199)], 100, 1.0),
         ("tasks", "{input}", "--public", "{out}/public.zarr", "--truth", "{out}/truth.zarr",
          "--layout", "auto"),
         ("no shipped layout fits (--layout auto)", "'seismo': too short")),
    Case("waveforms-two-stations.zarr", "a continuous waveform store of 2 stations x BHZ x 100 "
         "samples at 1 Hz: fewer stations than any shipped layout needs (refused from the "
         "station count, before any gap check)",
         lambda p: waveform_store(p, ["XX.S0", "XX.S1"], 100, 1.0),
         ("tasks", "{input}", "--public", "{out}/public.zarr", "--truth", "{out}/truth.zarr",
          "--layout", "auto"),
         ("'seismo': has 2 stations", "needs at least 199", "`modes: 1`", "--layout FILE.yaml")),
    Case("wavefield-absurd-shape.zarr", "a wavefield store whose u declares 10^15 values",
         _wavefield_absurd,
         ("tasks", "{input}", "--public", "{out}/public.zarr", "--truth", "{out}/truth.zarr"),
         ("/u: metadata declares shape (1000000, 1000000000)",
          "limits 33554432 chunks along the axes")),
    # --- pick submissions (score picks) ----------------------------------------------------------
    Case("picks-inf-time.csv", "a P time of inf", _text(PICK_HEADER + "A,0.9,inf,\nB,0.1,,\n"),
         PICKS, ("p_time_s not finite", "'A'")),
    Case("picks-negative-time.csv", "an S time before the window",
         _text(PICK_HEADER + "A,0.9,1.5,-2.0\n"), PICKS, ("s_time_s negative", "'A'")),
    Case("picks-probability.csv", "detection 1.5 and -0.1",
         _text(PICK_HEADER + "A,1.5,,\nB,-0.1,,\n"), PICKS, ("outside [0, 1]", "'A'", "'B'")),
    Case("picks-duplicate.csv", "one trace listed twice",
         _text(PICK_HEADER + "A,0.9,1.0,\nA,0.8,1.1,\n"), PICKS, ("listed twice", "'A'")),
    Case("picks-unknown-trace.csv", "trace names the store does not have",
         _text(PICK_HEADER + "NOT.A.TRACE_1,0.9,1.0,2.0\n"), PICKS, ("NOT.A.TRACE_1",)),
    Case("picks-missing-column.csv", "no s_time_s column",
         _text("trace_name,detection,p_time_s\nA,0.9,1.0\n"), PICKS, ("s_time_s",)),
    Case("picks-text-number.csv", "a P time that is text", _text(PICK_HEADER + "A,0.9,soon,\n"),
         PICKS, ("p_time_s not a number", "'A'")),
    Case("picks-nan-detection.parquet", "a Parquet detection of NaN",
         _parquet({"detection": [float("nan")], "p_time_s": [1.0], "s_time_s": [None]}),
         PICKS, ("detection missing or outside [0, 1]",)),
    Case("picks-inf-time.parquet", "a Parquet S time of -inf",
         _parquet({"detection": [0.9], "p_time_s": [1.0], "s_time_s": [float("-inf")]}),
         PICKS, ("s_time_s not finite",)),
    Case("picks-not-parquet.parquet", "text named .parquet", _text("trace_name,detection\n"),
         PICKS, ("not a readable pick table",)),
    Case("picks-semicolon.csv", "fields separated by ';' with ',' as the decimal point (a "
         "spreadsheet's CSV in many locales)",
         _text(PICK_HEADER.replace(",", ";") + "A;0,9;1,5;\n"), PICKS,
         ("it looks semicolon-delimited", "expected comma-separated columns")),
    Case("picks-tab.csv", "fields separated by tabs", _text(PICK_HEADER.replace(",", "\t")
         + "A\t0.9\t1.5\t\n"), PICKS, ("it looks tab-delimited",)),
    # --- recipes (build) -------------------------------------------------------------------------
    Case("recipe-list.yaml", "a YAML list, not a mapping", _text("- recipe: 1\n- source: x\n"),
         BUILD, ("a recipe is a YAML mapping",)),
    Case("recipe-scalar.yaml", "a bare number", _text("42\n"), BUILD, ("YAML mapping",)),
    Case("recipe-unknown-transform.yaml", "a transform no registry knows",
         _recipe("source:\n  synthetic_global: {sensors: 64}\n"
                 "transforms:\n  - fourier_magic: {strength: 11}\n"), BUILD, ("fourier_magic",)),
    Case("recipe-billion-laughs.yaml", "nine levels of nine aliases (10^9 strings)",
         _recipe(billion_laughs() + "source:\n  synthetic_global: {}\n"), BUILD,
         ("YAML bomb",)),
    Case("recipe-recursive-alias.yaml", "an alias inside its own anchor",
         _recipe("source: &loop\n  synthetic_global: *loop\n"), BUILD, ("recursive alias",)),
    Case("recipe-python-tag.yaml", "a python/object/apply tag (runs code in unsafe loaders)",
         _recipe("source: !!python/object/apply:os.system ['echo pwned']\n"), BUILD,
         ("python/object/apply",)),
    Case("recipe-deep.yaml", "lists nested 5000 deep", _text("[" * 5000 + "]" * 5000 + "\n"),
         BUILD, ("nested deeper",)),
    Case("recipe-not-utf8.yaml", "bytes that are not UTF-8", _text(b"recipe: 1\n\xff\xfe\x80\n"),
         BUILD, ("UTF-8",)),
    Case("recipe-wrong-type.yaml", "sensors given as text",
         _recipe("source:\n  synthetic_global: {sensors: many}\n"), BUILD, ("sensors", "'many'")),
    Case("recipe-url-empty-segment.yaml", "an output store URL with an empty path segment",
         _text("recipe: 1\nsource:\n  synthetic_global: {sensors: 64}\n"
               "outputs:\n  store: {url: 's3://demo//typo.zarr'}\n"), BUILD,
         (":5: outputs.store.url: an empty path segment", "did you mean s3://demo/typo.zarr?")),
    Case("recipe-url-scheme-case.yaml", "a source store URL with its scheme in capitals",
         _recipe("source:\n  store: {url: 'S3://demo/wavefield.zarr'}\n"), BUILD,
         ("source.store.url", "write the scheme in lower case: s3://demo/wavefield.zarr")),
    Case("recipe-url-missing-slash.yaml", "a bundle's truth URL missing a slash (s3:/…)",
         _text("recipe: 1\nsource:\n  synthetic_global: {sensors: 64}\noutputs:\n"
               "  ctf_bundle: {public: public.zarr, truth: 's3:/demo/truth.zarr'}\n"), BUILD,
         ("outputs.ctf_bundle.truth", "did you mean s3://demo/truth.zarr?")),
    # --- CTF layouts (demo --layout: refused before any work) ---------------------------------
    Case("layout-scalar.yaml", "a layout that is a number", _text("5\n"), DEMO,
         ("a layout is a YAML mapping",)),
    Case("layout-wrong-type.yaml", "train_steps given as text", _text("train_steps: many\n"),
         DEMO, ("train_steps: expected a whole number",)),
    Case("layout-negative.yaml", "a negative forecast length", _text("forecast_steps: -100\n"),
         DEMO, ("forecast_steps: expected a whole number >= 1, got -100",)),
    Case("layout-billion-laughs.yaml", "a layout of nested aliases", _text(billion_laughs()),
         DEMO, ("YAML bomb",)),
    # --- leaderboards and run tables -------------------------------------------------------------
    Case("leaderboard-not-sqlite.sqlite", "a SQLite header followed by garbage", _sqlite_junk,
         ("leaderboard", "--db", "{input}"), ("not a seisctf leaderboard database",)),
    Case("leaderboard-text.sqlite", "text given as the leaderboard of score ctf --db",
         _text("not a database\n"), (*TRUTH[:3], "{truth}", *TRUTH[4:], "--db", "{input}"),
         ("not a seisctf leaderboard database",)),
    Case("runs-nan.csv", "a run whose value is NaN",
         _text(RUNS_COLUMNS + "\na,3,d1,s1,f1,0.5\na,3,d1,s2,f1,nan\n"), COMPARE, ("value",)),
    Case("runs-missing-columns.csv", "a runs table without data_draw",
         _text("approach,budget,metric,value\na,3,f1,0.5\n"), COMPARE, ("data_draw",)),
)
# fmt: on


# --- the corpus -------------------------------------------------------------------------------


def write_support(folder: Path) -> None:
    """Valid files the commands need beside a bad one."""
    folder.mkdir()
    shutil.copyfile(obspy_data(MSEED_10_RECORDS), folder / "good.mseed")
    write_npz(folder / "zeros.npz", zero_arrays())
    stead_hdf5(folder / "stead.hdf5")
    (folder / "picks.xml").write_text(QUAKEML_ONE_PICK)
    (folder / "stead.csv").write_text(f"{STEAD_COLUMNS}\nXX.S1_EV,XX,S1,HH,10\n")


def table(cases: tuple[Case, ...] = CASES) -> str:
    """CASES.md: one row per case (input, what is wrong, command, expected fragments)."""
    rows = [
        "# Hostile input corpus",
        "",
        "Written by `tests/data/make_bad_inputs.py` (do not edit: re-run it); checked by",
        "`tests/reliability/test_hostile_inputs.py`. Each command must exit with code 3, name",
        "the input in one line of stderr with the fragments below, print no traceback and leave",
        "no complete output. Placeholders: see the script's docstring.",
        "",
        f"{len(cases)} cases.",
        "",
        "| input | what is wrong | `seisctf` command | expected in the message |",
        "|---|---|---|---|",
    ]
    for case in cases:
        expect = ", ".join(f"`{fragment}`" for fragment in case.expect) or "(the input's name)"
        about = case.about.replace("|", "\\|")
        rows.append(f"| `{case.name}` | {about} | `{' '.join(case.command)}` | {expect} |")
    return "\n".join(rows) + "\n"


def write_corpus(out: Path = DEFAULT_OUT) -> Path:
    """(Re)write every case, the support files and CASES.md under `out` (emptied first)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    write_support(out / "support")
    for case in CASES:
        case.write(out / case.name)
    (out / "CASES.md").write_text(table())
    return out


if __name__ == "__main__":
    print(f"wrote {write_corpus(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT)}")
