"""`seisctf tasks --layout auto` and the errors of a store that does not fit a layout, through the
command line on a real Dask cluster: small continuous waveform stores (199-200 stations at 1 Hz,
where the CTF rate needs no guard) that hold the `crustal` layout's ten slots but not `seismo`'s,
and a short wavefield store. The shapes expected of the bundle come from the layout's numbers
(the contract's windows), not from the code that cuts them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from conftest import smooth_wavefield

from seisctf import conventions as cv
from seisctf import storage
from seisctf.cli import main
from seisctf.location import StoreLocation
from seisctf.plugins.layouts import LAYOUTS

SECRET = "layout-auto-test-secret-of-length"
CRUSTAL = LAYOUTS["crustal"]


def waveform_store(
    path: Path, n_stations: int, n_samples: int, seed: int = 0, gapped: int = 0
) -> str:
    """A continuous waveform store (contract: `data(station, channel, time)` float32, 1 Hz, one
    channel BHZ) of smooth random signals, without gaps but in its first `gapped` stations (a
    NaN gap mid-record)."""
    rng = np.random.default_rng(seed)
    time = np.arange(n_samples)
    frequencies = rng.uniform(0.01, 0.2, (n_stations, 1))
    data = np.sin(2 * np.pi * frequencies * time + rng.uniform(0, 6.3, (n_stations, 1)))
    data[:gapped, n_samples // 2 : n_samples // 2 + 10] = np.nan
    store = xr.Dataset(
        {cv.WAVEFORM_VAR: (cv.WAVEFORM_DIMS, data[:, None, :].astype(np.float32))},
        coords={
            cv.STATION: np.array([f"XX.S{i:03d}." for i in range(n_stations)], dtype=object),
            cv.CHANNEL: np.array(["BHZ"], dtype=object),
            cv.LATITUDE: (cv.STATION, np.linspace(40, 50, n_stations)),
            cv.LONGITUDE: (cv.STATION, np.linspace(5, 15, n_stations)),
        },
        attrs={cv.ATTR_SAMPLING_RATE: 1.0, cv.ATTR_START_TIME: "2022-06-01T00:00:00Z"},
    )
    url = str(path)
    storage.write_dataset(store.chunk({cv.TIME: 4096}), StoreLocation(url), quiet=True)
    return url


def tasks(store: str, out: Path, layout: str, scheduler: str) -> list[str]:
    return [
        "tasks", store, "--layout", layout, "--public", str(out / "public.zarr"),
        "--truth", str(out / "truth.zarr"), "--secret", SECRET, "--scheduler", scheduler,
        "--quiet",
    ]  # fmt: skip


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("seisctf:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def fits_crustal_only(tmp_path_factory) -> str:
    """200 gap-free stations x 7000 s at 1 Hz: crustal needs 10 x 600 s, seismo 10 x 3000 s."""
    return waveform_store(tmp_path_factory.mktemp("stores") / "crustal-only.zarr", 200, 7000)


def test_auto_takes_the_largest_shipped_layout_the_store_supports(
    fits_crustal_only, tmp_path, dask_cluster, capsys
):
    out = tmp_path / "bundle"
    assert main(tasks(fits_crustal_only, out, "auto", dask_cluster.address)) == 0
    assert "layout auto: 'crustal'" in capsys.readouterr().out
    manifest = zarr.open_group(str(out / "truth.zarr"), mode="r").attrs[cv.ATTR_CTF]
    assert manifest["layout"] == "crustal"
    public = zarr.open_group(str(out / "public.zarr"), mode="r")
    truth = zarr.open_group(str(out / "truth.zarr"), mode="r")
    # The contract's windows of the crustal layout, 200 stations kept.
    assert public["X1train"].shape == (CRUSTAL.train_steps, 200)
    assert public["X4train"].shape == (CRUSTAL.few_steps, 200)
    assert truth["X1test"].shape == (CRUSTAL.forecast_steps, 200)
    assert truth["X2test"].shape == (CRUSTAL.train_steps, 200)
    # The bundle is whole: a zeros baseline scores exactly 0 on every task.
    submission = str(tmp_path / "zeros.zarr")
    common = ["--scheduler", dask_cluster.address, "--quiet"]
    public_url = str(out / "public.zarr")
    assert main(["baseline", "zeros", "--public", public_url, "--out", submission, *common]) == 0
    scores_file = tmp_path / "scores.json"
    truth_url = str(out / "truth.zarr")
    argv = ["score", "ctf", "--truth", truth_url, "--submission", submission]
    assert main([*argv, "--json", str(scores_file), *common]) == 0
    scores = json.loads(scores_file.read_text())["scores"]
    assert scores and all(value == 0.0 for value in scores.values())


def test_too_short_names_the_largest_layout_that_fits(
    fits_crustal_only, tmp_path, dask_cluster, capsys
):
    out = tmp_path / "bundle"
    assert main(tasks(fits_crustal_only, out, "seismo", dask_cluster.address)) == 3
    line = error_line(capsys)
    assert f"{fits_crustal_only}: too short for layout 'seismo'" in line
    assert "the largest shipped layout it is long enough for is 'crustal'" in line
    assert not out.exists()


def test_a_store_no_shipped_layout_fits(tmp_path, dask_cluster, capsys):
    short = waveform_store(tmp_path / "short.zarr", 200, 5000)
    out = tmp_path / "bundle"
    assert main(tasks(short, out, "crustal", dask_cluster.address)) == 3
    line = error_line(capsys)
    # The smallest layout's needs: 10 slots of 600 samples at 1 Hz from 1 Hz (no guard).
    assert "too short for layout 'crustal'" in line
    assert "no shipped layout fits: the smallest, crustal: 199 gap-free stations" in line
    assert "10 x (0 + 600) = 6000 samples at 1 Hz" in line
    assert main(tasks(short, out, "auto", dask_cluster.address)) == 3
    line = error_line(capsys)
    assert "no shipped layout fits (--layout auto)" in line
    assert "'seismo': too short" in line and "'crustal': too short" in line
    assert not out.exists()


def test_too_few_stations_says_so_and_auto_passes_no_other_error(tmp_path, dask_cluster, capsys):
    # 200 stations, 51 of them with a gap in every run of ten slots: 149 gap-free.
    sparse = waveform_store(tmp_path / "sparse.zarr", 200, 7000, gapped=51)
    out = tmp_path / "bundle"
    assert main(tasks(sparse, out, "crustal", dask_cluster.address)) == 3
    line = error_line(capsys)
    assert "only 149 station(s)" in line and "needs at least 199" in line
    assert "no shipped layout needs as few stations over shorter slots" in line
    assert "for 149 stations, write a layout file with `modes: 75` or less" in line
    # An error that is not about fitting (an unknown channel) is not passed over by auto.
    argv = tasks(sparse, out, "auto", dask_cluster.address)
    assert main([*argv, "--channel", "HHN"]) == 3
    line = error_line(capsys)
    assert "HHN" in line and "no shipped layout fits" not in line
    assert not out.exists()


def test_a_short_wavefield_store(tmp_path, dask_cluster, capsys):
    wavefield = str(tmp_path / "wavefield.zarr")
    # Chunks of 250 x 200: at the fixture's default 64 x 16, 2,080 chunks made ~10,000 tasks.
    store = smooth_wavefield(n_time=1000, n_sensor=200, chunks=(250, 200))
    storage.write_dataset(store, StoreLocation(wavefield), quiet=True)
    out = tmp_path / "bundle"
    assert main(tasks(wavefield, out, "seismo", dask_cluster.address)) == 3
    line = error_line(capsys)
    assert "has 1000 time steps; layout 'seismo' needs 3000" in line
    assert "the largest shipped layout it fits is 'crustal'" in line
    assert main(tasks(wavefield, out, "auto", dask_cluster.address)) == 0
    assert "layout auto: 'crustal'" in capsys.readouterr().out
    truth = zarr.open_group(str(out / "truth.zarr"), mode="r")
    assert truth.attrs[cv.ATTR_CTF]["layout"] == "crustal"
    assert truth["X1test"].shape == (CRUSTAL.forecast_steps, 200)
