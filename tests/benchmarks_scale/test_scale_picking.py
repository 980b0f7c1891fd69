"""benchmarks/bench_scale.py --quick --only picking, its driver called in this process at the
section's tiniest size (scale_picking.TINY): every table has its rows; the ingested windows equal
SeisBench's `get_waveforms`, the scores the per-trace reference scorer's, and the splits written
into the catalogue store keep stations (station-disjoint) and events (source-clusters) in one
split each, checked from the store with pandas."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import archive_seisbench  # noqa: E402
import bench_scale  # noqa: E402
import scale_picking  # noqa: E402

SIZE = scale_picking.TINY
WINDOWS = (SIZE.small_windows, SIZE.large_windows)
ROWS = SIZE.rows


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Rows (cells as text) of each `### title` table, by the title's text before ':'."""
    out: dict[str, list[list[str]]] = {}
    title = ""
    for line in markdown.splitlines():
        if line.startswith("### "):
            title = line[4:].split(":")[0]
            out[title] = []
        elif line.startswith("| ") and title:
            out[title].append([cell.strip() for cell in line.strip("|").split("|")])
    return {name: rows[1:] for name, rows in out.items()}  # without the header row


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def write_catalogue(folder: Path, windows: int) -> None:
    """What `make_archive.py seisbench FOLDER --windows N --chunks 1` writes (its default rate
    and seed), in this process: the section finds it made and reuses it, and SeisBench's import
    is paid once, here, where the windows are compared."""
    folder.mkdir(parents=True)
    archive_seisbench.write_seisbench(
        str(folder), "c000", 0, windows, scale_picking.SAMPLES, 100.0, 2026
    )
    (folder / "chunks").write_text("c000\n")


def test_tiny_picking_section(tmp_path, monkeypatch: pytest.MonkeyPatch):
    work, data, markdown = tmp_path / "work", tmp_path / "data", tmp_path / "scale.md"
    logging.getLogger("seisbench").setLevel(logging.ERROR)
    for windows in WINDOWS:
        write_catalogue(data / f"seisbench-{windows}x{scale_picking.SAMPLES}", windows)
    monkeypatch.setattr(scale_picking, "sizes", lambda options: SIZE)
    argv = ["--quick", "--only", "picking", "--workdir", str(work), "--data", str(data),
            "--markdown", str(markdown)]  # fmt: skip
    assert bench_scale.main(argv) == 0
    found = tables(markdown.read_text())
    assert set(found) == {"ingest seisbench", "random batches of 256 windows (open_event_windows, "
                          "TensorStore), interleaved", "split", "score picks"}  # fmt: skip

    ingest = found["ingest seisbench"]
    assert [number(row[0]) for row in ingest[:2]] == list(WINDOWS)
    assert ingest[2][0].startswith("floor")
    for row in ingest[:2]:
        assert (
            number(row[3]) > 0 and number(row[4]) > 0 and number(row[2]) > 0 and number(row[6]) > 0
        )
    check_windows_equal_seisbench(
        data / f"seisbench-{WINDOWS[1]}x{scale_picking.SAMPLES}",
        work / f"picking-{WINDOWS[1]}.zarr",
    )

    batches = found["random batches of 256 windows (open_event_windows, TensorStore), interleaved"]
    assert [number(row[0]) for row in batches] == list(WINDOWS)
    assert number(batches[0][4]) == 1.0 and number(batches[1][4]) > 0
    assert number(batches[0][6]) == 1.0 and number(batches[1][6]) > 0

    split = found["split"]
    assert [row[0] for row in split] == ["source-clusters", "station-disjoint"]
    assert all(number(row[1]) == ROWS and row[10] == "yes" for row in split)
    check_split_from_the_store(work)

    score = found["score picks"]
    assert [row[0] for row in score] == ["parquet", "csv"]
    assert all(row[6] == "yes" for row in score)
    for suffix in ("parquet", "csv"):
        result = json.loads((work / f"score-{suffix}.json").read_text())
        assert result["n_traces"] == ROWS


def check_windows_equal_seisbench(folder: Path, store: Path) -> None:
    import seisbench.data as sbd

    dataset = sbd.WaveformDataset(folder, component_order="ZNE", dimension_order="NCW", cache=None)
    windows = xr.open_zarr(store, chunks=None)["waveforms"]
    picked = np.random.default_rng(3).choice(WINDOWS[1], 64, replace=False)
    expected = dataset.get_waveforms(idx=picked.tolist()).astype(np.float32)
    assert np.array_equal(windows.isel(trace=picked).values, expected)


def check_split_from_the_store(work: Path) -> None:
    """The last split written (station-disjoint) from the store; the audit of the first
    (source-clusters) against the catalogue recomputed with pandas."""
    store = xr.open_zarr(work / f"catalogue-{ROWS}.zarr", chunks=None)
    frame = pd.DataFrame(
        {
            "station": store["station_network_code"].values.astype(object)
            + "."
            + store["station_code"].values.astype(object),
            "split": store["split"].values.astype(object),
        }
    )
    assert (frame.groupby("station")["split"].nunique() == 1).all()
    assert frame["split"].value_counts().sum() == ROWS
    audit = json.loads((work / "audit-source-clusters.json").read_text())
    assert sum(audit["counts"].values()) == ROWS
    assert audit["events_in_several_splits"] == 0
