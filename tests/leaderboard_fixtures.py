"""A leaderboard with several models in both families: CTF results under two conventions and on
two datasets, pick results with residual histograms, repeated runs, one unscorable task, and a
hostile submitter (markup in its name and description, a javascript: code URL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from seisctf import conventions as cv
from seisctf.scoring import leaderboard

GLOBAL_COMMITMENT = "1f" * 32
PAPER_COMMITMENT = GLOBAL_COMMITMENT
DAS_COMMITMENT = "a7" * 32
PICKS_COMMITMENT = "5e" * 32
HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_DESCRIPTION = "<script>alert(2)</script> & more"


def ctf_result(
    name: str, scores: dict[str, float | None], dataset: str = "global", convention="reference"
) -> dict[str, Any]:
    """A CTF scorer's result object (docs/contract.md, "Scoring conventions and results")."""
    finite = [v for v in scores.values() if v is not None]
    return {
        "name": name,
        "dataset": dataset,
        "convention": convention,
        "scores": scores,
        "avg_score": sum(finite) / len(finite) if finite else None,
        "raw_scores": dict(scores),
        "truth_sha256_verified": True,
        "unscorable": [k for k, v in scores.items() if v is None],
    }


def profile(level: float, seed: int, spread: float = 25.0) -> dict[str, float]:
    """Twelve scores around `level`, clipped to [−100, 100], rounded to 0.01."""
    rng = np.random.default_rng(seed)
    values = np.clip(level + spread * rng.standard_normal(len(cv.SCORE_NAMES)), -100, 100)
    return {name: round(float(v), 2) for name, v in zip(cv.SCORE_NAMES, values, strict=True)}


def pick_part(f1: float, residuals: bool) -> dict[str, Any]:
    part: dict[str, Any] = {
        "precision": round(f1 + 0.03, 4),
        "recall": round(f1 - 0.03, 4),
        "f1": f1,
        "tp": int(100 * f1),
        "fp": int(100 * (1 - f1)),
        "fn": int(90 * (1 - f1)),
    }
    if residuals:
        part |= {"residual_mean_s": 0.012, "residual_std_s": 0.105, "residual_mae_s": 0.081}
    return part


def pick_result(name: str, f1: float) -> dict[str, Any]:
    """A pick scorer's result (docs/contract.md, "Pick submissions and scoring", and what
    `seisctf.scoring.picks.score_pick_table` adds: scores, splits, groups, residual_histogram)."""
    parts = {
        "detection": pick_part(round(f1 + 0.05, 4), False),
        "p": pick_part(f1, True),
        "s": pick_part(round(f1 - 0.1, 4), True),
    }
    return {
        "name": name,
        "dataset": "global",
        "family": "picks",
        "split": "test",
        "tolerance_s": 0.5,
        "threshold": 0.5,
        **parts,
        "scores": {f"{key}_f1": part["f1"] for key, part in parts.items()},
        "truth_commitment": PICKS_COMMITMENT,
        "splits": {"test": {"n_traces": 120, **parts}},
        "groups": {"station": {"AA.S00": {"n_traces": 60, **parts}}},
        "residual_histogram": {
            "edges_s": [round(-0.5 + 0.1 * i, 1) for i in range(11)],
            "p": [1, 2, 4, 9, 21, 25, 11, 5, 2, 1],
            "s": [0, 1, 3, 8, 15, 18, 12, 6, 3, 1],
        },
    }


def populate(db_path: str | Path) -> list[dict[str, Any]]:
    """Record the fixture's submissions into `db_path`; returns what was recorded, each as
    {"result", "family", "truth_commitment", "metadata"}."""
    recorded = []

    def add(result, family="ctf", commitment=GLOBAL_COMMITMENT, **metadata):
        leaderboard.record(
            db_path, result, family=family, truth_commitment=commitment, metadata=metadata
        )
        recorded.append(
            {
                "result": result,
                "family": family,
                "truth_commitment": commitment,
                "metadata": metadata,
            }
        )

    add(ctf_result("zeros", {name: 0.0 for name in cv.SCORE_NAMES}), description="baseline")
    add(ctf_result("persistence", profile(8.0, 1)), description="baseline")
    add(ctf_result("mean", profile(-12.0, 2)), description="baseline")
    for seed in range(4):
        add(
            ctf_result("dmd", profile(45.0, 10 + seed, spread=20.0)),
            seed=str(seed),
            code_url="https://example.org/dmd",
            description="Dynamic mode decomposition",
        )
    for run in ("a", "b", "c"):
        add(ctf_result("lstm", profile(30.0, 20 + ord(run))), run=run, budget="3")
    add(
        ctf_result(HOSTILE, profile(5.0, 3)),
        code_url="javascript:alert(1)",
        description=HOSTILE_DESCRIPTION,
    )
    add(ctf_result("dmd", profile(40.0, 30), convention="paper"), commitment=PAPER_COMMITMENT)
    partly = profile(-20.0, 4) | {"E5": None}
    add(ctf_result("das-model", partly, dataset="das"), commitment=DAS_COMMITMENT)
    add(
        ctf_result("zeros", {name: 0.0 for name in cv.SCORE_NAMES}, dataset="das"),
        commitment=DAS_COMMITMENT,
    )
    for seed, f1 in enumerate((0.81, 0.84, 0.79)):
        add(pick_result("phasenet", f1), "picks", PICKS_COMMITMENT, seed=str(seed))
    add(pick_result("stalta", 0.62), "picks", PICKS_COMMITMENT, description="STA/LTA + AIC")
    return recorded
