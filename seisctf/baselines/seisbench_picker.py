"""Any SeisBench model with local weights as a picker (`seisctf pick seisbench`), CPU only.

Weights (`--weights PATH`, never downloaded), loaded with `torch.load(weights_only=True)` (no
pickled code runs):
- a SeisBench saved model: `PATH.json` + `PATH.pt` as `model.save(PATH)` writes them (PATH given
  as the base, as the `.json` file, or as a folder holding exactly one such pair): the class is
  built from the JSON's `model_args` (`Model.load`);
- any other file: a torch state dict for `seisbench.models.<Name>(**model_args)`
  (`model_args` from `--model-args JSON`, default none).
The weights must be readable at the same path by every worker (a local cluster, or a shared
filesystem). Each worker loads a model once and keeps it (`load_model`, keyed by class,
arguments, path and the weights' SHA-256); the client loads it once too, to check it before any
task runs.

Supported models: those whose `annotate_batch_post` gives per-sample probabilities (batch,
samples, labels) with labels `P` and `S` (PhaseNet, EQTransformer, …), at the store's sampling
rate (no resampling). Per window (the first `npts` samples, in the model's component order, NaN
as 0): fragments of the model's `in_samples` with a stride of half of it (the last one ending
at the window's end; a shorter window is zero-padded), run in batches of `batch_size` fragments
through `annotate_batch_pre` → model → `annotate_batch_post` under `torch.no_grad()`, combined
per sample by the maximum over fragments. The P (S) pick is the sample of the highest P (S)
probability when that reaches `pick_threshold`; detection is the highest `Detection` (or `D`)
probability when the model has that label, else the higher of the P and S maxima. Batches
depend on the store's task partition only, so picks do not depend on the number of workers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seisctf.baselines import pickers
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

DEFAULT_BATCH_SIZE = 64
DEFAULT_PICK_THRESHOLD = 0.3
DETECTION_LABELS = ("Detection", "D")
# Per worker process: models by ModelSpec, and how many loads happened (a test reads it).
_MODELS: dict[ModelSpec, Any] = {}
LOAD_COUNT = {"loads": 0}


@dataclass(frozen=True)
class ModelSpec:
    """Which model to build and from which weights: `name` of a `seisbench.models` class,
    `weights` file (state dict or the `.pt` of a saved model), `config` the saved model's `.json`
    (None for a state dict), `model_args` JSON text, `sha256` of the weights (and config)."""

    name: str
    weights: str
    config: str | None
    model_args: str
    sha256: str


def _saved_pair(path: Path) -> tuple[Path, Path] | None:
    """(json, pt) of a SeisBench saved model given as its base, its `.json` or its folder."""
    if path.is_dir():
        pairs = [p for p in sorted(path.glob("*.json")) if p.with_suffix(".pt").is_file()]
        if len(pairs) != 1:
            raise InvalidInput(str(path), "expected one saved SeisBench model (NAME.json + .pt)")
        return pairs[0], pairs[0].with_suffix(".pt")
    base = path.with_suffix("") if path.suffix == ".json" else path
    config, weights = Path(f"{base}.json"), Path(f"{base}.pt")
    return (config, weights) if config.is_file() and weights.is_file() else None


def model_spec(name: str, weights: str, model_args: str | None = None) -> ModelSpec:
    """Resolve `--model`/`--weights`/`--model-args` (module doc) and hash the weights."""
    import seisbench.models as sbm

    model_class = getattr(sbm, name, None)
    if not (isinstance(model_class, type) and issubclass(model_class, sbm.WaveformModel)):
        raise InvalidInput("model", f"{name!r} is not a model class of seisbench.models")
    path = Path(weights).absolute()
    pair = _saved_pair(path)
    if pair is None and not path.is_file():
        raise InvalidInput(str(weights), "weights not found (a state dict or a saved model)")
    try:
        arguments = json.loads(model_args or "{}")
    except json.JSONDecodeError as error:
        raise InvalidInput("model_args", f"not JSON ({error})") from None
    if not isinstance(arguments, dict):
        raise InvalidInput("model_args", "expected a JSON object of constructor arguments")
    digest = hashlib.sha256()
    for file in pair or (path,):
        digest.update(Path(file).read_bytes())
    config, weights_file = (str(pair[0]), str(pair[1])) if pair else (None, str(path))
    return ModelSpec(
        name, weights_file, config, json.dumps(arguments, sort_keys=True), digest.hexdigest()
    )


def _build(spec: ModelSpec):
    import seisbench.models as sbm
    import torch

    model_class = getattr(sbm, spec.name)
    try:
        if spec.config is not None:
            model = model_class.load(spec.config.removesuffix(".json"), weights_only=True)
        else:
            model = model_class(**json.loads(spec.model_args))
            state = torch.load(spec.weights, map_location="cpu", weights_only=True)
            model.load_state_dict(state)
    except (RuntimeError, ValueError, TypeError, KeyError, OSError) as error:
        raise InvalidInput(spec.weights, f"cannot load into {spec.name} ({error})") from None
    return model.to("cpu").eval()


def load_model(spec: ModelSpec):
    """The model of `spec`, built once per process (module doc) and kept; one torch thread."""
    import torch

    if spec not in _MODELS:
        torch.set_num_threads(1)
        _MODELS[spec] = _build(spec)
        LOAD_COUNT["loads"] += 1
    return _MODELS[spec]


def _fragment_starts(length: int, size: int) -> list[int]:
    """Starts of `size`-sample fragments with stride size // 2 covering [0, length)."""
    if length <= size:
        return [0]
    starts = list(range(0, length - size + 1, max(1, size // 2)))
    return starts if starts[-1] == length - size else [*starts, length - size]


@dataclass(frozen=True)
class SeisBenchPicker:
    """A pipeline.pickers picker running `spec`'s model (module doc)."""

    spec: ModelSpec
    component_order: str
    batch_size: int = DEFAULT_BATCH_SIZE
    pick_threshold: float = DEFAULT_PICK_THRESHOLD

    def __call__(
        self, windows: np.ndarray, npts: np.ndarray, sampling_rate_hz: float
    ) -> np.ndarray:
        import torch

        model = load_model(self.spec)
        size = int(model.in_samples)
        fragments, owners, offsets = [], [], []
        for i, (window, valid) in enumerate(zip(windows, npts, strict=True)):
            data = np.nan_to_num(window[:, : int(valid)])
            for start in _fragment_starts(int(valid), size):
                piece = np.zeros((data.shape[0], size), dtype=np.float32)
                part = data[:, start : start + size]
                piece[:, : part.shape[1]] = part
                fragments.append(piece)
                owners.append(i)
                offsets.append(start)
        labels = list(model.labels)
        probability = [np.zeros((int(v), len(labels))) for v in npts]
        for first in range(0, len(fragments), self.batch_size):
            batch = torch.from_numpy(np.stack(fragments[first : first + self.batch_size]))
            with torch.no_grad():
                out = model.annotate_batch_post(
                    model(model.annotate_batch_pre(batch, {})), None, {}
                )
            out = np.nan_to_num(out.numpy().astype(np.float64))
            for row, fragment in enumerate(range(first, first + len(batch))):
                owner, start = owners[fragment], offsets[fragment]
                target = probability[owner][start : start + size]
                np.maximum(target, out[row, : len(target)], out=target)
        return np.array([self._pick(p, labels, sampling_rate_hz) for p in probability])

    def _pick(
        self, probability: np.ndarray, labels: list[str], sampling_rate_hz: float
    ) -> list[float]:
        """[detection, p_time_s, s_time_s] of one window's (samples, labels) probabilities."""
        if len(probability) == 0:
            return [0.0, np.nan, np.nan]
        peaks = probability.max(axis=0)
        times = []
        for phase in ("P", "S"):
            column = labels.index(phase)
            best = int(np.argmax(probability[:, column]))
            times.append(
                best / sampling_rate_hz if peaks[column] >= self.pick_threshold else np.nan
            )
        detection_label = next((label for label in DETECTION_LABELS if label in labels), None)
        detection = (
            peaks[labels.index(detection_label)]
            if detection_label
            else max(peaks[labels.index("P")], peaks[labels.index("S")])
        )
        return [float(np.clip(detection, 0.0, 1.0)), *times]


def checked_picker(
    spec: ModelSpec, sampling_rate_hz: float, batch_size: int, pick_threshold: float
) -> SeisBenchPicker:
    """Load the model here once, check it fits the store (labels P and S, sampling rate,
    per-sample output) and return the picker the workers run."""
    import torch

    model = load_model(spec)
    labels = list(model.labels)
    if "P" not in labels or "S" not in labels:
        raise InvalidInput("model", f"{spec.name} has labels {labels}, not P and S")
    if not np.isclose(float(model.sampling_rate), sampling_rate_hz):
        raise InvalidInput(
            "model",
            f"{spec.name} runs at {model.sampling_rate} Hz, the store at {sampling_rate_hz} Hz",
        )
    if batch_size < 1 or not 0 < pick_threshold <= 1:
        raise InvalidInput("batch_size/pick_threshold", "need ≥ 1 and a probability")
    probe = torch.zeros((1, len(model.component_order), int(model.in_samples)))
    with torch.no_grad():
        out = model.annotate_batch_post(model(model.annotate_batch_pre(probe, {})), None, {})
    if tuple(out.shape) != (1, int(model.in_samples), len(labels)):
        raise InvalidInput("model", f"{spec.name} does not give per-sample probabilities")
    return SeisBenchPicker(spec, str(model.component_order), batch_size, pick_threshold)


def seisbench_picks(
    store: StoreLocation,
    out: StoreLocation,
    *,
    model: str,
    weights: str,
    model_args: str | None = None,
    split: str = "test",
    batch_size: int = DEFAULT_BATCH_SIZE,
    pick_threshold: float = DEFAULT_PICK_THRESHOLD,
    quiet: bool = False,
) -> dict[str, Any]:
    """Pick `split` of the store at `store` with a SeisBench model and write the table to
    `out`; returns the sidecar's description."""
    spec = model_spec(model, weights, model_args)
    traces = pickers.select_traces(store, split, quiet=quiet)
    picker = checked_picker(spec, traces.sampling_rate_hz, batch_size, pick_threshold)
    rows = pickers.run_picker(traces, picker, label=f"{model} on {split}", quiet=quiet)
    description = pickers.describe_job(
        traces,
        "seisbench",
        model=model,
        weights=spec.weights,
        weights_config=spec.config,
        weights_sha256=spec.sha256,
        model_args=json.loads(spec.model_args),
        batch_size=batch_size,
        pick_threshold=pick_threshold,
    )
    pickers.write_picks(pickers.picks_frame(traces.names, rows), out, description)
    return description
