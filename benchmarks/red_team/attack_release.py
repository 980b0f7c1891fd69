"""Release tuning: a participant tunes a submission against released scores, with 3 releases
(the quota allows 5 in 24 h), and keeps what the releases say is best.

What the participant has: the public bundle, the installed package, the public leaderboard
(organiser baselines included) and what each release tells. A release is a callable
`release(name, predictions) -> dict` that returns the participant's view of one submission
(`old_view` for the policy before the Ladder, the released JSON of `seisctf score ctf --release`
for the current one).

- `per_pair_levels` (against the old policy, `seisctf-release-2`: E1..E12 of the whole truth to
  0.1 in every release). The reference convention's long-time error of a tail whose power
  spectrum is a·P (P the participant's own tail's) is e(a)² = 1 − 2aα + a²β, with two unknowns
  per pair (α = ⟨P_T, P⟩/‖P_T‖², β = ‖P‖²/‖P_T‖²). Release 1 gives e(1), release 2 e(a₂) per
  pair (a₂ = 1/4: e(a)² is convex in a and 1 at a = 0, so a lower level never reaches the clip
  at −100 that e(1) does not reach), which solve for α, β; release 3 puts every pair's tail at
  the best level a* = α/β (zero where α ≤ 0: silence scores 0).
- `ladder_search` (against the current policy: one number, the Ladder's best public score).
  Release 1 is the start; release 2 moves one knob by a first factor; release 3 goes on in that
  direction when release 2 improved, else tries the other direction. Knobs (`KNOBS`): the tails'
  amplitude (every long-time pair's last k_long rows), the forecasts' amplitude (every other
  forecast row), the reconstructions' amplitude. The submission that counts at the close is
  the one that last improved the participant's best (`seisctf.scoring.release.standing`).

A tail that is all zeros (silence chosen on a hold-out) has no level to scale: it is replaced by
the most recent input's last k_long rows, the shape every level is then a multiple of.

What the releases add to what public data already tells: `validation_task` is the bundle's own
validation task (every forecast pair's most recent input cut where its public target X{id}val
starts), and `validation_release` answers like a release from the participant's local
`score ctf --validation` (the mean of the short-time validation scores, through the same
Ladder). The same search run on it picks a factor without any truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from benchmarks.red_team.baselines import pair_input_names
from seisctf import conventions as cv
from seisctf.location import StoreLocation
from seisctf.scoring import ladder
from seisctf.scoring.ctf import score_validation

Predictions = dict[str, np.ndarray]
Release = Callable[[str, Predictions], dict]
LONG_TIME, SHORT_TIME, RECONSTRUCTION = "long_time", "short_time", "reconstruction"
OLD_SCORE_DIGITS = 1  # the old policy's released scores: steps of 0.1
PROBE_POWER = 0.25
MAX_POWER = 1e4
# Per knob: (first factor, next in the same direction, the other direction), of amplitudes.
KNOBS = {
    "tails": (0.5, 0.25, 2.0),
    "forecasts": (0.8, 0.64, 1.25),
    "reconstructions": (0.9, 0.81, 1.1),
}


@dataclass
class Transcript:
    """What an attack released, in order: names, the views it was given, the predictions."""

    names: list[str] = field(default_factory=list)
    views: list[dict] = field(default_factory=list)
    factors: list[float] = field(default_factory=list)

    def add(self, release: Release, name: str, predictions: Predictions, factor=1.0) -> dict:
        view = release(name, predictions)
        self.names.append(name)
        self.views.append(view)
        self.factors.append(factor)
        return view


def old_view(result: dict) -> dict:
    """What policy `seisctf-release-2` released of a full referee result: E1..E12 and AvgScore
    of the whole truth rounded to 0.1."""
    return {
        "scores": {
            name: None if value is None else round(value, OLD_SCORE_DIGITS)
            for name, value in result["scores"].items()
        },
        "avg_score": round(result["avg_score"], OLD_SCORE_DIGITS),
    }


def long_time_scores(manifest: dict) -> dict[str, str]:
    """{score name: test array} of the long-time scores, in the referee's order."""
    ordered = [(pair, metric) for pair in manifest["pairs"] for metric in pair["metrics"]]
    return {
        f"E{index}": pair["test"]
        for index, (pair, metric) in enumerate(ordered, start=1)
        if metric == LONG_TIME
    }


def tail_shapes(predictions: Predictions, arrays: dict, manifest: dict) -> dict[str, np.ndarray]:
    """{test: (k_long, space)} each long-time pair's tail, or where it is all zeros the most
    recent input's last k_long rows."""
    k_long, shapes = manifest["k_long"], {}
    for pair in manifest["pairs"]:
        if LONG_TIME in pair["metrics"]:
            tail = predictions[pair["test"]][-k_long:]
            recent = arrays[pair_input_names(pair)[-1]][-k_long:]
            shapes[pair["test"]] = tail if np.any(tail) else recent
    return shapes


def with_tails(
    predictions: Predictions, shapes: dict[str, np.ndarray], powers: dict[str, float], k_long: int
) -> Predictions:
    """`predictions` with each test's last k_long rows set to sqrt(power) × its shape."""
    out = {name: array.copy() for name, array in predictions.items()}
    for test, shape in shapes.items():
        out[test][-k_long:] = np.sqrt(max(powers.get(test, 1.0), 0.0)) * shape
    return out


def best_power(a2: float, score_1: float | None, score_2: float | None) -> float:
    """a* = α/β from the long-time scores E(1) and E(a2) (module docstring); 0 when the
    quadratic says silence is best. A missing or clipped score solves nothing: the best of the
    powers seen then (0 scores 0)."""
    if score_1 is None or score_2 is None or min(score_1, score_2) <= -100.0:
        seen = {0.0: 0.0, 1.0: score_1 if score_1 is not None else -100.0}
        seen[a2] = score_2 if score_2 is not None else -100.0
        return max(seen, key=seen.get)
    e1, e2 = 1.0 - score_1 / 100.0, 1.0 - score_2 / 100.0
    beta = (a2 * e1**2 - e2**2 - a2 + 1.0) / (a2 - a2**2)
    alpha = (1.0 + beta - e1**2) / 2.0
    if alpha <= 0.0 or beta <= 0.0:
        return 0.0
    return float(min(alpha / beta, MAX_POWER))


def per_pair_levels(
    start: Predictions,
    arrays: dict,
    manifest: dict,
    release: Release,
    label: str,
    known_first: dict | None = None,
) -> Transcript:
    """The issue's attack against the old policy, in 3 releases (module docstring); in 2 when
    `known_first` is the view of the start (its tails all nonzero) that the public leaderboard
    already shows (an organiser baseline)."""
    k_long, long_scores = manifest["k_long"], long_time_scores(manifest)
    shapes = tail_shapes(start, arrays, manifest)
    transcript = Transcript()
    first = known_first or transcript.add(
        release, f"{label}-1", with_tails(start, shapes, {}, k_long)
    )
    probes = dict.fromkeys(long_scores.values(), PROBE_POWER)
    second = transcript.add(release, f"{label}-2", with_tails(start, shapes, probes, k_long))
    best = {
        test: best_power(probes[test], first["scores"][score], second["scores"][score])
        for score, test in long_scores.items()
    }
    transcript.add(release, f"{label}-3", with_tails(start, shapes, best, k_long))
    return transcript


def turn_knob(
    knob: str, predictions: Predictions, arrays: dict, manifest: dict, factor: float
) -> Predictions:
    """`predictions` with one knob's rows multiplied by `factor` (module docstring)."""
    k_long = manifest["k_long"]
    out = {name: array.copy() for name, array in predictions.items()}
    if knob == "tails":
        shapes = tail_shapes(predictions, arrays, manifest)
        return with_tails(out, shapes, dict.fromkeys(shapes, factor**2), k_long)
    for pair in manifest["pairs"]:
        test, metrics = pair["test"], pair["metrics"]
        if knob == "reconstructions" and RECONSTRUCTION in metrics:
            out[test] *= factor
        elif knob == "forecasts" and RECONSTRUCTION not in metrics:
            rows = slice(0, -k_long) if LONG_TIME in metrics else slice(None)
            out[test][rows] *= factor
    return out


def ladder_search(
    knob: str, start: Predictions, arrays: dict, manifest: dict, release: Release, label: str
) -> Transcript:
    """Release the start, then a 1-D search of one knob with the Ladder's answers (module
    docstring); the transcript's views are the released JSON objects."""
    first, onward, back = KNOBS[knob]
    transcript = Transcript()
    transcript.add(release, f"{label}-start", start)
    moved = turn_knob(knob, start, arrays, manifest, first)
    improved = transcript.add(release, f"{label}-{knob}-x{first:g}", moved, first)["improved"]
    factor = onward if improved else back
    again = turn_knob(knob, start, arrays, manifest, factor)
    transcript.add(release, f"{label}-{knob}-x{factor:g}", again, factor)
    return transcript


def standing_index(transcript: Transcript) -> int:
    """The release that counts at the close: the last one that improved the Ladder's best."""
    improved = [i for i, view in enumerate(transcript.views) if view.get("improved")]
    return improved[-1] if improved else 0


def validation_task(arrays: dict, manifest: dict) -> tuple[dict, dict]:
    """(inputs, manifest) of the bundle's validation task: every forecast pair whose validation
    target exists, its test the target X{id}val, its most recent input cut where the target
    starts (the target's rows are that input's last ones)."""
    entries = {entry["id"]: entry for entry in manifest["validation"]}
    inputs, pairs = dict(arrays), []
    for pair in manifest["pairs"]:
        entry = entries.get(pair["id"])
        if entry is None or RECONSTRUCTION in pair["metrics"]:
            continue
        inputs[entry["source"]] = arrays[entry["source"]][: entry["start_index"]]
        pairs.append({**pair, "test": entry["target"], "shape": entry["shape"]})
    return inputs, {**manifest, "pairs": pairs}


def validation_release(public_url: str, manifest: dict) -> Release:
    """A participant's local stand-in for a release: `score ctf --validation` of the
    predictions (the reconstruction targets as zeros), the mean of its short-time scores,
    through the Ladder's rule."""
    zeros = {
        entry["target"]: np.zeros(entry["shape"])
        for entry in manifest["validation"]
        if RECONSTRUCTION in entry["metrics"]
    }
    best: list[float | None] = [None]

    def released(name: str, predictions: Predictions) -> dict:
        (result,) = score_validation(
            StoreLocation(public_url), {name: zeros | predictions}, quiet=True
        )
        shown = [
            value
            for score, value in result["scores"].items()
            if score in cv.SCORE_NAMES and result["metrics"][score] == SHORT_TIME
            and value is not None
        ]  # fmt: skip
        best[0], improved = ladder.next_best(best[0], float(np.mean(shown)))
        return {"public_score": best[0], "improved": improved}

    return released
