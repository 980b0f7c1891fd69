"""`lstm`: a long short-term memory network (`torch.nn.LSTM`, one layer) with a linear head,
trained one step ahead on short windows and iterated forward (library torch; the paper's
"LSTM").

- Input: the last WINDOW rows (batch, WINDOW, F) of the features (POD coefficients); the LSTM's
  last hidden state (batch, hidden) goes through a linear layer to the change (batch, F) from
  the window's last row to the next row.
- Training: every WINDOW + 1 consecutive rows of one input series (`torch_training.windows`),
  STEPS Adam mini-batches of the mean squared error of the next row.
- Forecast: from the last series' last WINDOW rows, each predicted row fed back.
- Grid (the hold-out's budget, 4 fits): hidden size {32, 64} × learning rate {1e-2, 3e-3}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo import torch_training as tt
from seisctf.baselines.zoo.family import zoo_family

WINDOW = 16  # rows the LSTM reads
STEPS = 150  # Adam mini-batches of one fit
GRID = tuple(
    {"hidden": hidden, "learning_rate": rate} for hidden in (32, 64) for rate in (1e-2, 3e-3)
)


@zoo_family(
    "lstm",
    family="long short-term memory network",
    library="torch",
    grid=GRID,
    seeded=True,
    paper="LSTM",
)
def lstm(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    import torch

    inputs, targets = tt.windows(series, WINDOW, 1)
    features = inputs.shape[2]
    with tt.torch_session(seed) as rng:
        network = torch.nn.ModuleDict(
            {
                "lstm": torch.nn.LSTM(features, settings["hidden"], batch_first=True),
                "head": torch.nn.Linear(settings["hidden"], features),
            }
        )

        def next_row(window: torch.Tensor) -> torch.Tensor:
            states, _ = network["lstm"](window)
            return window[:, -1] + network["head"](states[:, -1])

        tt.train(
            network,
            [tt.tensor(inputs)],
            tt.tensor(targets[:, 0]),
            steps=STEPS,
            learning_rate=settings["learning_rate"],
            rng=rng,
            predict=next_row,
        )
        return tt.rollout(
            lambda rows: next_row(tt.tensor(rows)[None]).numpy(), series[-1], WINDOW, steps
        )
