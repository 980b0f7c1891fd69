"""The DAS ingest plan on made-up headers: grid placement, axis choice, gaps and overlaps."""

from __future__ import annotations

import math

import pytest

from seisctf.errors import InvalidInput
from seisctf.formats.das.das_parts import make_das_plan
from seisctf.formats.das.das_plan import DasFileScan, DasPatch, chunk_rows, rate_of_step

STEP = 20_000_000  # 50 Hz
T0 = 1_700_000_000 * 10**9


def _patch(path: str, first: float, n_time: int, **changes) -> DasPatch:
    """A 12-channel strain-rate patch starting `first` samples after T0."""
    fields = dict(path=path, index=0, file_format="PRODML", file_version="2.1",
                  start_ns=T0 + round(first * STEP), step_ns=STEP, n_time=n_time,
                  distance_start_m=0.0, distance_step_m=1.0, n_distance=12,
                  quantity="strain_rate", units="1 / s", gauge_length_m=10.0)  # fmt: skip
    return DasPatch(**{**fields, **changes})


def _scans(*patches: DasPatch) -> list[DasFileScan]:
    return [
        DasFileScan(p.path, {"path": p.path, "size": 1, "sha256": p.path}, (p,)) for p in patches
    ]


def test_rate_is_the_shortest_decimal_of_the_step():
    assert rate_of_step(STEP) == 50.0
    assert rate_of_step(333_333_333) == 3.0
    assert round(1e9 / rate_of_step(20_000_001)) == 20_000_001
    assert round(1e9 / rate_of_step(810_372)) == 810_372


def test_patches_start_at_their_nearest_grid_sample_and_later_ones_win():
    plan = make_das_plan(
        _scans(
            _patch("c", 250.3, 50),  # 0.3 sample late: grid sample 250
            _patch("a", 0, 100),
            _patch("b", 119.5, 100),  # half a sample: rounds up to 120
            _patch("d", 260, 10),  # inside c: overlaps it wholly
        ),
        block_samples=64,
    )
    assert [(p.patch.path, p.first_index) for p in plan.placed] == [
        ("a", 0), ("b", 120), ("c", 250), ("d", 260)
    ]  # fmt: skip
    assert [round(p.offset_s, 9) for p in plan.placed] == [0.0, -0.01, 0.006, 0.0]
    assert plan.n_time == 300 and plan.n_blocks == 5
    gaps, overlaps = plan.gaps_and_overlaps()
    assert [(g["first_sample"], g["samples"], g["after"], g["before"]) for g in gaps] == [
        (100, 20, "a", "b"), (220, 30, "b", "c")
    ]  # fmt: skip
    assert [(o["first_sample"], o["samples"], o["kept"]) for o in overlaps] == [(260, 10, "d")]
    pieces = plan.pieces_by_block()
    assert [(p.patch.path, k0, k1) for p, k0, k1 in pieces[1]] == [("a", 64, 100), ("b", 0, 8)]
    assert [(p.patch.path, k0, k1) for p, k0, k1 in pieces[4]] == [("c", 6, 50), ("d", 0, 10)]


def test_the_axis_most_patches_share_wins_and_others_are_problems():
    plan = make_das_plan(
        _scans(
            _patch("a", 0, 100, step_ns=2 * STEP),  # the earliest, but alone at 25 Hz
            _patch("b", 200, 100),
            _patch("c", 300, 100, step_ns=STEP + 1),  # 1 ns off: 0.5e-5 samples of drift
            _patch("d", 400, 100, n_distance=10),
            _patch("e", 500, 100, gauge_length_m=math.nan),
        )
    )
    assert plan.axis.step_ns == STEP and plan.start_ns == T0 + 200 * STEP
    assert [p.patch.path for p in plan.placed] == ["b", "c"]
    assert [problem.split(":")[0] for problem in plan.problems] == ["a", "d", "e"]
    assert "time step 0.04 s (25 Hz) differs from the store's 0.02 s (50 Hz)" in plan.problems[0]
    assert "gauge length nan m differs" in plan.problems[2]
    assert plan.block_samples == chunk_rows(12) == 4 * 2**20 // (4 * 12)
    assert chunk_rows(3000) == 1024


def test_nothing_readable_or_starting_before_the_store_is_invalid_input():
    unreadable = DasFileScan("x.h5", {}, problems=("x.h5: not a DAS file DASCore knows",))
    readable = r"no input is readable \(none of the 1 file\(s\) given holds readable data\)"
    with pytest.raises(InvalidInput, match=readable + ": x.h5: not a DAS") as error:
        make_das_plan([unreadable])
    assert error.value.what == "x.h5"
    kept = make_das_plan(_scans(_patch("a", 0, 100))).placed
    with pytest.raises(InvalidInput, match="starts before the store") as error:
        make_das_plan(_scans(_patch("early", -3, 10)), 64, axis=None, start_ns=T0, kept=kept)
    assert error.value.what == "early"


def test_a_patch_unpickled_shares_its_common_text_and_keeps_its_values():
    """Patches arrive in the client pickled, a file at a time: each is made again through its
    constructor, so the text most patches share (format, version, quantity, units) is one
    string for all of them, and every value is as it was."""
    import pickle
    from dataclasses import asdict

    # Text made at run time (not the same object as a literal elsewhere in the process).
    made = [_patch(f"f{i}.h5", i * 100.0, 100, file_format="".join(["PRO", "DML"]),
                   units=" ".join(["1", "/", "s"])) for i in range(2)]  # fmt: skip
    first, second = (pickle.loads(pickle.dumps(patch)) for patch in made)
    assert [first, second] == made and asdict(first) == asdict(made[0])
    assert first.file_format is second.file_format and first.units is second.units
    assert DasPatch.from_json(first.to_json()) == first
    assert not hasattr(first, "__dict__")  # slots: no dict a patch
