"""End-to-end uncertainty experiment (issue 8, part 4; docs/uncertainty.md "The experiment").

Synthetic three-component event windows with known P and S arrivals → event-window store →
`seisctf split --strategy source-clusters` with data budgets and seeded draws of training
clusters → per budget and draw:

- `stalta`: the STA/LTA + AIC picker (`seisctf.baselines.stalta`) with its trigger grid tuned on
  the draw's training windows (mean of detection, P and S F1): deterministic, so its training
  variance is 0 by construction, while its tuning still depends on the data draw;
- `tiny-cnn`: a small dilated 1-D CNN (PyTorch, CPU, about 6 k parameters) trained briefly, as
  PhaseNet is, on Gaussian P/S label curves from several initialisation seeds per draw (an
  ensemble of initialisations per draw, as in arXiv 2501.14809);

each run is scored on the test split with `seisctf.scoring.picks` (0.5 s tolerance), giving the
runs table (`runs.csv`), which `seisctf.scoring.compare` turns into `compare/report.json` and
its figures. Run: `python experiments/uncertainty_experiment.py --workdir DIR [--quick]`.

The windows (`synthetic_windows`): 16 stations on a 4 × 4 grid over 4° × 4° (30–34 °N, 0–4 °E);
events uniform over the region at 10 km depth with magnitude U(1, 3), each recorded at its
nearest stations; P at hypocentral distance / 6 km/s, S at distance / 3.5 km/s (a window starts
3–8 s before P and lasts 30 s at 100 Hz; S after the window's last second: no S arrival).
Wavelets exp(−t/τ)·sin(2πft) from each onset, P mostly on Z, S (twice P, at half its frequency)
mostly on N and E; P amplitude 10^(M − 1.3) · 30 km / r over unit white noise scaled per station
plus a 0.2 Hz microseism. The P frequency grows with the source's latitude (3 Hz in the south to
12 Hz in the north), so source clusters — numbered by latitude, the test clusters being the
southern- and northernmost — differ in character and the choice of training clusters matters.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from seisctf import conventions as cv
from seisctf.location import StoreLocation

RATE_HZ = 100.0
WINDOW_S = 30.0
DOWNSAMPLE = 4  # the learner sees 25 Hz
LABEL_SIGMA_SAMPLES = 3.0  # at 25 Hz: 0.12 s
# P and S steps are about 1 % of the label steps: weighting them 30× in the loss lets a briefly
# trained model reach probability 0.5 at onsets (unweighted, 150 steps never do).
PHASE_WEIGHT = 30.0
PICK_THRESHOLD = 0.5
METRICS = ("detection_f1", "p_f1", "s_f1")


@dataclass(frozen=True)
class ExperimentConfig:
    """Sizes of the experiment (defaults: a few minutes on two cores)."""

    n_events: int = 200
    stations_per_event: int = 3
    noise_per_station: int = 6
    n_clusters: int = 10
    test_clusters: int = 2
    budgets: tuple[int, ...] = (1, 3, 6)
    draws: int = 4
    seeds: int = 3
    train_steps: int = 150
    batch_size: int = 16
    learning_rate: float = 5e-3
    data_seed: int = 0
    stalta_grid: dict[str, tuple[float, ...]] | None = None  # None: the picker's TUNING_GRID


QUICK = ExperimentConfig(
    n_events=60,
    noise_per_station=2,
    n_clusters=6,
    test_clusters=1,
    budgets=(1, 4),
    draws=2,
    seeds=2,
    train_steps=60,
    stalta_grid={"sta_s": (0.5,), "lta_s": (4.0,), "p_on": (2.5, 4.0), "s_on": (2.5,)},
)


def _distance_km(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Equirectangular distance (km): enough over 4 degrees."""
    dy = (np.asarray(lat1) - lat2) * 111.2
    dx = (np.asarray(lon1) - lon2) * 111.2 * np.cos(np.radians((np.asarray(lat1) + lat2) / 2))
    return np.hypot(dx, dy)


def _wavelet(time_s: np.ndarray, onset_s: float, frequency_hz: float) -> np.ndarray:
    lag = time_s - onset_s
    decay = 4.0 / frequency_hz
    return np.where(
        lag >= 0, np.exp(-np.maximum(lag, 0) / decay) * np.sin(2 * np.pi * frequency_hz * lag), 0.0
    )


def synthetic_windows(config: ExperimentConfig) -> xr.Dataset:
    """Event and noise windows with per-trace metadata under the contract's names (module doc)."""
    rng = np.random.default_rng(config.data_seed)
    grid = np.linspace(30.5, 33.5, 4), np.linspace(0.5, 3.5, 4)
    stations = [
        (f"S{i}{j}", lat, lon) for i, lat in enumerate(grid[0]) for j, lon in enumerate(grid[1])
    ]
    station_lat = np.array([s[1] for s in stations])
    station_lon = np.array([s[2] for s in stations])
    noise_level = rng.uniform(0.7, 1.5, len(stations))
    n_sample = int(WINDOW_S * RATE_HZ)
    time_s = np.arange(n_sample) / RATE_HZ
    rows: list[dict[str, Any]] = []
    waveforms = []

    def background(station: int) -> np.ndarray:
        micro = 3.0 * np.sin(2 * np.pi * 0.2 * time_s + rng.uniform(0, 2 * np.pi))
        return noise_level[station] * rng.standard_normal((3, n_sample)) + micro

    for event in range(config.n_events):
        lat, lon, magnitude = rng.uniform(30, 34), rng.uniform(0, 4), rng.uniform(1, 3)
        epicentral = _distance_km(station_lat, station_lon, lat, lon)
        frequency = 3.0 + 9.0 * (lat - 30.0) / 4.0
        for station in np.argsort(epicentral, kind="stable")[: config.stations_per_event]:
            distance = math.hypot(epicentral[station], 10.0)
            p_sample = float(round(rng.uniform(3, 8) * RATE_HZ))
            s_sample = p_sample + round(distance * (1 / 3.5 - 1 / 6.0) * RATE_HZ)
            if s_sample >= n_sample - RATE_HZ:
                s_sample = math.nan
            amplitude = 10 ** (magnitude - 1.3) * 30.0 / distance
            window = background(station)
            sign = rng.choice([-1.0, 1.0], 3)
            window += amplitude * np.outer(
                sign * [1.0, 0.3, 0.3], _wavelet(time_s, p_sample / RATE_HZ, frequency)
            )
            if not math.isnan(s_sample):
                s_wave = _wavelet(time_s, s_sample / RATE_HZ, frequency / 2)
                window += (
                    2 * amplitude * np.outer(rng.choice([-1.0, 1.0], 3) * [0.3, 1.0, 1.0], s_wave)
                )
            waveforms.append(window)
            rows.append(
                {
                    "station": station,
                    "category": "earthquake_local",
                    "p": p_sample,
                    "s": s_sample,
                    "source_id": f"ev{event:04d}",
                    "lat": lat,
                    "lon": lon,
                    "magnitude": magnitude,
                }
            )
    for station in range(len(stations)):
        for _ in range(config.noise_per_station):
            waveforms.append(background(station))
            rows.append(
                {
                    "station": station,
                    "category": "noise",
                    "p": math.nan,
                    "s": math.nan,
                    "source_id": "",
                    "lat": math.nan,
                    "lon": math.nan,
                    "magnitude": math.nan,
                }
            )
    table = pd.DataFrame(rows)
    n = len(table)
    text = lambda values: np.array(list(values), dtype=object)  # noqa: E731
    coords = {
        cv.TRACE_NAME: (
            cv.TRACE,
            text(f"XX.{stations[s][0]}.{i:05d}" for i, s in enumerate(table.station)),
        ),
        cv.TRACE_NPTS: (cv.TRACE, np.full(n, n_sample, dtype=np.int64)),
        cv.TRACE_CATEGORY: (cv.TRACE, text(table.category)),
        cv.P_ARRIVAL_SAMPLE: (cv.TRACE, table.p.to_numpy(float)),
        cv.S_ARRIVAL_SAMPLE: (cv.TRACE, table.s.to_numpy(float)),
        cv.NETWORK_CODE: (cv.TRACE, text(["XX"] * n)),
        cv.STATION_CODE: (cv.TRACE, text(stations[s][0] for s in table.station)),
        cv.STATION_LATITUDE: (cv.TRACE, station_lat[table.station]),
        cv.STATION_LONGITUDE: (cv.TRACE, station_lon[table.station]),
        cv.SOURCE_ID: (cv.TRACE, text(table.source_id)),
        cv.SOURCE_LATITUDE: (cv.TRACE, table.lat.to_numpy(float)),
        cv.SOURCE_LONGITUDE: (cv.TRACE, table.lon.to_numpy(float)),
        "source_magnitude": (cv.TRACE, table.magnitude.to_numpy(float)),
        cv.CHANNEL: (cv.CHANNEL, text("ZNE")),
    }
    return xr.Dataset(
        {cv.EVENT_WINDOWS_VAR: (cv.EVENT_WINDOWS_DIMS, np.stack(waveforms).astype(np.float32))},
        coords=coords,
        attrs={
            cv.ATTR_SAMPLING_RATE: RATE_HZ,
            "component_order": "ZNE",
            "dataset": "synthpick-clusters",
        },
    )


# --- the data: store, split, training sets --------------------------------------------------


@dataclass(frozen=True)
class Data:
    """The split store in memory: windows (trace, channel, sample), per-trace labels, the
    split's budgets (audit) and the store's labels as the referee reads them."""

    url: str
    windows: np.ndarray
    table: pd.DataFrame
    audit: dict[str, Any]
    truth: Any  # seisctf.scoring.picks.PickTruth

    def positions(self, split: str, clusters: list[int] | None = None) -> np.ndarray:
        mask = self.table[cv.SPLIT_VAR].to_numpy() == split
        if clusters is not None:
            mask &= np.isin(self.table[cv.SPLIT_CLUSTER_VAR].to_numpy(), clusters)
        return np.flatnonzero(mask)


def build_data(workdir: Path, config: ExperimentConfig) -> Data:
    """Write the windows as an event-window store, split it by source clusters with budgets and
    draws, and load it back (waveforms and labels) for training."""
    from seisctf.catalogs import event_windows
    from seisctf.catalogs.trace_table import read_trace_table
    from seisctf.pipeline.splits import SplitOptions, split_store
    from seisctf.scoring.picks import read_truth

    url = str(workdir / "windows.zarr")
    event_windows.write_event_windows(synthetic_windows(config), StoreLocation(url), quiet=True)
    options = SplitOptions(
        "source-clusters",
        n_clusters=config.n_clusters,
        test_clusters=config.test_clusters,
        budgets=config.budgets,
        draws=config.draws,
        seed=config.data_seed,
    )
    audit = split_store(StoreLocation(url), options, quiet=True).audit
    (workdir / "audit.json").write_text(json.dumps(audit, indent=2, default=str))
    dataset = event_windows.open_event_windows(url)
    table = read_trace_table(dataset, None)
    windows = np.asarray(dataset[cv.EVENT_WINDOWS_VAR].values, dtype=np.float32)
    return Data(url, windows, table, audit, read_truth(StoreLocation(url)))


def _arrival_s(data: Data, positions: np.ndarray) -> np.ndarray:
    """(2, n) P and S arrival times (s) of the windows at `positions`, NaN where none."""
    columns = [cv.P_ARRIVAL_SAMPLE, cv.S_ARRIVAL_SAMPLE]
    return data.table[columns].to_numpy(float)[positions].T / RATE_HZ


# --- the approaches -------------------------------------------------------------------------


def stalta_rows(data: Data, train: np.ndarray, test: np.ndarray, config: ExperimentConfig):
    """Tune STA/LTA + AIC on the training windows (best mean F1 over the grid), pick the test
    windows with the winner; rows (n_test, 3) of [detection, p_time_s, s_time_s]."""
    from seisctf.baselines.stalta import StaLtaPicker, grid_candidates
    from seisctf.scoring.picks import mean_f1_objective

    candidates = grid_candidates(grid=config.stalta_grid)
    npts = data.table[cv.TRACE_NPTS].to_numpy()
    tuning = StaLtaPicker(candidates)(data.windows[train], npts[train], RATE_HZ)
    # The referee's objective over exactly these windows (their labels, as split "train").
    labels = data.truth.labels.iloc[train].reset_index(drop=True).assign(**{cv.SPLIT_VAR: "train"})
    objective = mean_f1_objective(replace(data.truth, labels=labels), "train")
    names = labels[cv.TRACE_NAME].to_numpy()
    scores = [objective(names, *tuning[:, c, :].T) for c in range(len(candidates))]
    best = candidates[int(np.argmax(scores))]
    return StaLtaPicker((best,))(data.windows[test], npts[test], RATE_HZ)[:, 0, :]


def _learner_inputs(windows: np.ndarray):
    """Windows at 25 Hz (mean of 4 samples), demeaned and scaled by their standard deviation
    per component: (n, 3, samples / 4) float32 tensor."""
    import torch

    n, channels, samples = windows.shape
    x = np.nan_to_num(windows[..., : samples // DOWNSAMPLE * DOWNSAMPLE])
    x = x.reshape(n, channels, -1, DOWNSAMPLE).mean(axis=-1)
    x = x - x.mean(axis=-1, keepdims=True)
    x = x / (x.std(axis=-1, keepdims=True) + 1e-6)
    return torch.from_numpy(x.astype(np.float32))


def _learner_labels(arrival_s: np.ndarray, n_steps: int):
    """PhaseNet-style targets (n, 3, steps): noise, P and S Gaussians (σ 0.12 s) at 25 Hz."""
    import torch

    steps = np.arange(n_steps)[None, :]
    curves = []
    for phase in arrival_s:
        centre = phase[:, None] * RATE_HZ / DOWNSAMPLE
        curve = np.exp(-((steps - centre) ** 2) / (2 * LABEL_SIGMA_SAMPLES**2))
        curves.append(np.where(np.isnan(centre), 0.0, curve))
    p, s = curves
    noise = np.clip(1 - p - s, 0, 1)
    return torch.from_numpy(np.stack([noise, p, s], axis=1).astype(np.float32))


def tiny_cnn():
    """Dilated 1-D CNN: 3 → 8 → 16 → 16 → 16 channels (kernel 9, dilations 1, 2, 4, 8; 4.8 s
    receptive field at 25 Hz), then per-step logits of (noise, P, S)."""
    from torch import nn

    layers: list[nn.Module] = []
    for width_in, width_out, dilation in ((3, 8, 1), (8, 16, 2), (16, 16, 4), (16, 16, 8)):
        layers += [
            nn.Conv1d(width_in, width_out, 9, padding=4 * dilation, dilation=dilation),
            nn.ReLU(),
        ]
    return nn.Sequential(*layers, nn.Conv1d(16, 3, 1))


def cnn_rows(data: Data, train: np.ndarray, test: np.ndarray, seed: int, config: ExperimentConfig):
    """Train `tiny_cnn` from `seed` (initialisation and batch order) on the training windows for
    `train_steps` Adam steps (cross-entropy with soft labels, P and S weighted PHASE_WEIGHT);
    pick the test windows: detection = max P probability, a P (S) pick at the step of the
    maximum P (S) probability where it reaches PICK_THRESHOLD."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x = _learner_inputs(data.windows[train])
    y = _learner_labels(_arrival_s(data, train), x.shape[-1])
    model = tiny_cnn()
    weight = torch.tensor([1.0, PHASE_WEIGHT, PHASE_WEIGHT])[None, :, None]
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    for _ in range(config.train_steps):
        batch = torch.from_numpy(
            rng.choice(len(train), min(config.batch_size, len(train)), replace=False)
        )
        log_probability = torch.log_softmax(model(x[batch]), dim=1)
        loss = -(weight * y[batch] * log_probability).sum(dim=1).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        probability = torch.softmax(model(_learner_inputs(data.windows[test])), dim=1).numpy()
    peak = probability[:, 1:].max(axis=-1)
    at = probability[:, 1:].argmax(axis=-1) * DOWNSAMPLE / RATE_HZ
    picks = np.where(peak >= PICK_THRESHOLD, at, np.nan)
    return np.column_stack([peak[:, 0], picks])


# --- runs and report ------------------------------------------------------------------------


def _scores(data: Data, test: np.ndarray, rows: np.ndarray, name: str) -> dict[str, float]:
    """The referee's scores of the test split (`seisctf.scoring.picks.score_pick_table`)."""
    from seisctf.baselines.pickers import picks_frame
    from seisctf.scoring.picks import score_pick_table

    frame = picks_frame(data.table[cv.TRACE_NAME].to_numpy()[test], rows)
    result = score_pick_table(data.truth, frame, name=name, split="test")
    return {metric: float(result["scores"][metric] or 0.0) for metric in METRICS}


def _torch_seed(config: ExperimentConfig, budget: int, draw: int, seed: int) -> int:
    return int(np.random.SeedSequence([config.data_seed, budget, draw, seed]).generate_state(1)[0])


def run_experiment(
    workdir: str | Path, config: ExperimentConfig = ExperimentConfig(), *, quiet: bool = False
) -> dict[str, Any]:
    """Build the data, train and score every run, write `runs.csv` and the compare report
    (`compare/`); returns a summary with timings."""
    import torch

    from seisctf.scoring.compare import compare_runs
    from seisctf.scoring.uncertainty import RUN_COLUMNS, identical_draw_budgets, validate_runs

    torch.set_num_threads(1)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = build_data(workdir, config)
    timings = {"data_s": time.perf_counter() - started, "stalta_s": 0.0, "cnn_s": 0.0}
    test = data.positions("test")
    n_train_clusters = (
        len(data.audit["options"]["budgets"]) and config.n_clusters - 2 * config.test_clusters
    )
    records = []
    for budget in config.budgets:
        entry = data.audit["budgets"][str(budget)]
        for draw, clusters in enumerate(entry["draws"]):
            train = data.positions("train", clusters)
            common = {
                "budget": budget,
                "data_draw": draw,
                "n_clusters_total": n_train_clusters,
                "train_windows": len(train),
            }
            clock = time.perf_counter()
            scores = _scores(data, test, stalta_rows(data, train, test, config), "stalta")
            timings["stalta_s"] += time.perf_counter() - clock
            records += [
                {"approach": "stalta", "training_seed": None, "metric": m, "value": v, **common}
                for m, v in scores.items()
            ]
            for seed in range(config.seeds):
                clock = time.perf_counter()
                rows = cnn_rows(data, train, test, _torch_seed(config, budget, draw, seed), config)
                scores = _scores(data, test, rows, "tiny-cnn")
                timings["cnn_s"] += time.perf_counter() - clock
                records += [
                    {
                        "approach": "tiny-cnn",
                        "training_seed": seed,
                        "metric": m,
                        "value": v,
                        **common,
                    }
                    for m, v in scores.items()
                ]
            if not quiet:
                print(
                    f"budget {budget} draw {draw}: {len(train)} training windows done", flush=True
                )
    runs = pd.DataFrame(records)[[*RUN_COLUMNS, "n_clusters_total", "train_windows"]]
    runs.to_csv(workdir / "runs.csv", index=False)
    checked = validate_runs(runs, str(workdir / "runs.csv"))
    identical = identical_draw_budgets(checked, audit=data.audit)
    clock = time.perf_counter()
    report = compare_runs(
        checked, out=workdir / "compare", identical=identical, source=str(workdir / "runs.csv")
    )
    timings["compare_s"] = time.perf_counter() - clock
    timings["total_s"] = time.perf_counter() - started
    summary = {
        "config": asdict(config),
        "n_windows": int(len(data.table)),
        "n_test": int(len(test)),
        "n_runs": int(len(runs) // len(METRICS)),
        "timings": timings,
    }
    (workdir / "summary.json").write_text(json.dumps(summary, indent=2))
    return {"summary": summary, "report": report, "runs": runs}


def main(argv: list[str] | None = None) -> None:
    from seisctf.scoring.compare import summary_lines

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="uncertainty-experiment")
    parser.add_argument("--quick", action="store_true", help="the reduced version (the test's)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and draws")
    args = parser.parse_args(argv)
    config = replace(QUICK if args.quick else ExperimentConfig(), data_seed=args.seed)
    result = run_experiment(args.workdir, config)
    print("\n".join(summary_lines(result["report"])))
    print(json.dumps(result["summary"]["timings"], indent=2))
    workdir = Path(args.workdir)
    print(f"wrote {workdir / 'runs.csv'} and {workdir / 'compare' / 'report.json'}")


if __name__ == "__main__":
    main()
