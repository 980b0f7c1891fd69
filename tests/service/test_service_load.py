"""Load on the referee service: 20 distinct submissions of 5 teams uploaded at once, scored by
two scoring threads on a 2-worker Dask cluster: every one scored exactly once (one leaderboard
row each), none lost; the status page's p95 latency under that load is printed (the benchmark,
`benchmarks/bench_referee_service.py`, reports it at 200 submissions). Twenty keep both scoring
threads claiming from a queue ten times their number; more only add scoring time."""

from __future__ import annotations

from collections import Counter

import pytest
from running_service import Service, add_team, create_competition
from service_fixtures import persistence_zip, tiny_bundle  # noqa: F401
from service_load import distinct_submissions, load

from seisctf.scoring import leaderboard

pytestmark = pytest.mark.slow
TEAMS, PER_TEAM = 5, 4


def test_twenty_concurrent_uploads_are_each_scored_once(
    tiny_bundle,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
    tmp_path,
):
    competition = create_competition(tmp_path, tiny_bundle, quota=PER_TEAM)
    tokens = [add_team(competition, f"team {n}") for n in range(TEAMS)]
    paths = distinct_submissions(
        persistence_zip.with_suffix(".zarr"), TEAMS * PER_TEAM, tmp_path / "variants"
    )
    work = [(tokens[k % TEAMS], path) for k, path in enumerate(paths)]
    service = Service(competition, scheduler=dask_cluster.address, workers=2).start()
    try:
        run = load(service.url, work, concurrency=len(work), timeout_s=600)
        # Every upload accepted before any is followed: a lost one (status 0) or a refusal shows
        # with the server's log, not as an empty ident's redirect.
        assert run.statuses == [201] * len(work), (run.failures, service.log()[-4000:])
        views = [
            service.client(token).get(f"/api/submissions/{ident}").json()
            for (token, _), ident in zip(work, run.ids, strict=True)
        ]
    finally:
        service.stop()
    assert len(set(run.ids)) == len(work)
    assert [view["state"] for view in views] == ["scored"] * len(work)
    recorded = Counter(
        row["metadata"]["submission"]
        for row in leaderboard.entries(str(competition / "leaderboard.sqlite"))
    )
    assert recorded == Counter(run.ids)  # each exactly once, none lost
    print(
        f"\n{len(work)} submissions scored in {run.wall_s:.1f} s; status page p50 "
        f"{run.percentile(50) * 1e3:.0f} ms, p95 {run.percentile(95) * 1e3:.0f} ms "
        f"over {len(run.status_latency_s)} requests"
    )
