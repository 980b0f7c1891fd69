"""SeisBench's PhaseNet training pipeline, as its training tutorial builds it, for any dataset:
the augmentations, a seeded DataLoader over a `GenericGenerator`, the loss, a few optimiser
steps. The training benchmark (`bench_training_reads.py`) and the tests that compare a store
with the SeisBench dataset it came from both use it, so both measure and compare the same work."""

from __future__ import annotations

import numpy as np

# Label columns of the tutorial (SeisBench's PhaseNet example): P and S arrivals.
PHASE_DICT = {"trace_p_arrival_sample": "P", "trace_s_arrival_sample": "S"}
WINDOW_SAMPLES = 3001  # PhaseNet's input


def augmentations(window_samples: int = WINDOW_SAMPLES) -> list:
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


def generator(dataset, window_samples: int = WINDOW_SAMPLES):
    """`GenericGenerator(dataset)` with `augmentations()`."""
    import seisbench.generate as sbg

    generate = sbg.GenericGenerator(dataset)
    generate.add_augmentations(augmentations(window_samples))
    return generate


def loader(
    dataset,
    *,
    seed: int,
    num_workers: int = 0,
    batch_size: int = 16,
    shuffle: bool = True,
    window_samples: int = WINDOW_SAMPLES,
):
    """A DataLoader over `generator(dataset, window_samples)` whose every random draw follows
    `seed`: the shuffle (a seeded torch generator) and the augmentations' NumPy draws (the main
    process's seeded now; each worker's from its torch seed, SeisBench's `worker_seeding`)."""
    import torch
    from seisbench.util import worker_seeding

    np.random.seed(seed)
    return torch.utils.data.DataLoader(
        generator(dataset, window_samples),
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=num_workers,
        worker_init_fn=worker_seeding,
        generator=torch.Generator().manual_seed(seed),
    )


def phasenet_loss(y_pred, y_true, eps: float = 1e-5):
    """The tutorial's loss: cross-entropy of the label traces, mean over samples and batch."""
    import torch

    h = y_true * torch.log(y_pred + eps)
    return -h.mean(-1).sum(-1).mean()


def train_steps(
    dataset,
    *,
    steps: int,
    seed: int,
    batch_size: int = 8,
    lr: float = 1e-2,
    window_samples: int = WINDOW_SAMPLES,
) -> list[float]:
    """Losses of `steps` Adam steps of a randomly initialised PhaseNet (torch seed `seed`, CPU)
    on batches of `loader(dataset, seed=seed, window_samples=window_samples)`."""
    import seisbench.models as sbm
    import torch

    torch.manual_seed(seed)
    model = sbm.PhaseNet(phases="PSN", norm="peak")
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    batches = loader(dataset, seed=seed, batch_size=batch_size, window_samples=window_samples)
    for batch in batches:
        loss = phasenet_loss(model(batch["X"]), batch["y"])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss.detach()))
        if len(losses) == steps:
            break
    return losses
