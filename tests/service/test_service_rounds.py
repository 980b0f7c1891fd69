"""Rounds: a running service takes a new round's dataset (`seisctf referee add-dataset`) at its
next request; a round's truth must be fresh (a truth already in the competition is refused);
closing one round leaves the others open; every public bundle is re-downloaded by its id."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from conftest import write_tiny_truth
from running_service import Service, add_team, seisctf, upload, wait_finished
from service_fixtures import competition, persistence_zip, tiny_bundle  # noqa: F401

pytestmark = pytest.mark.slow


def test_a_round_is_added_while_the_service_runs_and_closed_alone(
    competition,  # noqa: F811
    tiny_bundle,  # noqa: F811
    persistence_zip,  # noqa: F811
    dask_cluster,
    tmp_path,
):
    second = tmp_path / "round-2"
    write_tiny_truth(second, "a fresh secret for the second round")
    token = add_team(competition, "rounds")
    service = Service(competition, scheduler=dask_cluster.address).start()
    try:
        seisctf(
            "referee",
            "add-dataset",
            str(competition),
            "tiny-2",
            str(second / "public.zarr"),
            str(second / "truth.zarr"),
            "--round",
            "2",
        )
        config = json.loads((competition / "competition.json").read_text())["datasets"]
        assert config["tiny-2"]["round"] == "2" and not config["tiny-2"]["permanent"]
        assert config["tiny-2"]["bundle_id"] != config["tiny"]["bundle_id"]
        with service.client(token) as client:
            sent = upload(client, persistence_zip, dataset="tiny-2")
            assert sent.status_code == 201, sent.text
            assert wait_finished(client, sent.json()["id"])["state"] == "scored"
        home = service.client().get("/").text
        assert "tiny-2" in home and config["tiny-2"]["bundle_id"][:16] in home
        for name in ("tiny", "tiny-2"):
            ident = config[name]["bundle_id"]
            got = service.client().get(f"/bundles/{ident}.zip")
            assert got.content == (competition / "bundles" / f"{ident}.zip").read_bytes()

        # A truth the competition holds already is no new round; nor is a name taken.
        stale = seisctf(
            "referee",
            "add-dataset",
            str(competition),
            "tiny-3",
            str(second / "public.zarr"),
            str(tiny_bundle / "truth.zarr"),
            "--round",
            "3",
            check=False,
        )
        assert stale.returncode == 3 and "holds tiny's truth" in stale.stderr
        taken = seisctf(
            "referee",
            "add-dataset",
            str(competition),
            "tiny",
            str(second / "public.zarr"),
            str(second / "truth.zarr"),
            check=False,
        )
        assert taken.returncode == 3 and "exists already" in taken.stderr

        seisctf("referee", "close", str(competition), "--dataset", "tiny")
        with service.client(token) as client:
            halved = tmp_path / "halved.npz"
            group = zarr.open_group(str(persistence_zip.with_suffix(".zarr")), mode="r")
            np.savez(halved, **{k: np.asarray(a[...]) * np.float32(0.5) for k, a in group.arrays()})
            closed = upload(client, halved, dataset="tiny")
            assert closed.status_code == 403 and "closed" in closed.json()["detail"]
            still_open = upload(client, halved, dataset="tiny-2")
            assert still_open.status_code == 201, still_open.text
    finally:
        service.stop()
