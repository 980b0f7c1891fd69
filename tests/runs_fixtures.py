"""Runs tables with known variance components, for `seisctf compare` tests."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from seisctf.scoring.uncertainty import RUN_COLUMNS

# (approach, budget) -> (mean, data-sampling sd, training sd): heterogeneous, as real cells are.
CELLS = {
    ("net", 1.0): (0.60, 0.060, 0.030),
    ("net", 3.0): (0.70, 0.040, 0.030),
    ("net", 6.0): (0.76, 0.030, 0.020),
    ("big", 1.0): (0.62, 0.050, 0.050),
    ("big", 3.0): (0.74, 0.050, 0.025),
    ("big", 6.0): (0.80, 0.020, 0.030),
}


def simulate_runs(
    cells: Mapping[tuple[str, float], tuple[float, float, float]] = CELLS,
    *,
    n_draws: int = 12,
    n_seeds: int = 4,
    seed: int = 0,
    metric: str = "f1",
) -> pd.DataFrame:
    """value = mean + N(0, σ²_data) per draw + N(0, σ²_train) per seed. A cell with σ_train = 0
    is a deterministic approach: one run per draw with an empty training_seed."""
    rng = np.random.default_rng(seed)
    rows = []
    for (approach, budget), (mean, data_sd, train_sd) in cells.items():
        for draw in range(n_draws):
            draw_effect = rng.normal(0.0, data_sd)
            seeds = range(n_seeds) if train_sd > 0 else [None]
            for training_seed in seeds:
                noise = rng.normal(0.0, train_sd) if train_sd > 0 else 0.0
                value = mean + draw_effect + noise
                rows.append((approach, budget, draw, training_seed, metric, value))
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))
