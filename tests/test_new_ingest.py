"""Adding an ingest is one module: a function registered in INGESTS becomes a recipe source and
a `seisctf ingest` command (flags from its options schema) with nothing else changed. The
ingest here is real: CSV files of sensor readings (one column per sensor) into a zarr store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from seisctf import storage
from seisctf.build import engine
from seisctf.cli import build_parser, main
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.plugins.context import BuildContext
from seisctf.plugins.schema import POSITIVE, URL, parameters
from seisctf.registry import INGESTS

NAME = "csv_readings"


def ingest_csv_readings(
    context: BuildContext, *, path: str, sampling_rate_hz: float, scale: float = 1.0
) -> xr.Dataset:
    """CSV readings (rows: samples, columns: sensors) x `scale` -> `data(time, sensor)`."""
    readings = np.loadtxt(context.resolve(path), delimiter=",", ndmin=2) * scale
    time = np.arange(readings.shape[0]) / sampling_rate_hz
    dataset = xr.Dataset(
        {"data": (("time", "sensor"), readings.astype(np.float32))},
        coords={"time": time, "sensor": np.arange(readings.shape[1])},
    )
    dataset.to_zarr(context.source_url, mode="w")
    # The completion marker goes in last: a store without it is refused as unfinished.
    storage.finish_group(
        StoreLocation(context.source_url, context.storage_options),
        {"sampling_rate_hz": sampling_rate_hz},
    )
    return storage.open_dataset(StoreLocation(context.source_url, context.storage_options))


@pytest.fixture
def registered() -> Iterator[None]:
    options = parameters(
        {"path": URL, "sampling_rate_hz": POSITIVE, "scale": POSITIVE}, ("path", "sampling_rate_hz")
    )
    INGESTS.register(NAME, options=options, ingest=True)(ingest_csv_readings)
    yield
    del INGESTS._entries[NAME]


@pytest.fixture
def readings(tmp_path: Path) -> tuple[Path, np.ndarray]:
    values = np.random.default_rng(4).standard_normal((50, 3))
    path = tmp_path / "readings.csv"
    np.savetxt(path, values, delimiter=",")
    return path, values


def test_a_registered_ingest_is_a_command_with_flags_from_its_schema(
    registered, readings, tmp_path: Path, capsys
) -> None:
    path, values = readings
    out = tmp_path / "cli.zarr"
    argv = ["ingest", NAME, "--path", str(path), "--sampling-rate-hz", "20", "--scale", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    assert f"wrote {out}: data (50 time x 3 sensor)" in capsys.readouterr().out
    stored = xr.open_zarr(out)
    np.testing.assert_allclose(stored["data"].values, (2 * values).astype(np.float32))
    np.testing.assert_allclose(stored["time"].values, np.arange(50) / 20.0)
    # Required options are required flags (argparse's usage error, exit 2).
    with pytest.raises(SystemExit) as usage:
        build_parser().parse_args(["ingest", NAME, "--path", str(path), "--out", str(out)])
    assert usage.value.code == 2


def test_a_registered_ingest_is_a_recipe_source(registered, readings, tmp_path: Path) -> None:
    path, values = readings
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"recipe: 1\nname: csv-readings\nsource:\n  {NAME}:\n"
        f"    path: {path}\n    sampling_rate_hz: 20\n"
        "outputs:\n  store:\n    url: out.zarr\n"
    )
    engine.build_file(recipe, workdir=tmp_path, quiet=True)
    built = xr.open_zarr(tmp_path / "out.zarr")
    np.testing.assert_allclose(built["data"].values, values.astype(np.float32))
    # An option the schema does not declare is refused before any work.
    recipe.write_text(
        recipe.read_text().replace("sampling_rate_hz: 20", "sampling_rate_hz: 20\n    gain: 3")
    )
    with pytest.raises(InvalidInput, match="gain"):
        engine.build_file(recipe, workdir=tmp_path, quiet=True)
