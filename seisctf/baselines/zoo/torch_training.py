"""What the zoo's neural families share (torch): a seeded, single-threaded, quiet session; the
training windows of a list of series; a fixed-budget training loop; the autoregressive rollout.

- `torch_session(seed)`: torch's, numpy's and Python's global random states are saved and
  restored around it, torch is seeded with `seed`, runs deterministic algorithms in float32 on
  THREADS threads (results do not depend on the machine's cores) and library prints and
  warnings are swallowed; it yields the numpy generator (seeded with `seed`) that draws the
  mini-batches. Families import their library inside it: some draw from or seed the global
  generators when imported or when building a network.
- `windows(series, window, horizon)`: every stretch of `window + horizon` consecutive rows
  inside one series (never across two), split into inputs (n, window, F) and the rows that
  follow them (n, horizon, F).
- `train(model, inputs, targets, ...)`: Adam on the mean squared error over `steps` mini-batches
  of at most `batch` windows, a cosine-decayed learning rate and gradients clipped to norm
  CLIP; a loss that is not finite raises FloatingPointError (the zoo records a diverged model).
- `rollout(advance, rows, window, steps)`: iterate a model that maps the last `window` rows
  (edge-padded when the series is shorter) to the next rows, feeding its own output back.

Tensors are float32; arrays in and out are float64.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from seisctf.baselines.zoo.budget import training_steps
from seisctf.baselines.zoo.library_calls import quiet

if TYPE_CHECKING:
    import torch

THREADS = 1  # torch threads inside a session: the same sums in the same order on any machine
CLIP = 1.0  # gradient norm clip
DEFAULT_BATCH = 64  # windows a mini-batch


@contextlib.contextmanager
def torch_session(seed: int) -> Iterator[np.random.Generator]:
    """A seeded, deterministic, single-threaded, quiet float32 torch session; the caller's random
    states, thread count, determinism setting and default dtype are restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    dtype = torch.get_default_dtype()
    numpy_state = np.random.get_state()
    python_state = random.getstate()
    try:
        with quiet(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            torch.set_num_threads(THREADS)
            torch.use_deterministic_algorithms(True)
            torch.set_default_dtype(torch.float32)
            yield np.random.default_rng(seed)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.set_default_dtype(dtype)
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def windows(
    series: Sequence[np.ndarray], window: int, horizon: int
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs (n, window, F) and targets (n, horizon, F): each stretch of window + horizon
    consecutive rows of one series, in order of series then time. ValueError if no series is
    long enough."""
    length = window + horizon
    stretches = [
        np.lib.stride_tricks.sliding_window_view(x, length, axis=0).transpose(0, 2, 1)
        for x in series
        if x.shape[0] >= length
    ]
    if not stretches:
        longest = max((x.shape[0] for x in series), default=0)
        raise ValueError(f"no series has {length} rows to train on (the longest has {longest})")
    stacked = np.concatenate(stretches, axis=0)
    return stacked[:, :window].copy(), stacked[:, window:].copy()


def last_rows(rows: np.ndarray, window: int) -> np.ndarray:
    """The last `window` rows of `rows`, its first row repeated in front if it has fewer."""
    if rows.shape[0] >= window:
        return rows[-window:]
    return np.pad(rows, ((window - rows.shape[0], 0), (0, 0)), mode="edge")


def tensor(array: np.ndarray) -> torch.Tensor:
    """A float32 tensor of `array`."""
    import torch

    return torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float32)


def train(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    targets: torch.Tensor,
    *,
    steps: int,
    learning_rate: float,
    rng: np.random.Generator,
    batch: int = DEFAULT_BATCH,
    predict: Callable[..., torch.Tensor] | None = None,
) -> float:
    """Fit `model` so that `predict(*inputs[i])` (default `model(*inputs[i])`) matches
    `targets[i]`: `steps` Adam steps on mini-batches of `batch` windows drawn without replacement
    by `rng` (a new permutation each pass; fewer in a quick search: `budget.training_steps`).
    Returns the last mini-batch's loss."""
    import torch

    steps = training_steps(steps)
    forward = predict or model
    count = targets.shape[0]
    optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=max(steps, 1))
    order = rng.permutation(count)
    position = 0
    loss = torch.zeros(())
    model.train()
    for _ in range(steps):
        if position >= count:
            order, position = rng.permutation(count), 0
        chosen = torch.as_tensor(order[position : position + batch])
        position += batch
        optimiser.zero_grad()
        loss = torch.mean((forward(*(x[chosen] for x in inputs)) - targets[chosen]) ** 2)
        if not torch.isfinite(loss):
            raise FloatingPointError("the training loss is not finite")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimiser.step()
        schedule.step()
    model.eval()
    return float(loss)


def rollout(
    advance: Callable[[np.ndarray], np.ndarray], rows: np.ndarray, window: int, steps: int
) -> np.ndarray:
    """(steps, F): `advance` maps the last `window` rows (window, F) to the next k ≥ 1 rows
    (k, F); it starts from the end of `rows` and is fed its own forecast, without gradients.
    Stops early (the rest NaN) once the forecast is not finite."""
    import torch

    history = last_rows(rows, window)
    forecast = np.full((steps, rows.shape[1]), np.nan)
    done = 0
    while done < steps:
        with torch.no_grad():
            ahead = np.asarray(advance(history), dtype=np.float64)
        taken = min(ahead.shape[0], steps - done)
        forecast[done : done + taken] = ahead[:taken]
        done += taken
        if not np.isfinite(ahead).all():
            break
        history = np.concatenate([history, ahead], axis=0)[-window:]
    return forecast
