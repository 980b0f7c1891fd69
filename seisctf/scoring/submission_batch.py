"""A batch of CTF submissions scored so that no submission stops another: every valid one is
scored, every refused one is reported (`Refusals`: its name and its `InvalidInput`).

Each submission is first opened alone (`submission.open_submission`: names, shapes, dtypes and
sizes checked from metadata, a longdouble array's values read), so one refused there is set
aside at no cost to the others; the rest are scored together in one pass. A refusal only that
pass can find (NaN or Inf values, a chunk that does not decode) fails the pass for all of them,
so the batch is then scored again: the truth alone first (a truth that does not match its
commitment still refuses the whole batch), then one submission at a time. Scores are the same
alone or together (every reduction runs on regions fixed by the shapes, `seisctf.scoring.ctf`).

A batch of one is scored as it always was: its refusal is raised as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from seisctf import storage
from seisctf.ctf_json import CtfManifest
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring import ctf
from seisctf.scoring.submission import SubmissionLimits, open_submission

Result = dict[str, Any]
Refusals = dict[str, InvalidInput]
Score = Callable[[Mapping[str, Any]], list[Result]]


def score_each(
    score: Score, open_one: Callable[[Any], Any], submissions: Mapping[str, Any]
) -> tuple[list[Result], Refusals]:
    """(results in submission order, refusals) of `submissions` (name → source): `open_one`
    opens a source (InvalidInput when refused), `score` scores opened submissions by name
    (`score({})` checks the truth alone). See the module doc."""
    if len(submissions) <= 1:
        return score(submissions), {}
    opened: dict[str, Any] = {}
    refused: Refusals = {}
    for name, source in submissions.items():
        try:
            opened[name] = open_one(source)
        except InvalidInput as error:
            refused[name] = error
    results: list[Result] = []
    try:
        results = score(opened) if opened else []
    except InvalidInput as error:
        score({})  # raises when the truth itself is refused
        if len(opened) == 1:
            refused |= {name: error for name in opened}
        else:
            for name, arrays in opened.items():
                try:
                    results += score({name: arrays})
                except InvalidInput as alone:
                    refused[name] = alone
    return results, {name: refused[name] for name in submissions if name in refused}


def score_ctf_batch(
    truth_store: StoreLocation,
    submissions: Mapping[str, Any],
    *,
    truth: ctf.OpenedTruth,
    convention: str = "reference",
    limits: SubmissionLimits | None = None,
    quiet: bool = False,
    metrics: Sequence[str] = (),
) -> tuple[list[Result], Refusals]:
    """`ctf.score_ctf` of a batch against the opened `truth` (`ctf.open_truth` of
    `truth_store`), each submission refused alone (module doc)."""

    def open_one(source: Any) -> Any:
        return open_submission(source, truth[0], limits)

    def score(opened: Mapping[str, Any]) -> list[Result]:
        return ctf.score_ctf(
            truth_store,
            opened,
            convention=convention,
            limits=limits,
            quiet=quiet,
            truth=truth,
            metrics=metrics,
        )

    return score_each(score, open_one, submissions)


def score_validation_batch(
    public_store: StoreLocation,
    submissions: Mapping[str, Any],
    *,
    convention: str = "reference",
    limits: SubmissionLimits | None = None,
    quiet: bool = False,
    metrics: Sequence[str] = (),
) -> tuple[list[Result], Refusals]:
    """`ctf.score_validation` of a batch, each submission refused alone (module doc)."""
    public = CtfManifest.from_attrs(storage.read_attrs(public_store), public_store.url)
    manifest = public.validation_manifest(public_store.url)

    def open_one(source: Any) -> Any:
        return open_submission(source, manifest, limits)

    def score(opened: Mapping[str, Any]) -> list[Result]:
        return ctf.score_validation(
            public_store,
            opened,
            convention=convention,
            limits=limits,
            quiet=quiet,
            metrics=metrics,
        )

    return score_each(score, open_one, submissions)


def one_line(text: object) -> str:
    """`text` with every run of whitespace (newlines in a file name or a parser's message) one
    space."""
    return " ".join(str(text).split())


def raise_refusals(refused: Refusals, scored: int) -> None:
    """After the `scored` others were written: InvalidInput listing each refused submission on a
    line of its own (name, then what was refused and why); a lone refusal is raised as is."""
    if not refused:
        return
    if len(refused) == 1 and not scored:
        raise next(iter(refused.values()))
    others = f"; the other {scored} scored, their results written" if scored else ""
    lines = "".join(f"\n  {one_line(name)}: {one_line(error)}" for name, error in refused.items())
    raise InvalidInput(
        "submissions", f"{len(refused)} of {len(refused) + scored} refused{others}:{lines}"
    )
