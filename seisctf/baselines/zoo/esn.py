"""An echo-state network (reservoir computing) from reservoirpy as the zoo model `esn`.

A random leaky tanh reservoir of `units` neurons (`reservoirpy.nodes.Reservoir`: recurrent
weights normal, 10 % connected, rescaled to spectral radius `radius`; input weights ±1, 10 %
connected, times INPUT_SCALING; leak rate `leak`) driven by the inputs' POD coefficients
(`reduced_rank`: 16, scaled to RMS 1; one row a time step), and a linear readout with a bias
(`reservoirpy.nodes.Ridge`, Tikhonov `ridge`) trained with teacher forcing to give the next row
from the reservoir's state, on every input (each run from a zero state, its first WARMUP rows,
at most half the shortest input, not fitted). The forecast runs the reservoir over the most
recent input, then closes the loop: each forecast row is the next input.

The reservoir's weights are drawn from `seed` (`seeded`): a fixed seed gives bit-identical
forecasts. Grid (units, radius, leak, ridge): six entries around 500 units, radius 0.9, leak
0.5, ridge 1e-4 (the ridge is on the readout's unnormalised normal equations, summed over rows;
at 1e-6 the closed loop of 500 units drifted off travelling waves within 1000 steps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo.family import zoo_family
from seisctf.baselines.zoo.library_calls import one_step_pairs, quiet

ESN_GRID: tuple[Mapping[str, Any], ...] = (
    {"units": 500, "radius": 0.9, "leak": 0.5, "ridge": 1e-4},
    {"units": 200, "radius": 0.9, "leak": 0.5, "ridge": 1e-4},
    {"units": 1000, "radius": 0.9, "leak": 0.5, "ridge": 1e-4},
    {"units": 500, "radius": 0.9, "leak": 1.0, "ridge": 1e-4},
    {"units": 500, "radius": 1.1, "leak": 0.3, "ridge": 1e-4},
    {"units": 500, "radius": 0.9, "leak": 0.5, "ridge": 1e-2},
)
INPUT_SCALING = 0.5
WARMUP = 100  # reservoir steps a series runs before its rows are fitted (at most half of it)


def fit_esn(series: Sequence[np.ndarray], settings: Mapping[str, Any], seed: int) -> Any:
    """The reservoirpy model (Reservoir >> Ridge) trained one step ahead on every series."""
    inputs, targets = one_step_pairs(series)
    warmup = min(WARMUP, min(x.shape[0] for x in inputs) // 2)
    with quiet():
        from reservoirpy.nodes import Reservoir, Ridge

        reservoir = Reservoir(
            int(settings["units"]),
            lr=float(settings["leak"]),
            sr=float(settings["radius"]),
            input_scaling=INPUT_SCALING,
            seed=seed,
        )
        model = reservoir >> Ridge(ridge=float(settings["ridge"]))
        model.fit(inputs, targets, warmup=warmup)
    return model


def generate(model: Any, history: np.ndarray, steps: int) -> np.ndarray:
    """(steps, features): the model run over `history` from a zero state, then fed back its
    own outputs."""
    forecast = np.empty((steps, history.shape[1]))
    with quiet():
        model.reset()
        forecast[0] = np.asarray(model.run(history))[-1]
        for step in range(1, steps):
            forecast[step] = model.step(forecast[step - 1])
    return forecast


@zoo_family(
    "esn",
    family="echo-state network (reservoir computing)",
    library="reservoirpy",
    grid=ESN_GRID,
    seeded=True,
)
def esn(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    return generate(fit_esn(series, settings, seed), series[-1], steps)
