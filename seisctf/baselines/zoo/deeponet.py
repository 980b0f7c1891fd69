"""`deeponet`: a deep operator network (library deepxde, `deepxde.nn.DeepONetCartesianProd`;
the paper's "DeepONet") from a window of past rows to the rows that follow, as a function of
the lead time.

- Branch: the last WINDOW rows, flattened (batch, WINDOW · F), through a ReLU network to
  F · width numbers; trunk: the lead time τ/HORIZON, τ = 1 … HORIZON (HORIZON, 1), through a
  ReLU network to width numbers; feature f of row t + τ is the inner product of the branch's
  f-th group with the trunk's output plus a bias (`split_branch`), added to the window's last
  row. Output (batch, HORIZON, F).
- Training: every WINDOW + HORIZON consecutive rows of one input series
  (`torch_training.windows`), STEPS Adam mini-batches of the mean squared error.
- Forecast: HORIZON rows at a time from the last series' last WINDOW rows, each forecast
  block feeding the next window.
- Grid (the hold-out's budget, 4 fits): latent width {32, 64} × learning rate {1e-2, 3e-3}.

deepxde reads its backend from DDE_BACKEND when first imported (without it, from a file in the
home folder, or it searches for one and writes that file): importing this module sets it to
pytorch unless it is set, before anything imports deepxde (`ZooFamily.require` does, to check
it is installed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo import torch_training as tt
from seisctf.baselines.zoo.family import zoo_family

os.environ.setdefault("DDE_BACKEND", "pytorch")

WINDOW = 16  # past rows the branch reads
HORIZON = 16  # rows ahead the trunk is evaluated at
HIDDEN = 64  # width of the branch's and trunk's hidden layer
STEPS = 300  # Adam mini-batches of one fit
GRID = tuple({"width": width, "learning_rate": rate} for width in (32, 64) for rate in (1e-2, 3e-3))


@zoo_family(
    "deeponet",
    family="deep operator network",
    library="deepxde",
    grid=GRID,
    seeded=True,
    paper="DeepONet",
)
def deeponet(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    import torch

    past, ahead = tt.windows(series, WINDOW, HORIZON)
    features = past.shape[2]
    width = settings["width"]
    leads = tt.tensor(np.arange(1, HORIZON + 1)[:, None] / HORIZON)
    with tt.torch_session(seed) as rng:
        from deepxde.nn import DeepONetCartesianProd

        network = DeepONetCartesianProd(
            [WINDOW * features, HIDDEN, width * features],
            [1, HIDDEN, width],
            "relu",
            "Glorot normal",
            num_outputs=features,
            multi_output_strategy="split_branch",
        )

        def next_rows(window: torch.Tensor) -> torch.Tensor:
            """(batch, WINDOW, F) -> (batch, HORIZON, F), the rows that follow."""
            last = window[:, -1:]
            return last + network(((window - last).flatten(1), leads))

        tt.train(
            network,
            [tt.tensor(past)],
            tt.tensor(ahead),
            steps=STEPS,
            learning_rate=settings["learning_rate"],
            rng=rng,
            predict=next_rows,
        )
        return tt.rollout(
            lambda rows: next_rows(tt.tensor(rows)[None])[0].numpy(), series[-1], WINDOW, steps
        )
