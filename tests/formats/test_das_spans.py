"""A DAS store's gaps and overlaps beyond what its root attrs hold (`das_spans`): the first
`conventions.ATTR_DAS_SPANS` of each kind in the root attrs, every one in the group of its kind,
checked against the spans worked out from the files' own layout; an append and an up-to-date
re-run report the same; a one-shot ingest and an append write the same groups."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from test_das_ingest import START, STEP_NS, _assert_store_equals_dascore, write_series

from seisctf import conventions as cv
from seisctf.cli import main
from seisctf.formats.das.das_files import ingest_das
from seisctf.formats.das.das_spans import read_spans
from seisctf.location import StoreLocation

BLOCK = 64
LIMIT = 2
# (first grid sample, samples, offset ns) per file: 4 gaps of 10 samples, then 2 overlaps of 10.
LAYOUT = ((0, 100, 0), (110, 50, 0), (170, 40, 0), (220, 30, 0), (260, 50, 0), (300, 40, 0),
          (330, 30, 0))  # fmt: skip


def expected_spans(layout, paths) -> tuple[list[tuple], list[tuple]]:
    """(first sample, samples, earlier file, later file) of each gap and overlap between
    consecutive files of `layout` (time-ordered, none contained in another), from the layout."""
    gaps, overlaps = [], []
    for (first, samples, _), (next_first, _, _), earlier, later in zip(
        layout, layout[1:], paths, paths[1:], strict=False
    ):
        stop = first + samples
        if next_first > stop:
            gaps.append((stop, next_first - stop, earlier, later))
        elif next_first < stop:
            overlaps.append((next_first, stop - next_first, earlier, later))
    return gaps, overlaps


def _iso(first_sample: int) -> str:
    instant = START + np.timedelta64(first_sample * STEP_NS, "ns")
    return np.datetime_as_string(instant, unit="ns").rstrip("0").rstrip(".") + "Z"


def _as_tuples(spans, sides) -> list[tuple]:
    return [(s["first_sample"], s["samples"], *(s[side] for side in sides)) for s in spans]


@pytest.fixture
def few_in_attrs(monkeypatch):
    monkeypatch.setattr(cv, "ATTR_DAS_SPANS", LIMIT)


def test_spans_beyond_the_root_attrs_go_to_groups(tmp_path, few_in_attrs):
    files = write_series(tmp_path / "files", "PRODML", layout=LAYOUT)
    paths = [str(path) for path in files]
    gaps, overlaps = expected_spans(LAYOUT, paths)
    assert (len(gaps), len(overlaps)) == (4, 2)  # more gaps than the attrs hold; overlaps fit
    out = tmp_path / "store.zarr"
    report = ingest_das([str(tmp_path / "files")], StoreLocation(out), block_samples=BLOCK,
                        quiet=True)  # fmt: skip
    _assert_store_equals_dascore(out, files)
    assert (report.n_gaps, len(report.gaps), report.n_overlaps) == (4, LIMIT, 2)
    group = zarr.open_group(str(out), mode="r")
    attrs = dict(group.attrs)
    assert attrs["gap_count"] == 4 and "overlap_count" not in attrs
    assert _as_tuples(attrs["gaps"], ("after", "before")) == gaps[:LIMIT]
    every = read_spans(group, "gaps")
    assert _as_tuples(every, ("after", "before")) == gaps
    assert every[:LIMIT] == attrs["gaps"]  # the same fields, in the same order, as the attrs'
    assert [g["start_time"] for g in every] == [_iso(first) for first, *_ in gaps]
    assert [g["duration_s"] for g in every] == pytest.approx([0.2] * 4, rel=1e-6)
    assert _as_tuples(read_spans(group, "overlaps"), ("earlier", "later", "kept")) == [
        (*overlap, overlap[-1]) for overlap in overlaps
    ]
    assert "overlaps" not in group  # they all fit in the attrs
    root = json.loads((out / "zarr.json").read_text())
    assert len(root["attributes"]["gaps"]) == LIMIT  # the root metadata holds the first only
    assert "gaps" in root["consolidated_metadata"]["metadata"]  # written before the marker
    again = ingest_das([str(tmp_path / "files")], StoreLocation(out), block_samples=BLOCK,
                       quiet=True)  # fmt: skip
    assert again.up_to_date and (again.n_gaps, again.gaps) == (4, report.gaps)


def test_the_command_prints_the_first_and_counts_the_rest(tmp_path, few_in_attrs, capsys):
    write_series(tmp_path / "files", "PRODML", layout=LAYOUT)
    out = tmp_path / "store.zarr"
    assert main(["ingest", "das", str(tmp_path / "files"), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.startswith("gap:")] == [
        "gap: 10 samples from " + _iso(100),
        "gap: 10 samples from " + _iso(160),
        "gap: and 2 more, every one in the store's `gaps` group (`das_spans.read_spans`)",
    ]
    assert len([line for line in printed if line.startswith("overlap:")]) == 2
    assert "4 gap(s), 2 overlap(s), 0 problem(s)" in printed[-1]


def test_an_append_writes_the_groups_of_a_one_shot_ingest(tmp_path, few_in_attrs):
    first = write_series(tmp_path / "day1", "PRODML", seed=1, layout=LAYOUT[:2])
    second = write_series(tmp_path / "day2", "PRODML", seed=2, layout=LAYOUT[2:])
    appended, whole = tmp_path / "appended.zarr", tmp_path / "whole.zarr"
    one = ingest_das([str(tmp_path / "day1")], StoreLocation(appended), block_samples=BLOCK,
                     quiet=True)  # fmt: skip
    assert one.n_gaps == 1 and "gaps" not in zarr.open_group(str(appended), mode="r")
    report = ingest_das([str(tmp_path / "day2")], StoreLocation(appended), append=True,
                        quiet=True)  # fmt: skip
    ingest_das([str(tmp_path / "day1"), str(tmp_path / "day2")], StoreLocation(whole),
               block_samples=BLOCK, quiet=True)  # fmt: skip
    _assert_store_equals_dascore(appended, first + second)
    paths = [str(path) for path in first + second]
    gaps, _ = expected_spans(LAYOUT, paths)
    assert report.n_gaps == 4
    groups = [zarr.open_group(str(store), mode="r") for store in (appended, whole)]
    assert [_as_tuples(read_spans(g, "gaps"), ("after", "before")) for g in groups] == [gaps] * 2
    assert [g.attrs["gap_count"] for g in groups] == [4, 4]
