"""Tests of `seisctf ingest waveforms --remove-response` on real data: obspy's own test archives
(IU.ANMO.10.BHZ, a seismometer in m/s; IM.I59H1..BDF, an infrasound sensor in Pa) with their
StationXML, every stored sample compared with obspy's `Stream.remove_response` of the same file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import obspy
import pytest
import xarray as xr
from conftest import on_one_and_two_workers

from seisctf import cli, storage
from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive import waveform_blocks
from seisctf.formats.obspy_archive.response import default_pre_filt
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.location import StoreLocation

OBSPY = Path(obspy.__file__).parent
TSINDEX = OBSPY / "clients/filesystem/tests/data/tsindex_data"  # IU.ANMO, IU.COLA, CU.TGUH
ANMO = TSINDEX / "IU/2018/001/IU.ANMO.10.BHZ.2018.001_first_minute.mseed"  # 40 Hz, 2400 samples
ANMO_XML = OBSPY / "core/tests/data/IU_ANMO_BH.xml"  # IU.ANMO.00 and .10, BH1/BH2/BHZ, M/S
I59 = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.mseed"  # 20 Hz, 9201 samples
I59_XML = OBSPY / "signal/tests/data/IM.I59H1..BDF_2020_10_31.xml"  # input units PA


def _open(url: Path) -> xr.Dataset:
    ds = storage.open_dataset(StoreLocation(str(url)))
    assert ds.attrs[cv.ATTR_COMPLETE] is True
    return ds


def _obspy_corrected(path: Path, xml: Path, **options) -> np.ndarray:
    """obspy's own: read, remove_response (float64), as float32 like the store."""
    stream = obspy.read(str(path))
    stream.remove_response(obspy.read_inventory(str(xml)), **options)
    assert len(stream) == 1
    return stream[0].data.astype(np.float32)


def _assert_close(stored: np.ndarray, expected: np.ndarray) -> None:
    """Every sample within float32 rounding of obspy's (relative to the trace's maximum)."""
    assert stored.shape == expected.shape and stored.dtype == np.float32
    assert np.all(np.isfinite(stored))
    scale = float(np.abs(expected).max())
    assert scale > 0
    np.testing.assert_allclose(stored, expected, rtol=0, atol=1e-6 * scale)


def test_vel_disp_and_pressure_match_obspy_remove_response_sample_for_sample(tmp_path):
    # The whole tsindex folder: ANMO has a response in IU_ANMO_BH.xml; COLA and TGUH do not,
    # so their traces are problems, by name, and not ingested.
    out = tmp_path / "vel.zarr"
    report = ingest_waveforms(
        [str(TSINDEX)],
        StoreLocation(out),
        inventories=[str(ANMO_XML)],
        remove_response="VEL",
        block_samples=1000,
        quiet=True,
    )
    ds = _open(out)
    assert list(ds["station"].values) == ["IU.ANMO.10"]
    missing = [p for p in report.problems if "has no instrument response" in p]
    assert {p.split(": ")[1].split(" at ")[0] for p in missing} == {
        "IU.COLA.10.BHZ",
        "CU.TGUH.00.BHZ",
    }
    assert ds.attrs["ingest_problems"] == list(report.problems)
    removed = ds.attrs["response_removed"]
    assert removed["output"] == "VEL" and removed["water_level"] == 60.0
    assert removed["pre_filt"] == [0.005, 0.01, 16.0, 18.0] == list(default_pre_filt(40.0))
    assert removed["pre_filt_default"] is True
    meta = ds.attrs["channel_metadata"]["IU.ANMO.10"]["BHZ"]
    assert meta["units"] == "M/S" and meta["input_units"] == "M/S"
    # ANMO starts 0.0195 s after 00:00 at 40 Hz: on grid sample 0 of its own grid (the store
    # starts with it, the other stations being left out).
    expected = _obspy_corrected(ANMO, ANMO_XML, output="VEL", pre_filt=removed["pre_filt"],
                                water_level=60.0)  # fmt: skip
    _assert_close(ds["data"].values[0, 0], expected)

    out = tmp_path / "disp.zarr"
    ingest_waveforms(
        [str(ANMO)],
        StoreLocation(out),
        inventories=[str(ANMO_XML)],
        remove_response="DISP",
        pre_filt="0.02,0.04,10,15",
        water_level="none",
        quiet=True,
    )
    ds = _open(out)
    assert ds.attrs["response_removed"]["pre_filt"] == [0.02, 0.04, 10.0, 15.0]
    assert ds.attrs["response_removed"]["water_level"] is None
    assert ds.attrs["channel_metadata"]["IU.ANMO.10"]["BHZ"]["units"] == "M"
    expected = _obspy_corrected(ANMO, ANMO_XML, output="DISP", pre_filt=(0.02, 0.04, 10, 15),
                                water_level=None)  # fmt: skip
    _assert_close(ds["data"].values[0, 0], expected)

    # A pressure sensor: obspy applies the response as it is (output has no effect): Pa.
    out = tmp_path / "pa.zarr"
    report = ingest_waveforms(
        [str(I59)],
        StoreLocation(out),
        inventories=[str(I59_XML)],
        remove_response="ACC",
        quiet=True,
    )
    assert report.problems == ()
    ds = _open(out)
    assert ds.attrs["channel_metadata"]["IM.I59H1"]["BDF"]["units"] == "PA"
    pre_filt = ds.attrs["response_removed"]["pre_filt"]
    assert pre_filt == [0.005, 0.01, 8.0, 9.0]
    expected = _obspy_corrected(I59, I59_XML, output="ACC", pre_filt=pre_filt, water_level=60)
    _assert_close(ds["data"].values[0, 0], expected)


def _split_i59(root: Path) -> list[Path]:
    """I59H1 cut into two overlapping STEIM2 files: samples [0, 5000) and [4000, 9201)."""
    root.mkdir(parents=True, exist_ok=True)
    trace = obspy.read(str(I59))[0]
    rate = trace.stats.sampling_rate
    files = []
    for name, first, stop in (("a.mseed", 0, 5000), ("b.mseed", 4000, trace.stats.npts)):
        piece = trace.copy()
        piece.data = piece.data[first:stop].copy()
        piece.stats.starttime = trace.stats.starttime + first / rate
        piece.write(str(root / name), format="MSEED", encoding="STEIM2", reclen=512)
        files.append(root / name)
    return files


def test_overlapping_files_are_corrected_per_trace_whatever_the_block_size(tmp_path, monkeypatch):
    files = _split_i59(tmp_path / "split")
    options = {"output": "VEL", "pre_filt": default_pre_filt(20.0), "water_level": 60}
    first, second = (_obspy_corrected(path, I59_XML, **options) for path in files)
    expected = np.concatenate([first[:4000], second])  # the later-starting file wins the overlap
    decoded: list[str] = []
    original = waveform_blocks.decode_file

    def counted(input_file, *args, **kwargs):
        decoded.append(input_file.url)
        return original(input_file, *args, **kwargs)

    monkeypatch.setattr(waveform_blocks, "decode_file", counted)
    stored = {}
    for size in (700, 4096):
        waveform_blocks._DECODED.items.clear()
        waveform_blocks._MERGED.items.clear()
        decoded.clear()
        out = tmp_path / f"b{size}.zarr"
        ingest_waveforms(
            [str(tmp_path / "split")],
            StoreLocation(out),
            inventories=[str(I59_XML)],
            remove_response="VEL",
            block_samples=size,
            quiet=True,
        )
        ds = _open(out)
        stored[size] = ds["data"].values
        _assert_close(stored[size][0, 0], expected)
        # Each file decoded and deconvolved once, not once per block (14 blocks of 700).
        assert sorted(decoded) == sorted(str(path) for path in files)
    np.testing.assert_array_equal(stored[700], stored[4096])  # bit for bit
    assert stored[700].tobytes() == stored[4096].tobytes()


def test_options_are_in_the_fingerprint_and_append_must_repeat_them(tmp_path):
    files = _split_i59(tmp_path / "split")
    out = tmp_path / "store.zarr"
    store = StoreLocation(out)
    common = {"inventories": [str(I59_XML)], "quiet": True}
    ingest_waveforms([str(files[0])], store, remove_response="VEL", **common)
    assert ingest_waveforms([str(files[0])], store, remove_response="VEL", **common).up_to_date
    # Another water level, output or no removal at all: not the same store, rewritten.
    changed = ingest_waveforms(
        [str(files[0])], store, remove_response="VEL", water_level=30, **common
    )
    assert not changed.up_to_date
    assert _open(out).attrs["response_removed"]["water_level"] == 30.0
    raw = ingest_waveforms([str(files[0])], store, **common)
    assert not raw.up_to_date and _open(out).attrs["response_removed"] is None
    assert _open(out).attrs["channel_metadata"]["IM.I59H1"]["BDF"]["units"] == "COUNTS"
    # Appending with other response options than the store's is refused, naming the option.
    with pytest.raises(InvalidInput, match="ingested without `remove_response`") as error:
        ingest_waveforms([str(files[1])], store, append=True, remove_response="VEL", **common)
    assert error.value.what == "remove_response"
    ingest_waveforms([str(files[0])], store, remove_response="VEL", **common)
    with pytest.raises(InvalidInput, match="ingested with response removal"):
        ingest_waveforms([str(files[1])], store, append=True, remove_response="DISP", **common)
    appended = ingest_waveforms(
        [str(files[1])], store, append=True, remove_response="VEL", **common
    )
    assert not appended.up_to_date
    whole = tmp_path / "whole.zarr"
    ingest_waveforms([str(f) for f in files], StoreLocation(whole), remove_response="VEL", **common)
    np.testing.assert_array_equal(_open(out)["data"].values, _open(whole)["data"].values)
    with pytest.raises(InvalidInput, match="F1 < F2"):
        ingest_waveforms(
            [str(files[0])], store, remove_response="VEL", pre_filt="1,2,2,3", **common
        )
    with pytest.raises(InvalidInput, match="only apply with `remove_response`"):
        ingest_waveforms([str(files[0])], store, water_level=10, **common)


def test_cli_without_inventory_exits_3_and_missing_responses_are_problems(tmp_path, capsys):
    code = cli.main(["ingest", "waveforms", str(ANMO), "--out", str(tmp_path / "n.zarr"),
                     "--remove-response", "--quiet"])  # fmt: skip
    assert code == 3
    err = capsys.readouterr().err
    assert "--remove-response" in err and "--inventory" in err and "Traceback" not in err
    assert not (tmp_path / "n.zarr").exists()
    # COLA has no response in the ANMO inventory: listed as a problem, fatal with --strict.
    cola = TSINDEX / "IU/2018/001/IU.COLA.10.BHZ.2018.001_first_minute.mseed"
    args = ["ingest", "waveforms", str(ANMO), str(cola), "--inventory", str(ANMO_XML),
            "--remove-response", "disp", "--quiet"]  # fmt: skip
    assert cli.main([*args, "--out", str(tmp_path / "s.zarr"), "--strict"]) == 3
    err = capsys.readouterr().err
    assert f"{cola}: IU.COLA.10.BHZ" in err and "no instrument response" in err
    assert not (tmp_path / "s.zarr").exists()
    assert cli.main([*args, "--out", str(tmp_path / "l.zarr")]) == 0
    out = capsys.readouterr().out
    assert f"problem: {cola}: IU.COLA.10.BHZ" in out
    ds = _open(tmp_path / "l.zarr")
    assert list(ds["station"].values) == ["IU.ANMO.10"]
    assert ds.attrs["response_removed"]["output"] == "DISP"


def test_one_and_two_workers_store_the_same_corrected_bytes(tmp_path):
    files = _split_i59(tmp_path / "split")

    def chunk_bytes(root: Path) -> bytes:
        out = root / "store.zarr"
        ingest_waveforms(
            [str(f) for f in files],
            StoreLocation(out),
            inventories=[str(I59_XML)],
            remove_response="VEL",
            block_samples=1000,
            quiet=True,
        )
        chunks = sorted(path for path in (out / "data").rglob("*") if path.is_file())
        assert len(chunks) > 1
        return b"".join(path.read_bytes() for path in chunks)

    one, two = on_one_and_two_workers(chunk_bytes, tmp_path)
    assert one == two
