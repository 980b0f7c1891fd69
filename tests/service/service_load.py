"""Load on a running referee service, shared by its load test and `benchmarks/
bench_referee_service.py`: distinct valid submissions, uploaded concurrently, followed until
every one is finished, with the status page's latency measured meanwhile."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import zarr


def distinct_submissions(prediction: Path, count: int, out: Path) -> list[Path]:
    """`count` .npz submissions, each the zarr submission `prediction` scaled by its own factor
    (1 + k / 1000): distinct bytes, valid shapes and dtypes."""
    group = zarr.open_group(str(prediction), mode="r")
    arrays = {name: np.asarray(array[...]) for name, array in group.arrays()}
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(count):
        path = out / f"variant-{k:04d}.npz"
        np.savez(path, **{name: a * np.float32(1 + k / 1000) for name, a in arrays.items()})
        paths.append(path)
    return paths


@dataclass
class LoadRun:
    """What a load run saw: upload statuses, submission ids, seconds from the first upload to
    the last finished submission, and the status page's latencies (s)."""

    statuses: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    status_latency_s: list[float] = field(default_factory=list)
    upload_to_finished_s: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # each upload not accepted: why

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.status_latency_s, q)) if self.status_latency_s else 0.0


async def _upload(
    client: httpx.AsyncClient, token: str, path: Path, gate: asyncio.Semaphore, dataset: str
) -> tuple[int, str, float]:
    async with gate:
        began = time.monotonic()
        try:
            response = await client.post(
                "/api/submissions",
                params={"dataset": dataset, "filename": path.name, "model": path.stem},
                headers={"Authorization": f"Bearer {token}"},
                content=path.read_bytes(),
            )
        except httpx.TransportError as error:  # lost (status 0), not raised: the run goes on
            return 0, f"{path.name}: {error!r}", began
        if response.status_code >= 300:
            return response.status_code, f"{path.name}: {response.text[:300]}", began
        return response.status_code, response.json().get("id", ""), began


async def _load(
    url: str, work: list[tuple[str, Path]], concurrency: int, dataset: str, timeout_s: float
) -> LoadRun:
    run = LoadRun()
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        began = time.monotonic()
        sent = await asyncio.gather(
            *[_upload(client, token, path, gate, dataset) for token, path in work]
        )
        run.statuses = [status for status, _, _ in sent]
        accepted = [200 <= status < 300 for status, _, _ in sent]
        run.ids = [ident if ok else "" for ok, (_, ident, _) in zip(accepted, sent, strict=True)]
        run.failures = [why for ok, (_, why, _) in zip(accepted, sent, strict=True) if not ok]
        started = {ident: at for ident, (_, _, at) in zip(run.ids, sent, strict=True) if ident}
        token_of = {ident: token for (token, _), ident in zip(work, run.ids, strict=True)}
        pending = set(started)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for ident in list(pending):
                asked = time.monotonic()
                view = (
                    await client.get(
                        f"/api/submissions/{ident}",
                        headers={"Authorization": f"Bearer {token_of[ident]}"},
                    )
                ).json()
                run.status_latency_s.append(time.monotonic() - asked)
                if view["state"] in ("scored", "refused", "failed"):
                    pending.discard(ident)
                    run.upload_to_finished_s[ident] = time.monotonic() - started[ident]
            await asyncio.sleep(0.2)
        run.wall_s = time.monotonic() - began
    return run


def load(
    url: str,
    work: list[tuple[str, Path]],
    concurrency: int = 50,
    dataset: str = "tiny",
    timeout_s: float = 1800.0,
) -> LoadRun:
    """Upload every (token, path) of `work`, at most `concurrency` at once, then follow every
    submission until finished (or `timeout_s`)."""
    return asyncio.run(_load(url, work, concurrency, dataset, timeout_s))
