"""The README's PhaseNet loop (random-init PhaseNet on CPU, Adam, seisctf's loss), a few steps,
for tests that training on a store's windows gives a finite loss."""

from __future__ import annotations

from collections.abc import Callable

from seisctf.catalogs import phasenet_loader, phasenet_loss


def phasenet_losses(
    store, batch_size: int, epochs: int = 3, check: Callable | None = None
) -> list[float]:
    """One loss a batch over `epochs` passes of `store` (windows of 501 samples); `check(X)` is
    called on each batch's input tensor before its step."""
    import seisbench.models as sbm
    import torch

    torch.manual_seed(0)
    model = sbm.PhaseNet(phases="PSN", norm="peak")
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for epoch in range(epochs):
        for batch in phasenet_loader(store, batch_size=batch_size, window_samples=501, seed=epoch):
            if check is not None:
                check(batch["X"])
            loss = phasenet_loss(model(batch["X"]), batch["y"])
            optimiser.zero_grad(), loss.backward(), optimiser.step()
            losses.append(float(loss.detach()))
    return losses
