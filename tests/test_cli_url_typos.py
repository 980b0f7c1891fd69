"""Misspelt URLs through the CLI and the library, against the real SeaweedFS server: each is
refused before any work (exit 3, one line with the spelling meant, no traceback), nothing is
written to the bucket or to a local folder named after the scheme, and the spelling offered
works. Before, `--out s3://B//typo.zarr` wrote chunks under `B/typo.zarr/` and exited 0,
`s3:/B/x.zarr` and `s3//B/x.zarr` wrote local folders `s3:` and `s3`, and `S3://` gave a
traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import obspy
import pytest

import seisctf
from seisctf.cli import EXIT_INVALID_INPUT, main
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

BALST = Path(obspy.__file__).parent / "io/mseed/tests/data/CH.BALST..LHE.D.2025.314"

# (--out as typed, with {b} the bucket's name; what the message offers instead)
TYPOS = [
    ("s3://{b}//typo.zarr", "did you mean s3://{b}/typo.zarr?"),
    ("s3:///{b}/typo.zarr", "did you mean s3://{b}/typo.zarr?"),
    ("s3:/{b}/typo.zarr", "did you mean s3://{b}/typo.zarr?"),
    ("s3//{b}/typo.zarr", "did you mean s3://{b}/typo.zarr?"),
    ("S3://{b}/typo.zarr", "write the scheme in lower case: s3://{b}/typo.zarr"),
    ("s4://{b}/typo.zarr", "did you mean s3://{b}/typo.zarr?"),
    ("s3://{b}/./typo.zarr", "did you mean s3://{b}/typo.zarr?"),
]


@pytest.fixture
def archive(tmp_path) -> Path:
    folder = tmp_path / "archive"
    folder.mkdir()
    shutil.copy(BALST, folder)
    return folder


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def bucket_keys(s3_server, bucket_url: str) -> list[str]:
    """Every key in the bucket, listed by s3fs (not seisctf)."""
    fs = s3_server.filesystem()
    fs.invalidate_cache()
    return fs.find(bucket_url.removeprefix("s3://"))


@pytest.mark.parametrize(("typed", "offered"), TYPOS)
def test_a_misspelt_out_url_is_refused_and_writes_nothing(
    typed, offered, s3_server, s3_bucket, archive, tmp_path, monkeypatch, capsys
):
    bucket = s3_bucket.removeprefix("s3://")
    out = typed.format(b=bucket)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    argv = ["ingest", "waveforms", str(archive), "--out", out, *s3_server.cli_options()]
    code = main([*argv, "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_INVALID_INPUT, err
    assert one_line(err).startswith(f"seisctf: invalid input: --out {out}: ")
    assert offered.format(b=bucket) in err
    assert bucket_keys(s3_server, s3_bucket) == []
    assert list(workdir.iterdir()) == []  # no folder `s3:` or `s3`


def test_the_spelling_offered_writes_the_store(s3_server, s3_bucket, archive, capsys):
    """The URL the refusal of `s3://B//typo.zarr` offers is the store a user meant: the ingest
    writes it, and `open_store` gives obspy's samples."""
    main(["ingest", "waveforms", str(archive), "--out", f"{s3_bucket}//typo.zarr", "--quiet"])
    offered = capsys.readouterr().err.split("did you mean ")[1].rstrip("?\n")
    assert offered == f"{s3_bucket}/typo.zarr"
    code = main(["ingest", "waveforms", str(archive), "--out", offered, *s3_server.cli_options()])
    assert code == 0, capsys.readouterr().err
    store = seisctf.open_store(offered, s3_server.storage_options)
    expected = obspy.read(str(BALST))[0].data
    np.testing.assert_array_equal(store["data"].sel(channel="LHE").values[0], expected)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["score", "ctf", "--truth", "S3://b/t.zarr", "--submission", "s.npz"], "--truth"),
        (["score", "ctf", "--truth", "t.zarr", "--submission", "s3://b//s.zarr"], "--submission"),
        (["baseline", "zeros", "--public", "s3:/b/p.zarr", "--out", "o.zarr"], "--public"),
        (["tasks", "s3//b/w.zarr", "--public", "p.zarr", "--truth", "t.zarr"], "s3//b/w.zarr"),
        (["tasks", "w.zarr", "--public", "s3://b/p.zarr", "--truth", "htps://b/t"], "--truth"),
        (["ingest", "waveforms", "s3://b/raw//*.mseed", "--out", "x.zarr"], "s3://b/raw//*"),
        (
            ["score", "ctf", "--truth", "t.zarr", "--submission", "s.npz", "--json", "s3:x"],
            "--json",
        ),
    ],
)
def test_every_location_option_is_checked(argv, named, tmp_path, monkeypatch, capsys):
    """Stores, inputs and local files alike, before the verb's own checks (which would call
    them missing) and before any request."""
    monkeypatch.chdir(tmp_path)
    code = main([*argv, "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_INVALID_INPUT, err
    assert one_line(err).startswith(f"seisctf: invalid input: {named}")
    assert "did you mean" in err or "lower case" in err
    assert list(tmp_path.iterdir()) == []


def test_the_library_refuses_a_misspelt_store_url(s3_server, s3_bucket):
    """`open_store` of the typo is refused, not an empty Dataset; writing to it writes nothing."""
    import xarray as xr

    from seisctf import storage

    options = s3_server.storage_options
    with pytest.raises(InvalidInput, match="did you mean"):
        seisctf.open_store(f"{s3_bucket}//typo.zarr", options)
    dataset = xr.Dataset({"u": ("time", np.arange(4.0))})
    with pytest.raises(InvalidInput, match="did you mean"):
        storage.write_dataset(
            dataset, StoreLocation(f"{s3_bucket}//typo.zarr", options), quiet=True
        )
    assert bucket_keys(s3_server, s3_bucket) == []
