"""`fno`: a one-dimensional Fourier neural operator (library neuraloperator, `neuralop.models.FNO`;
the paper's "FNO") from a window of past rows to the window that follows.

- The time window is the operator's domain and the features (POD coefficients) its channels:
  WINDOW past rows (batch, F, WINDOW), less the window's last row, map to the next WINDOW rows
  (batch, F, WINDOW), less that row; LAYERS Fourier layers keep MODES Fourier modes.
- Training: every 2 × WINDOW consecutive rows of one input series (`torch_training.windows`),
  STEPS Adam mini-batches of the mean squared error.
- Forecast: window after window from the last series' last WINDOW rows, each forecast window
  the next one's input.
- Grid (the hold-out's budget, 4 fits): hidden channels {32, 64} × learning rate {1e-2, 5e-3}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo import torch_training as tt
from seisctf.baselines.zoo.family import zoo_family
from seisctf.baselines.zoo.library_calls import import_quietly

WINDOW = 16  # rows in, rows out
MODES = 8  # Fourier modes a layer keeps (at most WINDOW // 2 + 1)
LAYERS = 2  # Fourier layers
STEPS = 200  # Adam mini-batches of one fit
GRID = tuple(
    {"hidden": hidden, "learning_rate": rate} for hidden in (32, 64) for rate in (1e-2, 5e-3)
)


@zoo_family(
    "fno",
    family="Fourier neural operator",
    library="neuraloperator",
    module="neuralop",
    grid=GRID,
    seeded=True,
    paper="FNO",
)
def fno(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    import torch

    past, ahead = tt.windows(series, WINDOW, WINDOW)
    features = past.shape[2]
    with tt.torch_session(seed) as rng:
        operator = import_quietly("neuralop.models").FNO(
            n_modes=(MODES,),
            in_channels=features,
            out_channels=features,
            hidden_channels=settings["hidden"],
            n_layers=LAYERS,
        )

        def next_window(window: torch.Tensor) -> torch.Tensor:
            """(batch, WINDOW, F) -> (batch, WINDOW, F), the rows that follow."""
            last = window[:, -1:]
            change = operator((window - last).transpose(1, 2)).transpose(1, 2)
            return last + change

        tt.train(
            operator,
            [tt.tensor(past)],
            tt.tensor(ahead),
            steps=STEPS,
            learning_rate=settings["learning_rate"],
            rng=rng,
            predict=next_window,
        )
        return tt.rollout(
            lambda rows: next_window(tt.tensor(rows)[None])[0].numpy(), series[-1], WINDOW, steps
        )
