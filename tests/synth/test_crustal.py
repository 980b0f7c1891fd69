"""Verification of the crustal simulator (seisctf.synth.crustal) and its dataset: the moment
tensor against its fault vectors, direct P and S arrival times in a homogeneous medium, P
polarity across the nodal planes, energy conservation after the source stops, the C-PML's
reflection against a larger grid, bytes independent of the number of workers, and the crustal
CTF bundle scored with the baselines. Grids are small; every run takes seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy.signal import hilbert

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.synth.crustal import medium as md
from seisctf.synth.crustal import solver as sv
from seisctf.synth.crustal import source as src
from seisctf.synth.crustal.recording import SensorGrid, resample
from seisctf.synth.crustal.simulation import (
    CrustalConfig,
    Realisation,
    simulate,
    time_plan,
)
from seisctf.synth.crustal.sweep import synthesize_crustal

HOMOGENEOUS = md.MediumParameters(perturbation_std=0.0)
RATE_HZ = 100.0


# --- source ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strike, dip, rake", [(0, 90, 0), (30, 60, 45), (200, 20, 90), (310, 75, -120)]
)
def test_moment_tensor_is_the_double_couple_of_its_fault_vectors(strike, dip, rake):
    tensor = src.moment_tensor(strike, dip, rake, 2.0)
    normal, slip = src.fault_vectors(strike, dip, rake)
    assert np.allclose(tensor, 2.0 * (np.outer(normal, slip) + np.outer(slip, normal)))
    assert np.allclose(sorted(np.linalg.eigvalsh(tensor)), [-2.0, 0.0, 2.0])
    assert normal @ slip == pytest.approx(0.0, abs=1e-12)


def test_moment_tensor_conventions_of_aki_and_richards():
    # A vertical strike-slip fault striking north: M = M0 (x̂ŷ + ŷx̂).
    assert np.allclose(src.moment_tensor(0, 90, 0), [[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    # A 45°-dipping thrust striking north (dipping east): tension axis vertical (Mzz > 0),
    # compression east-west (Myy < 0); the hanging wall moves up (slip z < 0).
    thrust = src.moment_tensor(0, 45, 90)
    assert thrust[2, 2] == pytest.approx(1.0) and thrust[1, 1] == pytest.approx(-1.0)
    assert src.fault_vectors(0, 45, 90)[1][2] < 0


def test_moment_rate_pulse_peaks_half_its_duration_after_the_onset():
    t = np.linspace(-2.0, 4.0, 60001)
    shape = src.moment_rate_shape(t, src.PointSource(0, 0, 1000, 0, 90, 0, 1.0, duration_s=0.8))
    assert np.trapezoid(shape, t) == pytest.approx(1.0, rel=1e-9)
    assert t[np.argmax(shape)] == pytest.approx(1.4, abs=1e-4)


# --- time step and resolution ---------------------------------------------------------------


def test_time_steps_beyond_the_cfl_limit_are_refused():
    realisation = Realisation(src.PointSource(500, 500, 1000, 0, 90, 0, 0.5), HOMOGENEOUS)
    limit = sv.CFL_LIMIT * 200.0 / 5000.0  # 0.0198 s
    config = CrustalConfig(sensors=SensorGrid(6, 6), sampling_rate_hz=50.0, time_step_s=0.02)
    with pytest.raises(InvalidInput, match="Courant number"):
        time_plan(config, realisation)
    plan = time_plan(replace(config, time_step_s=0.01), realisation)
    assert plan.courant <= sv.CFL_LIMIT and plan.time_step_s < limit
    with pytest.raises(InvalidInput, match="divide"):
        time_plan(replace(config, time_step_s=0.003), realisation)
    automatic = time_plan(replace(config, time_step_s=None), realisation)
    assert automatic.substeps == 2 and automatic.courant <= 0.9 * sv.CFL_LIMIT + 1e-12


def test_sources_outside_the_core_and_coarse_grids_are_refused():
    config = CrustalConfig(sensors=SensorGrid(6, 6), depth_m=2000.0)
    grid = config.grid()
    with pytest.raises(InvalidInput, match="outside"):
        src.PointSource(500, 500, 100, 0, 90, 0, 0.5).checked(grid)  # above 2 cells
    with pytest.raises(InvalidInput, match="outside"):
        src.PointSource(-2000, 500, 1000, 0, 90, 0, 0.5).checked(grid)  # in the C-PML
    too_sharp = Realisation(src.PointSource(500, 500, 1000, 0, 90, 0, 0.5, duration_s=0.5))
    with pytest.raises(InvalidInput, match="nodes per S wavelength"):
        synthesize_crustal(config, [too_sharp], 0)


# --- physics --------------------------------------------------------------------------------


def _node_velocity(fields: sv.Fields, k: int, i: int, j: int) -> np.ndarray:
    """(vx, vy, vz) at normal-stress node (k, i, j): the mean of the two staggered neighbours."""
    vx, vy, vz = (fields.interior(name) for name in ("vx", "vy", "vz"))
    return np.array(
        [
            0.5 * (vx[k, i - 1, j] + vx[k, i, j]),
            0.5 * (vy[k, i, j - 1] + vy[k, i, j]),
            0.5 * (vz[k - 1, i, j] + vz[k, i, j]),
        ],
        dtype=np.float64,
    )


def _run_points(grid, medium, source, nodes, duration_s, substeps):
    """Velocities (len(nodes), 3, n) at the nodes, resampled to RATE_HZ from t = 0."""
    material = md.staggered(md.material(grid, medium, 0))
    dt = 1.0 / RATE_HZ / substeps
    solver = sv.Solver(grid, material, dt, source_frequency_hz=1.0)
    solver.add_source(src.injection(grid, source), source)
    samples = []
    sv.run(
        solver,
        0.0,
        int(round(duration_s / dt)),
        [lambda t, f: samples.append([_node_velocity(f, *node) for node in nodes])],
    )
    return np.moveaxis(resample(np.array(samples), substeps), 0, -1)


def _envelope_peak_s(trace: np.ndarray) -> float:
    return float(np.argmax(np.abs(hilbert(trace)))) / RATE_HZ


@pytest.mark.parametrize(
    "phase, strike, duration_s, component",
    [("P", 315.0, 0.2, 0), ("S", 0.0, 0.4, 1)],
)
def test_direct_p_and_s_arrive_at_origin_plus_distance_over_velocity(
    phase, strike, duration_s, component
):
    """A vertical strike-slip fault at 3 km depth in a homogeneous medium, receivers at its
    depth 3, 4 and 5 km north (far below the free surface's reflections). Striking 315°, P
    radiates most northwards and S not at all: P on the radial (north) component; striking 0°,
    the reverse: S on the transverse (east) one. The envelope peak of the velocity must come at
    t0 + r / v within 2 samples (0.02 s), t0 the moment rate's peak (onset + D/2). The
    intermediate-field terms (~4/(kr) of the far field) pull the peak early, so the pulses are
    short: D = 0.4 s for S (4.2 nodes per S wavelength at the band's 1 % edge, 2.75 / D), 0.2 s
    for the P run (3.6 per P wavelength; its S waves come later)."""
    h = 100.0
    grid = md.Grid(h, nz=56, nx=86, ny=51, x0_m=-1000.0, y0_m=-2500.0, pml_cells=10)
    source = src.PointSource(
        0.0, 0.0, 3000.0, strike, 90.0, 0.0, 0.5 - duration_s / 2, duration_s=duration_s
    )
    offsets = (3000.0, 4000.0, 5000.0)
    nodes = [(30, int((r - grid.x0_m) / h), 25) for r in offsets]
    speed = {"P": HOMOGENEOUS.vp_m_s, "S": HOMOGENEOUS.vs_m_s}[phase]
    record_s = 0.5 + offsets[-1] / speed + duration_s
    traces = _run_points(grid, HOMOGENEOUS, source, nodes, record_s, substeps=2)
    for index, r in enumerate(offsets):
        dominant = traces[index, component]
        assert np.abs(traces[index]).max() == np.abs(dominant).max()
        assert _envelope_peak_s(dominant) == pytest.approx(0.5 + r / speed, abs=2.01 / RATE_HZ)


def test_p_polarity_flips_across_the_nodal_planes():
    """Vertical ground displacement at the P arrival, on a ring of surface sensors 2.5 km from
    the epicentre, has the sign of γ·M·γ (γ the ray's unit vector) wherever |γ·M·γ| ≥ 0.4 M0,
    for a strike-slip and an oblique mechanism; both signs occur (the pattern flips). Closer to
    the nodal planes the near-field terms (kr ≈ 7 here) move the sign change slightly: the
    oblique mechanism has one sensor with |γ·M·γ| = 0.32 on the wrong side."""
    sensors = SensorGrid(61, 61, 100.0)
    # The latest P peak on the ring is at 0.4 + 2967 m / 5000 m/s = 0.99 s: 1.1 s of record hold
    # it (the stepping does not depend on the duration; later samples are not looked at).
    config = CrustalConfig(
        sensors=sensors, duration_s=1.1, spacing_m=100.0, depth_m=2500.0, margin_m=300.0
    )
    x, y = sensors.coordinates()
    epicentre = 3000.0
    distance = np.hypot(x - epicentre, y - epicentre)
    ring = np.abs(distance - 2500.0) < 60.0
    for strike, dip, rake in ((30.0, 90.0, 0.0), (30.0, 60.0, 45.0)):
        source = src.PointSource(
            epicentre, epicentre, 1500.0, strike, dip, rake, 0.16, duration_s=0.48
        )
        record = simulate(config, Realisation(source, HOMOGENEOUS), 0)
        displacement = np.cumsum(record[0].astype(np.float64), axis=0) / RATE_HZ
        ray = np.stack([x - epicentre, y - epicentre, -np.full(x.shape, 1500.0)])  # to sensor
        r = np.linalg.norm(ray, axis=0)
        gamma = ray / r
        pattern = np.einsum("is,ij,js->s", gamma, src.moment_tensor(strike, dip, rake), gamma)
        arrival = np.round((0.4 + r / HOMOGENEOUS.vp_m_s) * RATE_HZ).astype(int)  # pulse peak
        on_ring = np.flatnonzero(ring)
        polarity = np.sign(displacement[arrival[on_ring], on_ring])
        strong = np.abs(pattern[on_ring]) >= 0.4
        assert strong.sum() > 40
        assert np.all(polarity[strong] == np.sign(pattern[on_ring][strong]))
        assert {-1.0, 1.0} <= set(polarity[strong])


def _energy_after_stop(pml_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """(total, kinetic) energy (J) from the step the source stops."""
    grid = md.Grid(200.0, nz=16, nx=22, ny=20, x0_m=0.0, y0_m=0.0, pml_cells=pml_cells)
    if pml_cells:
        grid = replace(grid, nz=26, nx=42, ny=40, x0_m=-2000.0, y0_m=-2000.0)
    material = md.staggered(md.material(grid, md.MediumParameters(perturbation_std=0.08), 3))
    source = src.PointSource(2000.0, 1800.0, 1400.0, 30.0, 60.0, 45.0, 0.3, duration_s=1.0)
    solver = sv.Solver(grid, material, 0.01, source_frequency_hz=0.9)
    solver.add_source(src.injection(grid, source), source)
    meter = sv.EnergyMeter(grid, material, every=5)
    sv.run(solver, 0.0, 700, [meter])
    after = np.array(meter.times_s) >= source.stop_time_s
    return np.array(meter.energy_j)[after], np.array(meter.kinetic_j)[after]


def test_energy_does_not_grow_after_the_source_stops():
    """Heterogeneous medium (8 %), free surface. Without absorbing layers (zero-padded rigid
    walls) the discrete energy is conserved to float32 rounding; with the C-PML it never grows
    and the motion dies out (kinetic energy < 0.1 % of its value when the source stops). The
    total keeps the static strain energy the source leaves around itself (its final moment)."""
    closed, _ = _energy_after_stop(pml_cells=0)
    assert closed.max() <= closed[0] * (1 + 1e-5)
    assert closed.min() >= closed[0] * (1 - 1e-5)
    absorbing, kinetic = _energy_after_stop(pml_cells=10)
    assert np.all(np.diff(absorbing) <= 1e-6 * absorbing[0])
    assert kinetic[-1] < 1e-3 * kinetic[0]


def test_pml_reflects_less_than_half_a_percent_of_the_incident_pulse():
    """The default grid spacing, source and C-PML (10 cells, R = 1e-3) on a small grid, against a
    reference whose absorbing layers are 4 km farther away (no reflection reaches its sensors
    within the record): the difference at any sensor and component is < 0.5 % of the largest
    amplitude that sensor-component records (among those ≥ 10 % of the overall peak)."""
    small = CrustalConfig(
        sensors=SensorGrid(11, 11), duration_s=2.5, depth_m=2400.0, margin_m=600.0
    )
    reference = replace(small, margin_m=4600.0, depth_m=6400.0)
    realisation = Realisation(src.PointSource(500, 700, 1200, 30, 60, 45, 0.3), HOMOGENEOUS)
    truth = simulate(reference, realisation, 0).astype(np.float64)
    near = simulate(small, realisation, 0).astype(np.float64)
    peak = np.abs(truth).max(axis=1)
    error = np.abs(near - truth).max(axis=1)
    strong = peak >= 0.1 * peak.max()
    assert (error[strong] / peak[strong]).max() < 0.005
    assert error.max() < 0.001 * peak.max()


# --- the store, the sweep on a cluster, the bundle --------------------------------------------

SMALL_SWEEP = ["--grid", "6", "--duration", "1.2", "--depth", "2000"]
SMALL_SWEEP += ["--parametric", "2", "--initial-conditions", "1"]


def seisctf(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The installed command line in its own process."""
    result = subprocess.run(
        [sys.executable, "-m", "seisctf.cli", *args], capture_output=True, text=True, timeout=600
    )
    if check and result.returncode != 0:
        raise AssertionError(f"seisctf {' '.join(args)} -> {result.returncode}\n{result.stderr}")
    return result


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_sweep_bytes_are_the_same_on_one_and_two_workers(
    tmp_path, dask_cluster, dask_cluster_one_worker
):
    """`seisctf synth crustal` with 15 simulations (the ten core realisations, a sweep of 2 + 1,
    1 + 1 initial conditions), one Dask task each, on a real cluster of 2 worker processes and
    on one of 1: the stores are byte for byte the same. Then the store's contract."""
    secret = "crustal-test-secret-of-enough-length"
    stores = {}
    for name, cluster in (("two", dask_cluster), ("one", dask_cluster_one_worker)):
        stores[name] = tmp_path / f"{name}.zarr"
        seisctf(
            "synth", "crustal", "--out", str(stores[name]), "--scheduler", cluster.address,
            "--secret", secret, "--quiet", *SMALL_SWEEP,
        )  # fmt: skip
    assert _files(stores["two"]) == _files(stores["one"])

    ds = xr.open_zarr(stores["two"])
    assert ds.attrs[cv.ATTR_DATASET] == "crustal" and ds.attrs[cv.ATTR_SAMPLING_RATE] == RATE_HZ
    for variable in (cv.WAVEFIELD_VAR, "u_north", "u_east"):
        assert ds[variable].dims == (cv.REALISATION, cv.TIME, cv.SENSOR)
        assert ds[variable].shape == (15, 120, 36) and ds[variable].dtype == np.float32
    assert list(ds[cv.ROLE].values) == [
        *cv.BUNDLE_ROLES[:5], "param_train", "param_train", "param_train", "param_interp",
        "param_extrap", "sweep_train", "sweep_train", "sweep_test", "initial_train",
        "initial_test",
    ]  # fmt: skip
    assert np.allclose(ds[cv.X].values, np.repeat(np.arange(6) * 100.0, 6))  # row-major
    assert np.allclose(ds[cv.Y].values, np.tile(np.arange(6) * 100.0, 6))
    assert np.isfinite(ds.u.values).all() and np.abs(ds.u.values).max() > 0
    # Realisation parameters are coordinates; seeds and the secret appear nowhere.
    assert {"source_x_m", "strike_deg", "vp_m_s", "correlation_length_m"} <= set(ds.coords)
    from seisctf import keys

    seed = keys.derive_seed(secret, "synth/crustal")
    text = (stores["two"] / "zarr.json").read_text()
    assert secret not in text and str(seed) not in text and "seed" not in text


def test_cli_refuses_an_unstable_time_step_with_exit_3(tmp_path):
    result = seisctf(
        "synth", "crustal", "--out", str(tmp_path / "x.zarr"), "--time-step", "0.01",
        "--quiet", *SMALL_SWEEP, "--spacing", "50", check=False,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "Courant number" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.zarr").exists()


# 1.5 s records at 100 Hz: the demo's simulations (most of its time) are half as long as with
# a 3 s layout, and the bundle has the same pairs, tasks and parameters.
SMALL_LAYOUT = """train_steps: 120
few_start: 75
few_steps: 45
forecast_start: 120
forecast_steps: 30
modes: 16
"""


def test_demo_builds_and_scores_the_crustal_bundle(tmp_path):
    """`seisctf demo --dataset crustal` at a small size (8 × 8 sensors, a 1.5 s layout): the
    bundle has the core pairs and the extended pairs 10 and 11 (E13–E16) with the published
    parameter values only, and the zeros baseline scores exactly 0.0 on every task."""
    layout = tmp_path / "small.yaml"
    layout.write_text(SMALL_LAYOUT)
    workdir = tmp_path / "demo"
    seisctf(
        "demo", "--workdir", str(workdir), "--dataset", "crustal", "--sensors", "64",
        "--layout", str(layout), "--quiet",
    )  # fmt: skip
    scores = json.loads((workdir / "scores-crustal.json").read_text())
    by_model = {result["name"]: result for result in scores}
    assert set(by_model) == {"zeros", "persistence", "mean"}
    zeros = by_model["zeros"]
    assert list(zeros["scores"]) == [f"E{i}" for i in range(1, 17)]
    assert all(value == 0.0 for value in zeros["scores"].values())
    assert zeros["avg_score"] == 0.0 and zeros["extended_avg_score"] == 0.0
    assert zeros["truth_sha256_verified"] is True
    persistence = by_model["persistence"]
    core = [persistence["scores"][f"E{i}"] for i in range(1, 13)]
    assert persistence["avg_score"] == pytest.approx(np.mean(core))

    import zarr

    public = zarr.open_group(str(workdir / "public" / "bundle-crustal.zarr"), mode="r")
    manifest = public.attrs[cv.ATTR_CTF]
    assert manifest["dataset"] == "crustal" and manifest["delta_t"] == pytest.approx(0.01)
    assert manifest["sensor_grid"] == {"n_x": 8, "n_y": 8, "spacing_m": 100.0}
    pairs = {pair["id"]: pair for pair in manifest["pairs"]}
    assert sorted(pairs) == list(range(1, 12))
    assert pairs[10]["train"] == [f"X{i}train" for i in range(11, 15)]
    assert pairs[10]["burn_in"] == "X15train" and pairs[10]["task"] == "parametric_sweep"
    assert pairs[10]["parameters"]["name"] == "vp_m_s"
    assert pairs[10]["parameters"]["train"] == pytest.approx(np.linspace(4500.0, 5500.0, 4))
    assert 4500.0 < pairs[10]["parameters"]["test"] < 5500.0
    assert pairs[11]["train"] == [f"X{i}train" for i in range(16, 20)]
    assert pairs[11]["burn_in"] == "X20train" and "parameters" not in pairs[11]
    assert pairs[8]["parameters"] == {"name": "vp_m_s", "train": [4600.0, 5000.0, 5400.0],
                                      "test": 5200.0}  # fmt: skip
    assert public["X11train"].shape == (120, 64) and public["X20train"].shape == (45, 64)
    truth = zarr.open_group(str(workdir / "private" / "truth-crustal.zarr"), mode="r")
    assert truth["X10test"].shape == truth["X11test"].shape == (30, 64)
    assert "X10test" not in public and "X11test" not in public
    text = json.dumps(dict(public.attrs))
    assert "source_x_m" not in text and "strike" not in text
