"""The close of a competition: a team marks the submission it wants ranked; `seisctf referee
close` stops uploads and renders the final view, where the team's entry is the one it marked
(its private part's scores), not the one that set its Ladder best; nothing is accepted after."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from running_service import Service, add_team, seisctf, upload, wait_finished
from service_fixtures import competition, persistence_zip, tiny_bundle  # noqa: F401

from seisctf.scoring import leaderboard
from seisctf.scoring.release import public_entries

pytestmark = pytest.mark.slow


def _scaled(prediction, factor: float, out):
    group = zarr.open_group(str(prediction), mode="r")
    np.savez(out, **{name: np.asarray(a[...]) * np.float32(factor) for name, a in group.arrays()})
    return out


def test_the_final_view_ranks_the_submission_the_team_marked(
    competition,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
    tmp_path,
):
    token = add_team(competition, "closing")
    prediction = persistence_zip.with_suffix(".zarr")
    service = Service(competition, scheduler=dask_cluster.address).start()
    try:
        with service.client(token) as client:
            views = {}
            for model, factor in (("whole", 1.0), ("halved", 0.5)):
                path = _scaled(prediction, factor, tmp_path / f"{model}.npz")
                sent = upload(client, path, model=model).json()
                views[model] = wait_finished(client, sent["id"])
                assert views[model]["state"] == "scored"
            entries = leaderboard.entries(str(competition / "leaderboard.sqlite"))
            by_model = {entry["model"]: entry for entry in entries}
            ladder_pick = public_entries(entries, final=True)
            assert len(ladder_pick) == 1  # one entry a team, by the Ladder
            marked = next(m for m in views if m != ladder_pick[0]["model"])
            assert client.post(f"/api/submissions/{views[marked]['id']}/final").status_code == 200

            run = seisctf("referee", "close", str(competition))
            assert "final leaderboard" in run.stdout

            expected = public_entries(entries, final=True, chosen={by_model[marked]["id"]})
            assert [e["model"] for e in expected] == [marked]
            page = next((competition / "site").glob("dataset-*.html")).read_text()
            assert f">{marked}<" in page and f">{ladder_pick[0]['model']}<" not in page
            assert f"{expected[0]['avg_score']:.2f}" in page

            late = upload(client, _scaled(prediction, 0.25, tmp_path / "late.npz"), model="late")
            assert late.status_code == 403 and "closed" in late.json()["detail"]
            again = client.post(f"/api/submissions/{views[marked]['id']}/final")
            assert again.status_code == 403
            assert len(client.get("/api/submissions").json()) == 2
            assert sorted(p.name for p in (competition / "uploads").iterdir()) == sorted(
                f"{v['sha256']}-{v['id']}.npz" for v in views.values()
            )
    finally:
        service.stop()
