"""The referee's protocol, one for every kind of score: quota → score → release → write → record.

A run first checks the SQLite leaderboard it records into (a file that is not one is refused
before any work), then takes the participant's release slots (`release.quota_slots`: refused
over quota, nothing scored), scores, turns each result into the participant's view when it is
released (`release.released_view`: a CTF result's rung on the participant's Ladder, taken as
pending like the slots; a pick result rounded), hands what was released, or the results, to the
caller's `write` (files, printing), and records the results last with the commitment of the
truth they were scored against (`leaderboard.record`, once per entry: a re-run adds no row; a
released CTF result in full beside what was released, `release.recorded_result`), all while the
slots are still held: a run that fails at any step gives its slots and rungs back, since nothing
was released, and one whose outputs cannot be written records nothing. A CTF batch scores
every valid submission and refuses the others alone (`submission_batch`): a refused
submission's slot is given back, the others' are kept, and the refusals are raised once the
others are written and recorded.

The truth is opened once: the commitment a CTF entry records comes from the manifest the scoring
opened (`leaderboard.truth_commitment_of`), a picks entry's from its result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from seisctf.location import StoreLocation
from seisctf.scoring import leaderboard
from seisctf.scoring.ctf import open_truth
from seisctf.scoring.ladder import climbing
from seisctf.scoring.picks import DEFAULT_THRESHOLD, DEFAULT_TOLERANCE_S, score_picks
from seisctf.scoring.release import Release, quota_slots, recorded_result, released_view
from seisctf.scoring.submission import SubmissionLimits
from seisctf.scoring.submission_batch import (
    Refusals,
    raise_refusals,
    score_ctf_batch,
    score_validation_batch,
)

Result = dict[str, Any]
Write = Callable[[list[Result]], None]


@dataclass(frozen=True)
class Referee:
    """What a run does besides scoring: `release` the participant's view, counted against a
    quota (None: the organisers' full results, nothing counted); record into the SQLite
    leaderboard `db` (None: not recorded) with the submitter's `metadata`; `submission_key`
    names the entry of a single submission (`leaderboard.record`: recorded again, it adds no
    row; None: the entry's own `entry_key`)."""

    release: Release | None = None
    db: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    submission_key: str | None = None


def _nothing(results: list[Result]) -> None:
    """The default `write`: the caller uses the returned results."""


def run(
    family: str,
    names: Sequence[str],
    score: Callable[[], tuple[list[Result], str | None, Refusals]],
    referee: Referee,
    write: Write = _nothing,
) -> list[Result]:
    """The protocol (module doc) around `score`, which returns the results of the submissions
    `names` it scored, the commitment of the truth they were scored against, and those it
    refused; returns the results as written (released when `referee.release`). Refused
    submissions get their slots back and, after the others are written and recorded, an
    InvalidInput naming each (`submission_batch.raise_refusals`)."""
    if referee.db:
        leaderboard.check_database(referee.db)
    with (
        quota_slots(referee.release, family, names) as give_back,
        climbing(referee.release) as climb,
    ):
        results, commitment, refused = score()
        give_back(refused)
        views = (
            [released_view(family, result, commitment, climb) for result in results]
            if referee.release
            else None
        )
        shown = results if views is None else views
        if shown or not refused:
            write(shown)
        if referee.db:
            released: Sequence[dict[str, Any] | None] = (
                views if views is not None else [None] * len(results)
            )
            for result, view in zip(results, released, strict=True):
                leaderboard.record(
                    referee.db,
                    recorded_result(family, result, view),
                    family=family,
                    truth_commitment=commitment,
                    metadata=referee.metadata,
                    submission_key=referee.submission_key if len(results) == 1 else None,
                )
    raise_refusals(refused, len(shown))
    return shown


def run_ctf(
    truth_store: StoreLocation,
    submissions: Mapping[str, Any],
    referee: Referee = Referee(),
    write: Write = _nothing,
    *,
    convention: str = "reference",
    limits: SubmissionLimits | None = None,
    quiet: bool = False,
    metrics: Sequence[str] = (),
) -> list[Result]:
    """`seisctf score ctf --truth`: named submissions (`ctf.score_ctf`, one refused alone:
    `submission_batch`) scored against the truth group at `truth_store`, opened once for the
    scores and the commitment they record."""

    def score() -> tuple[list[Result], str, Refusals]:
        truth = open_truth(truth_store)
        results, refused = score_ctf_batch(
            truth_store,
            submissions,
            convention=convention,
            limits=limits,
            quiet=quiet,
            truth=truth,
            metrics=metrics,
        )
        return results, leaderboard.truth_commitment_of(truth[0]), refused

    return run("ctf", list(submissions), score, referee, write)


def run_validation(
    public_store: StoreLocation,
    submissions: Mapping[str, Any],
    write: Write = _nothing,
    *,
    convention: str = "reference",
    limits: SubmissionLimits | None = None,
    quiet: bool = False,
    metrics: Sequence[str] = (),
) -> list[Result]:
    """`seisctf score ctf --validation`: submissions of the validation inputs scored against the
    public bundle's targets (`ctf.score_validation`); local scores, never released or recorded."""

    def score() -> tuple[list[Result], None, Refusals]:
        results, refused = score_validation_batch(
            public_store,
            submissions,
            convention=convention,
            limits=limits,
            quiet=quiet,
            metrics=metrics,
        )
        return results, None, refused

    return run("ctf", list(submissions), score, Referee(), write)


def run_picks(
    truth_store: StoreLocation,
    submission: StoreLocation | pd.DataFrame,
    name: str,
    referee: Referee = Referee(),
    write: Write = _nothing,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    threshold: float = DEFAULT_THRESHOLD,
    split: str = "test",
    group_by: Sequence[str] = (),
    quiet: bool = True,
) -> Result:
    """`seisctf score picks`: one pick table (`picks.score_picks`) scored against the
    event-window store at `truth_store`; its entry records the result's `truth_commitment`."""

    def score() -> tuple[list[Result], str, Refusals]:
        result = score_picks(
            truth_store,
            submission,
            name=name,
            tolerance_s=tolerance_s,
            threshold=threshold,
            split=split,
            group_by=group_by,
            quiet=quiet,
        )
        return [result], result["truth_commitment"], {}

    return run("picks", [name], score, referee, write)[0]
