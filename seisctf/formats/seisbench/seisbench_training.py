"""SeisBench's PhaseNet training pipeline, as its training tutorial builds it, for any SeisBench
dataset (a store's `seisbench_dataset(URL)` or SeisBench's own): the augmentations, a DataLoader
over a `GenericGenerator`, the loss. Everything here is SeisBench's and torch's own code, put
together once, so that the README's example, the training benchmark and the tests that compare
a store with the SeisBench dataset it came from all run the same work."""

from __future__ import annotations

from typing import Any

import numpy as np

# Label columns of the tutorial (SeisBench's PhaseNet example): P and S arrivals.
PHASE_DICT = {"trace_p_arrival_sample": "P", "trace_s_arrival_sample": "S"}
WINDOW_SAMPLES = 3001  # PhaseNet's input


def phasenet_augmentations(window_samples: int = WINDOW_SAMPLES) -> list:
    """The tutorial's augmentations: a 2 × `window_samples` window around a random arrival
    (variable length), a random `window_samples` window (zero-padded), demean + peak
    normalisation, float32, Gaussian P/S/noise labels (sigma 30 samples)."""
    import seisbench.generate as sbg

    return [
        sbg.WindowAroundSample(
            list(PHASE_DICT),
            samples_before=window_samples,
            windowlen=2 * window_samples,
            selection="random",
            strategy="variable",
        ),
        sbg.RandomWindow(windowlen=window_samples, strategy="pad"),
        sbg.Normalize(demean_axis=-1, amp_norm_axis=-1, amp_norm_type="peak"),
        sbg.ChangeDtype(np.float32),
        sbg.ProbabilisticLabeller(label_columns=PHASE_DICT, sigma=30, dim=0),
    ]


def phasenet_generator(dataset: Any, window_samples: int = WINDOW_SAMPLES) -> Any:
    """`seisbench.generate.GenericGenerator(dataset)` with `phasenet_augmentations()`: samples
    {"X": (3, window_samples) float32, "y": (3, window_samples) P, S, noise labels}."""
    import seisbench.generate as sbg

    generate = sbg.GenericGenerator(dataset)
    generate.add_augmentations(phasenet_augmentations(window_samples))
    return generate


class BatchReads:
    """A map-style dataset of the samples of `generator` (a SeisBench `GenericGenerator`),
    whose batches first read all their windows at once: torch's DataLoader hands a batch's
    indices to `__getitems__`, which calls `generator.dataset.prefetch(indices)` where the
    dataset has one (a store's: concurrent ranged reads, held for the batch; SeisBench's own
    datasets have none), then makes the samples one by one as the generator does. A batch on
    S3 then waits about as long as its slowest read, not the sum of its reads; the samples and
    their random draws are the generator's, in the same order."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def __len__(self) -> int:
        return len(self.generator)

    def __getitem__(self, idx: int) -> dict:
        return self.generator[idx]

    def __getitems__(self, indices: list[int]) -> list[dict]:
        prefetch = getattr(self.generator.dataset, "prefetch", None)
        if prefetch is not None:
            prefetch(indices)
        return [self.generator[idx] for idx in indices]


def phasenet_loader(
    dataset: Any,
    *,
    batch_size: int = 16,
    num_workers: int = 0,
    seed: int | None = None,
    shuffle: bool = True,
    window_samples: int = WINDOW_SAMPLES,
    batch_reads: bool = True,
) -> Any:
    """A torch DataLoader over `phasenet_generator(dataset, window_samples)` (wrapped in
    `BatchReads` unless `batch_reads=False`); its workers seeded by SeisBench's
    `worker_seeding`. With `seed`, every random draw follows it: the shuffle (a seeded torch
    generator) and the augmentations' NumPy draws (this process's, seeded now; each worker's
    from its torch seed)."""
    import torch
    from seisbench.util import worker_seeding

    shuffle_draws = None
    if seed is not None:
        np.random.seed(seed)
        shuffle_draws = torch.Generator().manual_seed(seed)
    generator = phasenet_generator(dataset, window_samples)
    # DataLoader takes any map-style dataset (`__getitem__`, `__len__`); torch types it as its
    # Dataset class.
    return torch.utils.data.DataLoader(
        BatchReads(generator) if batch_reads else generator,  # type: ignore[arg-type]
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=num_workers,
        worker_init_fn=worker_seeding,
        generator=shuffle_draws,
    )


def phasenet_loss(y_pred: Any, y_true: Any, eps: float = 1e-5) -> Any:
    """The tutorial's loss: cross-entropy of the label traces, mean over samples and batch
    (tensors (batch, 3, sample); a 0-d tensor)."""
    import torch

    h = y_true * torch.log(y_pred + eps)
    return -h.mean(-1).sum(-1).mean()
