"""The release-tuning attacks (`benchmarks/red_team/attack_release.py`) on a tiny bundle, through
the real referee: against the old policy (E1..E12 to 0.1 per release) the per-pair level solve
gains on the whole truth; against the Ladder on the public score, no knob search gains more than
1 AvgScore point on the private part beyond what the same search finds on public validation."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY_LAYOUT, smooth_wavefield

from benchmarks.red_team import attack_release as ar
from benchmarks.red_team import harness
from benchmarks.red_team.baselines import BASELINES
from seisctf.location import StoreLocation
from seisctf.pipeline.bundles.segments import build_bundle, write_bundle
from seisctf.scoring import referee, release
from seisctf.scoring.ctf import score_ctf

GOAL_GAIN = 1.0


def test_best_power_solves_the_long_time_quadratic():
    alpha, beta = 0.3, 0.2  # e(a)² = 1 − 2aα + a²β; best a = α/β = 1.5

    def score(a: float) -> float:
        return 100 * (1 - np.sqrt(1 - 2 * a * alpha + a * a * beta))

    assert ar.best_power(4.0, score(1.0), score(4.0)) == pytest.approx(1.5, rel=1e-9)
    rounded = ar.best_power(4.0, round(score(1.0), 1), round(score(4.0), 1))
    assert rounded == pytest.approx(1.5, rel=0.02)  # scores to 0.1 still solve it
    assert ar.best_power(4.0, -5.0, -50.0) == 0.0  # silence (score 0) beats both
    assert ar.best_power(0.25, 10.0, -100.0) == 1.0  # clipped: the best power seen


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """(public URL, truth URL, public arrays, manifest) of a tiny bundle with a random secret."""
    root = tmp_path_factory.mktemp("release-tuning")
    secret = "a secret of the release-tuning test"
    public, truth = str(root / "public.zarr"), str(root / "truth.zarr")
    write_bundle(
        build_bundle(smooth_wavefield(), TINY_LAYOUT, secret),
        StoreLocation(public),
        StoreLocation(truth),
        secret,
        quiet=True,
    )
    arrays, manifest = harness.load_public(public)
    return public, truth, arrays, manifest


def _private(truth_url: str, submissions: dict) -> dict[str, float]:
    results = score_ctf(StoreLocation(truth_url), submissions, quiet=True)
    return {r["name"]: r["parts"]["private"]["avg_score"] for r in results}


def test_the_old_policy_is_tuned_by_three_releases(bundle):
    """From persistence with its tails at a tenth of their power: the per-pair solve finds
    every pair's level again."""
    _, truth_url, arrays, manifest = bundle
    persistence = BASELINES["persistence"](arrays, manifest)
    start = ar.turn_knob("tails", persistence, arrays, manifest, np.sqrt(0.1))

    def old(name, predictions):
        return ar.old_view(score_ctf(StoreLocation(truth_url), {name: predictions}, quiet=True)[0])

    transcript = ar.per_pair_levels(start, arrays, manifest, old, "old")
    assert len(transcript.views) == 3
    gain = transcript.views[-1]["avg_score"] - old("start", start)["avg_score"]
    assert gain > 2 * GOAL_GAIN, transcript.views


@pytest.mark.parametrize("knob", list(ar.KNOBS))
def test_a_ladder_search_gains_nothing_beyond_validation(bundle, knob, tmp_path):
    public_url, truth_url, arrays, manifest = bundle
    start = BASELINES["persistence"](arrays, manifest)
    asked = release.Release(f"attacker-{knob}", str(tmp_path / "quota.sqlite"))

    def released(name, predictions):
        judge = referee.Referee(release=asked)
        return referee.run_ctf(StoreLocation(truth_url), {name: predictions}, judge, quiet=True)[0]

    transcript = ar.ladder_search(knob, start, arrays, manifest, released, "new")
    assert len(transcript.views) == 3 and release.used(asked) == 3
    assert all(set(view) >= {"public_score", "improved"} for view in transcript.views)
    assert all("scores" not in view for view in transcript.views)
    val_arrays, val_manifest = ar.validation_task(arrays, manifest)
    val_start = BASELINES["persistence"](val_arrays, val_manifest)
    local = ar.validation_release(public_url, manifest)
    public_only = ar.ladder_search(knob, val_start, val_arrays, val_manifest, local, "val")
    standing = ar.standing_index(transcript)
    factor = public_only.factors[ar.standing_index(public_only)]
    private = _private(
        truth_url,
        {
            "start": start,
            "standing": ar.turn_knob(knob, start, arrays, manifest, transcript.factors[standing]),
            "validated": ar.turn_knob(knob, start, arrays, manifest, factor),
        },
    )
    gain = private["standing"] - private["start"]
    assert gain - max(0.0, private["validated"] - private["start"]) <= GOAL_GAIN
    if knob == "tails":  # the public score has no long-time score: tails move nothing
        assert [view["improved"] for view in transcript.views] == [True, False, False]
        assert gain == 0.0
