"""`kan`: a Kolmogorov–Arnold network (library pykan, `kan.KAN`; the paper's "KAN") from a
window of past rows to the next row, iterated forward.

- Input: the last WINDOW rows, flattened (batch, WINDOW · F); layers of widths
  [WINDOW · F, hidden, F] whose edges are learnable B-spline functions (GRID_INTERVALS
  intervals, order ORDER) plus a SiLU base; the output is the change (batch, F) from the
  window's last row to the next row. The spline grids are fitted to the training inputs' range
  before training (`update_grid_from_samples`); pykan's symbolic branch is off. pykan seeds
  the global generators with the seed it is given (the session restores them).
- Training: every WINDOW + 1 consecutive rows of one input series (`torch_training.windows`),
  STEPS Adam mini-batches of the mean squared error (the zoo's loop, not pykan's `fit`, so
  that the seed alone draws the batches).
- Forecast: from the last series' last WINDOW rows, each predicted row fed back.
- Grid (the hold-out's budget, 4 fits): hidden width {8, 16} × learning rate {1e-2, 3e-3}.

pykan saves checkpoints into a folder by default: the network is built with auto_save off, so
it writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo import torch_training as tt
from seisctf.baselines.zoo.family import zoo_family

WINDOW = 4  # past rows the network reads
GRID_INTERVALS = 5  # B-spline grid intervals of an edge
ORDER = 3  # B-spline order
STEPS = 200  # Adam mini-batches of one fit
GRID = tuple(
    {"hidden": hidden, "learning_rate": rate} for hidden in (8, 16) for rate in (1e-2, 3e-3)
)


@zoo_family(
    "kan",
    family="Kolmogorov–Arnold network",
    library="pykan",
    module="kan",
    grid=GRID,
    seeded=True,
    paper="KAN",
)
def kan(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    import torch

    past, ahead = tt.windows(series, WINDOW, 1)
    features = past.shape[2]
    inputs = tt.tensor(past.reshape(past.shape[0], -1))
    with tt.torch_session(seed) as rng:
        from kan import KAN

        network = KAN(
            width=[WINDOW * features, settings["hidden"], features],
            grid=GRID_INTERVALS,
            k=ORDER,
            seed=seed % 2**32,
            symbolic_enabled=False,
            save_act=False,
            auto_save=False,
        )
        network.update_grid_from_samples(inputs)

        def next_row(flat: torch.Tensor) -> torch.Tensor:
            return flat[:, -features:] + network(flat)

        tt.train(
            network,
            [inputs],
            tt.tensor(ahead[:, 0]),
            steps=STEPS,
            learning_rate=settings["learning_rate"],
            rng=rng,
            predict=next_row,
        )
        return tt.rollout(
            lambda rows: next_row(tt.tensor(rows).reshape(1, -1)).numpy(),
            series[-1],
            WINDOW,
            steps,
        )
