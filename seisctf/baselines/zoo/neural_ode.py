"""`neural_ode`: a neural ordinary differential equation dx/dt = f_θ(x) (library torchdiffeq,
`torchdiffeq.odeint`; the paper's "NeuralODE").

- f_θ(x) = W x + b + MLP(x): a linear part plus a one-hidden-layer tanh network, x the (F,)
  features (POD coefficients); time is counted in rows (one row, one unit). W, b and the
  network's output layer start at zero (f_θ = 0), which makes short budgets train reliably.
- Training: trajectory segments of SEGMENT consecutive rows inside one input series
  (`torch_training.windows`): each segment's first row is integrated over the next
  SEGMENT − 1 rows with fixed-step fourth-order Runge–Kutta (METHOD, one step a row) and
  the mean squared error to the observed rows is minimised, STEPS Adam mini-batches.
- Forecast: the same integration from the last series' last row over `steps` rows.
- Grid (the hold-out's budget, 4 fits): hidden width {32, 64} × learning rate {2e-2, 1e-2}.
Shapes: f_θ maps (batch, F) -> (batch, F); `odeint` returns (time, batch, F).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo import torch_training as tt
from seisctf.baselines.zoo.family import zoo_family

SEGMENT = 8  # rows of a training trajectory (its first row is the initial value)
STEPS = 300  # Adam mini-batches of one fit
METHOD = "rk4"  # torchdiffeq's fixed-grid solver, one step a row
GRID = tuple(
    {"hidden": hidden, "learning_rate": rate} for hidden in (32, 64) for rate in (2e-2, 1e-2)
)


@zoo_family(
    "neural_ode",
    family="neural ordinary differential equation",
    library="torchdiffeq",
    grid=GRID,
    seeded=True,
    paper="NeuralODE",
)
def neural_ode(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    import torch

    starts, following = tt.windows(series, 1, SEGMENT - 1)
    features = starts.shape[2]
    hidden = settings["hidden"]
    with tt.torch_session(seed) as rng:
        from torchdiffeq import odeint

        linear = torch.nn.Linear(features, features)
        out = torch.nn.Linear(hidden, features)
        for layer in (linear, out):  # f_θ starts at zero: the flow that stays put
            torch.nn.init.zeros_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
        network = torch.nn.ModuleDict(
            {
                "linear": linear,
                "mlp": torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.Tanh(), out),
            }
        )

        def rate(_: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return network["linear"](x) + network["mlp"](x)

        def trajectory(initial: torch.Tensor, rows: int) -> torch.Tensor:
            """(batch, F) initial rows -> (batch, rows, F), the rows after them."""
            times = torch.arange(rows + 1, dtype=torch.float32)
            return odeint(rate, initial, times, method=METHOD).transpose(0, 1)[:, 1:]

        tt.train(
            network,
            [tt.tensor(starts[:, 0])],
            tt.tensor(following),
            steps=STEPS,
            learning_rate=settings["learning_rate"],
            rng=rng,
            predict=lambda initial: trajectory(initial, SEGMENT - 1),
        )
        return tt.rollout(
            lambda rows: trajectory(tt.tensor(rows), steps)[0].numpy(), series[-1], 1, steps
        )
