"""The organiser's scores of the zoo's submissions (`seisctf baseline zoo --truth T`).

Each submission is scored like any (`referee.run_ctf`) and, with a leaderboard, recorded under
its model's name (its seeds are runs of one model: `leaderboard --final --html` draws each
model's mean radar profile) with metadata read from the submission's own `zoo` attrs: `model`,
`family`, `library`, `library_version`, `paper` and, for a seeded model, `seed`. The scores also
go into a runs table (the `seisctf compare` format: approach = model, budget 1, data draw
`public`, training_seed = the seed, empty for a deterministic model; one row per E score and
AvgScore), so repeated seeds give intervals and mis-ranking probabilities between zoo members.
Every run trains on the same data (the public bundle: `n_clusters_total` 1), so only the seeds
vary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from seisctf import conventions as cv
from seisctf import storage
from seisctf.ctf_json import CtfResult
from seisctf.location import StoreLocation
from seisctf.scoring import referee
from seisctf.scoring.uncertainty import CLUSTERS_COLUMN, RUN_COLUMNS

AVG_SCORE = "AvgScore"


def zoo_metadata(submission: StoreLocation) -> dict[str, str]:
    """Leaderboard metadata of a zoo submission, from its attrs."""
    record = storage.read_attrs(submission).get(cv.ATTR_ZOO) or {}
    metadata = {
        key: str(record[key])
        for key in ("model", "family", "library", "library_version", "paper")
        if record.get(key) is not None
    }
    if record.get("seeded"):
        metadata["seed"] = str(record["seed"])
    if record.get("search", "full") != "full":
        metadata["search"] = str(record["search"])  # a smoke test's scores say so
    return metadata


def runs_rows(result: CtfResult, metadata: Mapping[str, str]) -> list[dict[str, Any]]:
    """The runs-table rows of one scored submission (scores that are None are left out)."""
    values: dict[str, float | None] = {**result.scores, AVG_SCORE: result.avg_score}
    return [
        {
            "approach": metadata["model"],
            "budget": 1,
            "data_draw": "public",
            "training_seed": metadata.get("seed", ""),
            "metric": metric,
            "value": value,
            "n_clusters_total": 1,
        }
        for metric, value in values.items()
        if value is not None
    ]


def score_zoo(
    truth: StoreLocation,
    submissions: Mapping[str, StoreLocation],
    db: str | None = None,
    quiet: bool = False,
) -> pd.DataFrame:
    """Score each named zoo submission against `truth` (recorded into the leaderboard `db`
    when given); the runs table of them all."""
    rows: list[dict[str, Any]] = []
    for name, submission in submissions.items():
        metadata = zoo_metadata(submission)
        judge = referee.Referee(db=db, metadata=metadata)
        # Recorded under the model's name: a model's seeds are runs of one model on the board.
        model = metadata.get("model", name)
        (result,) = referee.run_ctf(truth, {model: submission}, judge, quiet=quiet)
        rows += runs_rows(CtfResult.from_json(result, f"score of {name}"), metadata)
    return pd.DataFrame(rows, columns=[*RUN_COLUMNS, CLUSTERS_COLUMN])
