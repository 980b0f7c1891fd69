"""The red team's linear models as zoo models (numpy, `linear_models`):

- `sensor_ar`: an AR(p) per sensor, least squares over every input, stabilised, iterated
  forward from the most recent input; p from AR_ORDERS by the hold-out.
- `pod_var`: a VAR(p) on the inputs' r leading POD coefficients, stabilised and iterated
  forward; (r, p) from the POD_VAR grid by the hold-out (r·p at most 128 parameters an
  equation).

Both work on the sensors given (the zoo's scaling only: `reduced_rank=None`); `pod_var` makes
its own POD, whose rank is a setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from seisctf.baselines.zoo import linear_models as lm
from seisctf.baselines.zoo.family import zoo_family

AR_ORDERS = (2, 4, 8, 16)
POD_VAR = tuple(
    {"rank": rank, "order": order}
    for rank in (8, 16, 32, 64)
    for order in (1, 2, 4)
    if rank * order <= 128
)


@zoo_family(
    "sensor_ar",
    family="per-sensor linear autoregression",
    library="seisctf",
    grid=[{"order": order} for order in AR_ORDERS],
    reduced_rank=None,
)
def sensor_ar(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    coefficients = lm.fit_sensor_ar(list(series), settings["order"])
    stable = lm.stabilise_sensor_ar(coefficients)
    return lm.iterate_sensor_ar(stable, series[-1], steps)


@zoo_family(
    "pod_var",
    family="vector autoregression of POD coefficients",
    library="seisctf",
    grid=POD_VAR,
    reduced_rank=None,
)
def pod_var(
    series: Sequence[np.ndarray], steps: int, settings: Mapping[str, Any], seed: int
) -> np.ndarray:
    rank = min(settings["rank"], series[0].shape[1])
    modes = lm.pod_modes(list(series), rank)
    coefficients = [x @ modes for x in series]
    var = lm.stabilise_var(lm.fit_var(coefficients, settings["order"]))
    return lm.iterate_var(var, coefficients[-1], steps) @ modes.T
