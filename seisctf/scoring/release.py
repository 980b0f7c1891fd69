"""What participants see: released scores (`seisctf score ctf|picks --release`) and the public
leaderboard's view of each entry (`public_entry`: `leaderboard.json`, the HTML site, the table
`seisctf leaderboard` prints), during the season and at the close (`final`).

Both are built key by key from allow-lists (a key the referee adds later is not published until
it is listed here). A released CTF result is one number, the participant's best public score
through the Ladder (`seisctf.scoring.ladder`: a new best only when it beats the old one by
`ladder.STEP`, rounded to it), with whether this submission set it. The public score
(`public_score`) is the mean, on the truth's public part (`seisctf.scoring.parts`), of the
scores of E1..E12 that are not long-time spectra: a long-time score answers to little more than
the level of a forecast's last rows, one number per pair, which a few releases of any number
that depends on it would tune against the truth (docs/release.md). A released pick result is
likewise one number through the Ladder: its public score (`public_pick_score`) is 100 times the
mean of the detection, P and S F1 of the public half of the scored traces
(`seisctf.scoring.picks`, "Public and private halves"), a percentage. The season's leaderboard
shows a CTF or pick entry's public score alone (its Ladder best, or for an entry recorded
without a release its public score rounded to the step); the final view (the close) a CTF
entry's private part's E1..E12 and averages, clipped to [-100, 100] and rounded to
`PUBLIC_DIGITS` decimals, and ranks by them; a pick entry's private half's precision, recall
and F1 and, as its `avg_score`, 100 times their mean F1. A pick entry scored before traces were
split shows its rates as before.
Both views hold, of a participant's released entries against one truth, only the one that set
their best (`standing`). Neither has raw (unclipped) scores, errors, norms, counts, residual
statistics (they are computed against the truth), per-split, per-group or per-trace values, or
the residual histogram; those stay in the organisers' SQLite leaderboard and `score --json`
output. Every release counts against a quota: at most `quota` releases per participant in any
`QUOTA_WINDOW_S` (a rolling 24 h), kept in an SQLite table `releases` (one `BEGIN IMMEDIATE`
transaction takes the slots, so concurrent referees cannot exceed it), or for a service on
PostgreSQL in its database's (`postgres_records`: one transaction under the participant's
advisory lock). A slot is taken before scoring and given back if the run fails (nothing was
released). The reasons (how much a published number tells about the truth) are in
docs/release.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from seisctf import conventions as cv
from seisctf.ctf_json import CtfResult
from seisctf.errors import InvalidInput
from seisctf.scoring import pick_metrics, postgres_records, sqlite_wal
from seisctf.scoring.ladder import STEP, Climb, Rung, to_step
from seisctf.scoring.release_request import DEFAULT_QUOTA as DEFAULT_QUOTA
from seisctf.scoring.release_request import MAX_PARTICIPANT_CHARS as MAX_PARTICIPANT_CHARS
from seisctf.scoring.release_request import Release, on_postgres
from seisctf.wording import counted

POLICY = "seisctf-release-4"  # -4: picks through the Ladder on their public half; CTF as -3
# The metrics of the scores a public score averages (every one but the long-time spectra).
SEASON_METRICS = (cv.METRIC_SHORT, cv.METRIC_RECON)
PUBLIC_DIGITS = 2  # the public leaderboard: scores and rates in steps of 0.01
SCORE_LIMIT = 100.0  # scores are clipped to [-SCORE_LIMIT, SCORE_LIMIT]
QUOTA_WINDOW_S = 24 * 3600
CTF_KEYS = ("name", "dataset", "convention", "truth_sha256_verified", "truth_note")
PICK_KEYS = ("name", "dataset", "split", "n_traces", "tolerance_s", "threshold",
             "truth_commitment")  # fmt: skip
PICK_PARTS = ("detection", "p", "s")
RATES = ("precision", "recall", "f1")
# A leaderboard entry's columns and result keys the public view keeps (scores come separately).
PUBLIC_ENTRY_KEYS = ("id", "timestamp", "dataset", "family", "model", "convention",
                     "truth_commitment", "metadata")  # fmt: skip
PUBLIC_RESULT_KEYS = ("truth_sha256_verified", "tolerance_s", "threshold", "truth_note")
# Submitter metadata keys the site shows in columns of their own; any other key is kept and
# listed as is.
METADATA_KEYS = ("code_url", "description", "run", "seed")
_SCHEMA = """CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY, participant TEXT NOT NULL, family TEXT NOT NULL, name TEXT,
    time_s REAL NOT NULL, state TEXT NOT NULL, holder TEXT NOT NULL DEFAULT '')"""
_INDEX = "CREATE INDEX IF NOT EXISTS releases_participant ON releases (participant, time_s)"


def rounded(value: float | None, digits: int) -> float | None:
    """`value` rounded to `digits` decimals (None stays None; -0.0 becomes 0.0)."""
    return None if value is None else round(float(value), digits) + 0.0


def _policy(**steps: Any) -> dict[str, Any]:
    return {"policy": POLICY, **steps}


def public_score(result: Mapping[str, Any]) -> float | None:
    """The public score of a `score ctf` result (its JSON object): the mean of its public part's
    scorable E1..E12 whose metric is not `long_time` (None when none is scorable); InvalidInput
    when it has no parts (a truth group without a commitment salt cannot be split: nothing can
    be released) or a field is malformed."""
    what = f"result {result.get('name')!r}"
    scored = CtfResult.from_json(result, what)
    public, metrics = scored.public_part(), scored.metrics
    if public is None or metrics is None:
        raise InvalidInput(
            what,
            "has no public part (the truth group has no ctf_salt to split its sensors by): "
            "nothing can be released; rebuild the bundle with this seisctf",
        )
    shown = [
        value
        for name, value in public.scores.items()
        if name in cv.SCORE_NAMES and metrics.get(name) in SEASON_METRICS and value is not None
    ]
    return sum(shown) / len(shown) if shown else None


def release_ctf(result: Mapping[str, Any], rung: Rung) -> dict[str, Any]:
    """The participant's view of a `score ctf` result: their Ladder `rung` after it (their best
    `public_score`, a multiple of `ladder.STEP`, and whether this submission set it)."""
    released = {key: result[key] for key in CTF_KEYS if key in result}
    released |= {"participant": rung.participant, "public_score": rung.best}
    released["improved"] = rung.improved
    released["release"] = _policy(part="public", metrics=list(SEASON_METRICS), ladder_step=STEP)
    return released


def _half(result: Mapping[str, Any], part: str) -> Mapping[str, Any]:
    """The `part` ("public" or "private") half of a `score picks` result; InvalidInput when it
    has none (fewer than 2 scored traces, or scored before traces were split)."""
    half = (result.get("parts") or {}).get(part)
    if not isinstance(half, Mapping) or not all(
        isinstance(half.get(k), Mapping) for k in PICK_PARTS
    ):
        raise InvalidInput(
            f"result {result.get('name')!r}",
            "has no public and private halves (fewer than 2 scored traces): nothing can be "
            "released; score it with this seisctf",
        )
    return half


def half_score(result: Mapping[str, Any], part: str = "public") -> float:
    """100 × the mean of the detection, P and S F1 of a `score picks` result's `part` half (an
    undefined F1 counts as 0): a percentage in [0, 100]."""
    return 100.0 * pick_metrics.mean_f1(dict(_half(result, part)))


def public_pick_score(result: Mapping[str, Any]) -> float:
    """The public score of a `score picks` result: `half_score` of its public half."""
    return half_score(result, "public")


def released_view(
    family: str, result: Mapping[str, Any], truth_commitment: str | None, climb: Climb
) -> dict[str, Any]:
    """What a participant is shown of a result: its Ladder rung (taken by `climb`) on its
    public score, a CTF result's `public_score` or a pick result's `public_pick_score`."""
    name = str(result["name"])
    if family == "ctf":
        score = public_score(result)
        return release_ctf(result, climb(str(truth_commitment), name, score))
    commitment = str(result["truth_commitment"])
    return release_picks(result, climb(commitment, name, public_pick_score(result)))


def recorded_result(
    family: str, result: Mapping[str, Any], released: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What the organisers' leaderboard records of a result: as scored when nothing was
    released; a released result in full with what was released under `released` (the final
    view needs its private part or half)."""
    if released is None:
        return dict(result)
    return {**result, "released": dict(released)}


def release_picks(result: Mapping[str, Any], rung: Rung) -> dict[str, Any]:
    """The participant's view of a `score picks` result: their Ladder `rung` after it (their
    best `public_pick_score`, a multiple of `ladder.STEP`, and whether this submission set it);
    nothing of the private half or of the whole split's rates."""
    released: dict[str, Any] = {"family": "picks"}
    released |= {key: result[key] for key in PICK_KEYS if key in result}
    released |= {"participant": rung.participant, "public_score": rung.best}
    released["improved"] = rung.improved
    released["release"] = _policy(part="public", score="mean_f1_percent", ladder_step=STEP)
    return released


# --- the public leaderboard ------------------------------------------------------------------


def _clipped(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return min(max(float(value), -SCORE_LIMIT), SCORE_LIMIT)


def public_value(value: object) -> float | None:
    """A score (or rate) as the public leaderboard shows it: clipped to [-100, 100], rounded to
    `PUBLIC_DIGITS` decimals; None for anything that is not a finite number."""
    clipped = _clipped(value)
    return None if clipped is None else rounded(clipped, PUBLIC_DIGITS)


def season_value(value: object) -> float | None:
    """A public score as the season's leaderboard shows it: clipped, rounded to `ladder.STEP`."""
    clipped = _clipped(value)
    return None if clipped is None else to_step(clipped)


def _season_score(entry: Mapping[str, Any]) -> float | None:
    """An entry's public score in the season's view: its Ladder best when it was released,
    else its `public_score` (`public_pick_score`) to the step; None for an entry scored before
    truths were split."""
    result = entry.get("result") or {}
    released = result.get("released")
    if isinstance(released, Mapping):
        return season_value(released.get("public_score"))
    if entry.get("family") == "picks":
        return season_value(public_pick_score(result)) if "parts" in result else None
    if "parts" not in result or "metrics" not in result:
        return None
    return season_value(public_score(result))


def _final_view(entry: Mapping[str, Any]) -> tuple[Any, dict[str, Any], Any]:
    """(avg_score, scores, extended_avg_score) of a CTF entry at the close: its private part
    (the whole truth for an entry scored before truths were split)."""
    result = entry.get("result") or {}
    parts = result.get("parts") or {}
    scored = parts.get("private") or {
        "avg_score": entry.get("avg_score"),
        "scores": entry.get("scores") or {},
        "extended_avg_score": result.get("extended_avg_score"),
    }
    scores = {name: public_value(value) for name, value in (scored.get("scores") or {}).items()}
    extended = scored.get("extended_avg_score")
    return public_value(scored.get("avg_score")), scores, extended


def public_entry(entry: Mapping[str, Any], final: bool = False) -> dict[str, Any]:
    """The public view of one `leaderboard.entries` row: its identity, submitter metadata and
    truth commitment, and of its result only `PUBLIC_RESULT_KEYS` and the precision, recall and
    F1 of detection, P and S picks (as `public_value`s). A CTF or pick entry shows during the
    season (`final` False) its `public_score` to `ladder.STEP` alone (`avg_score` None, no
    `scores`, no rates); at the close its private part's (half's) values as `public_value`s: a
    CTF entry's `avg_score`, `scores` and `extended_avg_score`, a pick entry's rates, F1s as
    `scores` and `half_score` as `avg_score`. A pick entry scored before traces were split
    shows its whole split's rates and F1s in both views. No raw scores, counts, residuals,
    breakdowns or histograms, and no `submission_key` (a hash of the full result)."""
    result = entry.get("result") or {}
    shown = {key: result[key] for key in PUBLIC_RESULT_KEYS if key in result}
    halves = entry.get("family") == "picks" and "parts" in result
    rates: Mapping[str, Any] = {}  # the season's view of a pick entry with halves: none
    if not halves:
        rates = result
    elif final:
        rates = _half(result, "private")
    for part in PICK_PARTS:
        if isinstance(rates.get(part), Mapping):
            shown[part] = {key: public_value(rates[part].get(key)) for key in RATES}
    view: dict[str, Any] = {}
    scores: dict[str, Any]
    if (entry.get("family") == "ctf" or halves) and not final:
        avg_score, scores = None, {}
        view["public_score"] = _season_score(entry)
    elif halves:
        avg_score = public_value(half_score(result, "private"))
        scores = {f"{part}_f1": shown[part]["f1"] for part in PICK_PARTS}
    elif entry.get("family") == "ctf":
        avg_score, scores, extended = _final_view(entry)
        if extended is not None:
            shown["extended_avg_score"] = public_value(extended)
    else:
        avg_score = public_value(entry.get("avg_score"))
        scores = {name: public_value(v) for name, v in (entry.get("scores") or {}).items()}
    return {
        **{key: entry.get(key) for key in PUBLIC_ENTRY_KEYS},
        "avg_score": avg_score,
        "scores": scores,
        **view,
        "result": shown,
    }


def shown_score(entry: Mapping[str, Any]) -> float | None:
    """The number a public entry is ranked by: its `public_score` in the season's view of a CTF
    entry, else its `avg_score`."""
    return entry["public_score"] if "public_score" in entry else entry["avg_score"]


def standing(
    entries: Sequence[Mapping[str, Any]], chosen: Collection[int] = ()
) -> list[Mapping[str, Any]]:
    """The entries a leaderboard view holds: every entry not released to a participant, and of a
    participant's released entries (CTF or picks) against one truth only the latest that set
    their Ladder best, or, where the participant chose entries (`chosen`: entry ids, a service's
    teams marking their final submissions), the latest chosen one. The final ranking thus takes
    each participant's submission chosen by public scores or by the participant: several
    submissions cannot be picked from by their private scores."""
    latest: dict[tuple[str, str], int] = {}
    picked: dict[tuple[str, str], int] = {}
    released = {}
    for index, entry in enumerate(entries):
        view = (entry.get("result") or {}).get("released")
        if isinstance(view, Mapping):
            released[index] = view
            key = (str(view.get("participant")), str(entry.get("truth_commitment")))
            for wanted, best in ((view.get("improved"), latest), (entry["id"] in chosen, picked)):
                if wanted and (key not in best or entry["id"] > entries[best[key]]["id"]):
                    best[key] = index
    kept = set({**latest, **picked}.values())
    return [e for i, e in enumerate(entries) if i not in released or i in kept]


def public_entries(
    entries: Sequence[Mapping[str, Any]], final: bool = False, chosen: Collection[int] = ()
) -> list[dict[str, Any]]:
    """`public_entry` of each `standing` entry (the season's view, or with `final` the close's;
    `chosen`: entry ids participants chose), ordered by dataset, `shown_score` (best first,
    missing last), then id: the order never depends on digits the view does not show."""
    shown = [public_entry(entry, final) for entry in standing(entries, chosen)]
    return sorted(
        shown,
        key=lambda e: (
            str(e["dataset"]),
            shown_score(e) is None,
            -(shown_score(e) or 0.0),
            e["id"] if isinstance(e["id"], int) else 0,
        ),
    )


# --- the quota ---------------------------------------------------------------------------------


def _prepare(connection: sqlite3.Connection) -> None:
    connection.execute(_SCHEMA)
    connection.execute(_INDEX)
    sqlite_wal.add_holder(connection, "releases")


def _connect(path: str) -> sqlite3.Connection:
    return sqlite_wal.connect(path, _prepare, "a release quota database")


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def drop_pending(release: Release) -> int:
    """Delete the pending quota slots `release.holder` took in runs that died (as
    `ladder.drop_pending`); how many."""
    if on_postgres(release.quota_db):
        return postgres_records.drop_pending(release.quota_db, "releases", release.holder)
    return sqlite_wal.drop_pending(_connect(release.quota_db), "releases", release.holder)


def _check_quota(release: Release, times: Sequence[float], asked: int) -> None:
    """InvalidInput when `asked` more releases, beside those at `times` (the participant's in
    the window, oldest first), would exceed the quota: it says when the next one is possible."""
    if len(times) + asked > release.quota:
        free_at = times[len(times) + asked - release.quota - 1] + QUOTA_WINDOW_S
        raise InvalidInput(
            f"{{participant}} {release.participant}",
            f"{len(times)} of {counted(release.quota, 'release')} used in the last 24 h, "
            f"{asked} asked for; nothing was scored. Next possible at {_utc(free_at)} UTC",
            parameters=["participant"],
        )


def reserve(
    release: Release, family: str, names: Sequence[str], now_s: float | None = None
) -> list[int]:
    """Take one slot per name (state `pending`) or none: InvalidInput when the participant's
    releases in the last `QUOTA_WINDOW_S` and these would exceed the quota."""
    now_s = time.time() if now_s is None else now_s
    if len(names) > release.quota:
        raise InvalidInput(
            "release", f"{counted(len(names), 'submission')}, above the quota of {release.quota}"
        )
    since = now_s - QUOTA_WINDOW_S
    if on_postgres(release.quota_db):
        shared = {"participant": release.participant, "family": family, "time_s": now_s,
                  "holder": release.holder}  # fmt: skip
        return postgres_records.reserve(
            release.quota_db,
            shared,
            names,
            since,
            lambda times: _check_quota(release, times, len(names)),
        )
    connection = _connect(release.quota_db)
    try:
        connection.execute("BEGIN IMMEDIATE")
        times = [
            row[0]
            for row in connection.execute(
                "SELECT time_s FROM releases WHERE participant = ? AND time_s > ? ORDER BY time_s",
                (release.participant, since),
            )
        ]
        _check_quota(release, times, len(names))  # over it: rolled back below
        ids = []
        for name in names:
            cursor = connection.execute(
                "INSERT INTO releases (participant, family, name, time_s, state, holder) "
                "VALUES (?, ?, ?, ?, 'pending', ?)",
                (release.participant, family, name, now_s, release.holder),
            )
            assert cursor.lastrowid is not None  # the row the INSERT added
            ids.append(cursor.lastrowid)
        connection.execute("COMMIT")
        return ids
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        connection.close()


def settle(release: Release, ids: Sequence[int], released: bool) -> None:
    """Mark reserved slots `released`, or give them back (delete) when nothing was released."""
    if on_postgres(release.quota_db):
        postgres_records.settle(release.quota_db, "releases", ids, released)
        return
    sqlite_wal.settle_rows(_connect(release.quota_db), "releases", ids, released)


@contextlib.contextmanager
def quota_slots(
    release: Release | None, family: str, names: Sequence[str]
) -> Iterator[Callable[[Iterable[str]], None]]:
    """Around a scoring run: slots taken before (InvalidInput over quota), kept when the block
    finishes, given back when it raises. The block gets `give_back(names)`, which returns at once
    the slots of submissions that were refused (nothing of theirs is released) while the others
    are kept. `release` None (organisers): nothing counted."""
    if release is None:
        yield lambda refused: None
        return
    held = dict(zip(names, reserve(release, family, names), strict=True))

    def give_back(refused: Iterable[str]) -> None:
        ids = [held.pop(name) for name in set(refused) & held.keys()]
        if ids:
            settle(release, ids, released=False)

    try:
        yield give_back
    except BaseException:
        if held:
            settle(release, list(held.values()), released=False)
        raise
    if held:
        settle(release, list(held.values()), released=True)


def used(release: Release, now_s: float | None = None) -> int:
    """Releases counted against the participant now (pending or released)."""
    now_s = time.time() if now_s is None else now_s
    if on_postgres(release.quota_db):
        since = now_s - QUOTA_WINDOW_S
        return postgres_records.count_slots(release.quota_db, release.participant, since)
    connection = _connect(release.quota_db)
    try:
        (count,) = connection.execute(
            "SELECT COUNT(*) FROM releases WHERE participant = ? AND time_s > ?",
            (release.participant, now_s - QUOTA_WINDOW_S),
        ).fetchone()
        return int(count)
    finally:
        connection.close()
