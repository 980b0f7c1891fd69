"""Names of dims, variables and attrs of every store kind, described once, with validators.

Readers and writers import these names instead of repeating strings. The public contract is
docs/contract.md; this module is its executable form.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, TypeVar

from seisctf.errors import InvalidInput

if TYPE_CHECKING:  # annotations only: the command line reads these names without xarray
    import xarray as xr
    from zarr.codecs import BloscCodec

# --- dims -------------------------------------------------------------------------------------
TIME = "time"
SENSOR = "sensor"
REALISATION = "realisation"

# --- wavefield store --------------------------------------------------------------------------
WAVEFIELD_VAR = "u"
LATITUDE = "latitude"
LONGITUDE = "longitude"
ATTR_START_TIME = "start_time"
ATTR_SAMPLING_RATE = "sampling_rate"
ATTR_DATASET = "dataset"
ATTR_SENSOR_ORDER = "sensor_order"
ATTR_PARAMETER_NAME = "parameter_name"
# Per-realisation coordinate naming the role a realisation plays in a CTF bundle.
ROLE = "role"
ROLES = (
    "forecast",
    "noise_medium",
    "noise_high",
    "few_clean",
    "few_noisy",
    "param_train",
    "param_interp",
    "param_extrap",
)

# The realisations one CTF bundle needs, in store order: five independent events, then three
# parametric training values, the interpolation value and the extrapolation value.
BUNDLE_ROLES = ROLES[:5] + ("param_train",) * 3 + ROLES[6:]
# Roles of the extended pairs (E13+; a store holding them gets pairs 10 and 11): many parametric
# simulations (`sweep_train`, ≥ 2) and one new value (`sweep_test`); simulations from other initial
# conditions (`initial_train`, ≥ 1) and one more (`initial_test`).
EXTENDED_ROLES = ("sweep_train", "sweep_test", "initial_train", "initial_test")
# Per-sensor grid coordinates (m) of a gridded wavefield (the crustal surface grid), and the
# grid's shape {"n_x", "n_y", "spacing_m"} (sensor = row × n_y + column), copied into the manifest.
X = "x"
Y = "y"
ATTR_SENSOR_GRID = "sensor_grid"

# --- continuous waveform store (`seisctf ingest waveforms`) ------------------------------------
WAVEFORM_VAR = "data"  # data(station, channel, time) float32, NaN in gaps, no time coordinate
STATION = "station"
CHANNEL = "channel"
WAVEFORM_DIMS = (STATION, CHANNEL, TIME)
COVERAGE_VAR = "coverage"  # coverage(station, block): fraction of non-NaN samples
ELEVATION = "elevation"

# --- DAS store (`seisctf ingest das`, `seisctf synth das`) -------------------------------------
# One variable named after the recorded quantity, dims (time, distance), float32, NaN in gaps,
# no time coordinate (sample i at start_time + i / sampling_rate); `distance` (m along the
# fibre) is its coordinate, in fibre order.
DISTANCE = "distance"
DAS_DIMS = (TIME, DISTANCE)
DAS_QUANTITIES = ("strain_rate", "strain", "phase", "velocity", "phase_rate", "raw")
DAS_DEFAULT_VAR = "strain_rate"
ATTR_QUANTITY = "quantity"  # the variable's name again: strain_rate, strain, ...
ATTR_UNITS = "units"  # of the samples, e.g. "1/s" (strain rate), "1" (strain)
ATTR_GAUGE_LENGTH = "gauge_length_m"
ATTR_CHANNEL_SPACING = "channel_spacing_m"
ATTR_INTERROGATOR = "interrogator"  # vendor / instrument, or "synthetic"
DAS_COVERAGE_VAR = "coverage"  # coverage(block): fraction of non-NaN samples per time block
# A DAS record made of CTF realisations laid end to end (`seisctf synth das`): {"slot_duration_s",
# "segment_steps", "guard_steps", "sampling_rate_hz" (the CTF rate), "layout", "roles" (per
# slot, SEGMENT_ROLES), "parameter_name", "parameter_values" (per slot, null if none)}.
ATTR_CTF_SEGMENTS = "ctf_segments"
# Wavefield cut from a DAS store (`seisctf tasks` on a DAS store): dataset name, provenance attr.
DAS_DATASET = "das"
ATTR_DAS = "das"
# A zoo submission's record of how it was made (model, library, settings a pair).
ATTR_ZOO = "zoo"


# --- event-window store (`seisctf ingest seisbench|stead|quakeml`, `seisctf split`) -----------
# waveforms(trace, channel, sample) float32, NaN-padded to one window length per store; every
# metadata column a per-trace coordinate under its SeisBench name; a Parquet copy of the
# metadata inside the store (`catalog.parquet`; stores of earlier versions: under `catalogs/`
# beside the store).
TRACE = "trace"
SAMPLE = "sample"
EVENT_WINDOWS_VAR = "waveforms"
EVENT_WINDOWS_DIMS = (TRACE, CHANNEL, SAMPLE)
TRACE_NAME = "trace_name"  # the key submissions use, exactly as the dataset has it
TRACE_NAME_ORIGINAL = "trace_name_original"
TRACE_NPTS = "trace_npts"  # samples before the NaN padding
# Of the samples a trace is read and exported with (its components, `trace_npts` samples): the
# fraction that are gaps (NaN in the store, zeros in SeisBench's reads and the export).
TRACE_GAP_FRACTION = "trace_gap_fraction"
TRACE_SAMPLING_RATE = "trace_sampling_rate_hz"  # the store's rate (every trace)
TRACE_SOURCE_SAMPLING_RATE = "trace_source_sampling_rate_hz"  # a resampled trace's own rate
TRACE_CHUNK = "trace_chunk"  # SeisBench's chunk of the trace (chunked datasets)
TRACE_COMPONENT_ORDER = "trace_component_order"
ATTR_COMPONENT_ORDER = "component_order"  # the `channel` letters in order, e.g. "ZNE"
TRACE_CATEGORY = "trace_category"  # "earthquake_local", "noise", ...
P_ARRIVAL_SAMPLE = "trace_p_arrival_sample"
S_ARRIVAL_SAMPLE = "trace_s_arrival_sample"
NETWORK_CODE = "station_network_code"
STATION_CODE = "station_code"
SOURCE_ID = "source_id"
SOURCE_LATITUDE = "source_latitude_deg"
SOURCE_LONGITUDE = "source_longitude_deg"
STATION_LATITUDE = "station_latitude_deg"
STATION_LONGITUDE = "station_longitude_deg"
SPLIT_VAR = "split"  # per trace: "train", "dev", "test" once a split has been made
SPLIT_VALUES = ("train", "dev", "test")
# Per trace, written by `seisctf split` beside `split`: the source cluster (source-clusters), the
# station group (station-disjoint) or -1 (event, time). Attrs: the split's definition, its audit.
SPLIT_CLUSTER_VAR = "split_cluster"
ATTR_SPLIT = "split"
ATTR_SPLIT_AUDIT = "split_audit"
CATALOGS_DIR = "catalogs"  # where earlier versions kept catalogues: read, no longer written
# Keys `seisctf split --audit` writes at least (docs/contract.md, "Splits and the leakage audit").
AUDIT_KEYS = (
    "strategy",
    "counts",
    "shared_stations",
    "test_earthquake_fraction_at_shared_stations",
    "test_noise_fraction_at_shared_stations",
    "events_in_several_splits",
    "min_train_test_source_distance_km",
    "budgets",
)


# --- wavefield cut from a continuous waveform store (`seisctf tasks` on an archive) ------------
# Roles of the ten consecutive segments cut from a continuous record, in time order: the
# interpolation segment lies between the training segments, the extrapolation segment before.
SEGMENT_ROLES = (
    "forecast",
    "few_clean",
    "param_extrap",
    "param_train",
    "noise_medium",
    "few_noisy",
    "param_interp",
    "param_train",
    "param_train",
    "noise_high",
)
ARCHIVE_DATASET = "archive"
# Per-realisation coordinate: ISO 8601 time of the segment's first sample.
SEGMENT_START_TIME = "segment_start_time"
# The parametric pairs' parameter: hours from the store's start_time to the segment's start.
SEGMENT_PARAMETER = "segment_start_h"
# Provenance of an archive bundle: all of it in the truth group, public keys in the public one.
ATTR_ARCHIVE = "archive"

# An ingest's problem lines (every bad input, by name): the root attr `ingest_problems` holds
# at most the first ATTR_PROBLEM_LINES; beyond that the group `problems` holds all of them (array
# `line`, dimension `problem`) and the root attr `ingest_problem_count` their number.
ATTR_PROBLEMS = "ingest_problems"
ATTR_PROBLEM_COUNT = "ingest_problem_count"
ATTR_PROBLEM_LINES = 1_000
PROBLEMS_GROUP, PROBLEM_LINES, PROBLEM_DIM = "problems", "line", "problem"
# Gaps and overlaps a DAS store's root attrs `gaps` and `overlaps` hold: at most the first
# ATTR_DAS_SPANS of each; beyond that the group of the same name holds all of them and the root
# attr `gap_count` or `overlap_count` their number (`seisctf.formats.das.das_spans`).
ATTR_DAS_SPANS = 1_000
# Per-station attrs of a continuous waveform store (`ingest waveforms`): older stores keep them
# in the root attrs (an object keyed by station); newer ones in the group STATION_ATTRS_GROUP,
# one array of each name along `station` (in the order of the store's `station`), each element
# the station's entry as JSON text, so the root `zarr.json` stays small however many stations.
STATION_ATTRS_GROUP = "station_attrs"
STATION_ATTRS = ("time_offsets_s", "station_channels", "channel_metadata")
# Attr set last on every store seisctf writes: a store without it is partial, never used as whole.
ATTR_COMPLETE = "seisctf_complete"
# Transforms applied to a variable, in order: a JSON list of {"transform": name, **parameters}
# (never seeds or secrets: those stay in private outputs).
ATTR_TRANSFORMS = "seisctf_transforms"
# Provenance of a store written by `seisctf build`: recipe (less secrets), versions, input hashes.
ATTR_PROVENANCE = "seisctf_provenance"
# Provenance keys of a generated store: whether anyone can regenerate its truth
# (`keys.TRUTH_PUBLIC`: from an explicit seed or the published demo secret; `keys.TRUTH_HIDDEN`:
# from a secret) and why. A bundle cut from a public one (`--public-truth`) states both in its
# `ctf` manifest, and every leaderboard page of its scores carries `PUBLIC_TRUTH_NOTE`.
PROVENANCE_TRUTH = "truth"
PROVENANCE_TRUTH_REASON = "truth_reason"
PUBLIC_TRUTH_NOTE = "truth regenerable: for teaching only"

# --- CTF bundle -------------------------------------------------------------------------------
ATTR_CTF = "ctf"
ATTR_CTF_SALT = "ctf_salt"
ATTR_CTF_SECRET = "ctf_secret"  # kept with the truth only, when seisctf generated the secret
SCORE_NAMES = tuple(f"E{i}" for i in range(1, 13))
METRIC_SHORT = "short_time"
METRIC_LONG = "long_time"
METRIC_RECON = "reconstruction"
METRIC_NAMES = (METRIC_SHORT, METRIC_LONG, METRIC_RECON)
CONVENTIONS = ("reference", "paper")

# Chunking depends on the data's shape only (never on the cluster), so bytes are reproducible.
TARGET_CHUNK_BYTES = 4 * 2**20


class BloscSettings(TypedDict):
    """The arguments of zarr's `BloscCodec` that seisctf sets."""

    cname: Literal["lz4", "lz4hc", "blosclz", "snappy", "zlib", "zstd"]
    clevel: int
    shuffle: Literal["noshuffle", "shuffle", "bitshuffle"]


# Compressor of numeric variables in every store seisctf writes: Blosc LZ4 with bit shuffle
# (zarr v3 `blosc` codec). On float32 seismograms it compresses about as well as zarr's default
# zstd and encodes and decodes several times faster (benchmarks/RESULTS.md, "Waveform ingest");
# readers follow each array's codec metadata, so stores written with zstd stay valid.
DATA_CODEC: BloscSettings = {"cname": "lz4", "clevel": 5, "shuffle": "bitshuffle"}


def data_compressor() -> BloscCodec:
    """A fresh zarr v3 codec for DATA_CODEC."""
    from zarr.codecs import BloscCodec

    return BloscCodec(**DATA_CODEC)


def time_space_chunks(n_time: int, n_space: int, itemsize: int = 4) -> tuple[int, int]:
    """Chunk shape (time, space) for a (time, space) array: whole rows up to 1024 sensors wide,
    and as many rows as fit in about 4 MiB. A function of the shape only."""
    space = min(n_space, 1024)
    rows = max(1, TARGET_CHUNK_BYTES // (space * itemsize))
    return min(n_time, rows), space


def sampling_rate_hz(attrs: Mapping[str, object], what: str) -> float:
    """The `sampling_rate` attr of a store, array or record (`what` names it), Hz: the one
    reader of it, InvalidInput unless a positive finite number."""
    rate = attrs.get(ATTR_SAMPLING_RATE)
    if (
        isinstance(rate, bool)
        or not isinstance(rate, numbers.Real)  # numpy's numbers too
        or not math.isfinite(rate)
        or rate <= 0
    ):
        raise InvalidInput(
            f"{what} attr {ATTR_SAMPLING_RATE!r}", f"expected a positive number of Hz, got {rate!r}"
        )
    return float(rate)


def _check_timing(ds: xr.Dataset, name: str, *, start_time: bool = True) -> None:
    """A positive finite `sampling_rate` attr (Hz), and a `start_time` attr unless told not."""
    sampling_rate_hz(ds.attrs, name)
    if start_time and ATTR_START_TIME not in ds.attrs:
        raise InvalidInput(name, f"has no attr {ATTR_START_TIME!r} (ISO 8601)")


def validate_wavefield(ds: xr.Dataset, name: str = "wavefield store") -> xr.Dataset:
    """Check a wavefield store against the contract; raise InvalidInput naming what is wrong."""
    if WAVEFIELD_VAR not in ds:
        raise InvalidInput(
            name, f"has no variable {WAVEFIELD_VAR!r} (found {sorted(map(str, ds.data_vars))})"
        )
    dims = ds[WAVEFIELD_VAR].dims
    if dims not in ((TIME, SENSOR), (REALISATION, TIME, SENSOR)):
        raise InvalidInput(
            name,
            f"variable {WAVEFIELD_VAR!r} has dims {dims}, expected (time, sensor) or "
            "(realisation, time, sensor)",
        )
    _check_timing(ds, name)
    return ds


def is_waveform_store(ds: xr.Dataset) -> bool:
    """True for a continuous waveform store: variable `data(station, channel, time)`."""
    return WAVEFORM_VAR in ds.data_vars and ds[WAVEFORM_VAR].dims == WAVEFORM_DIMS


def validate_waveform_store(ds: xr.Dataset, name: str = "waveform store") -> xr.Dataset:
    """Check a continuous waveform store against the contract; raise InvalidInput if not."""
    if not is_waveform_store(ds):
        raise InvalidInput(
            name,
            f"has no variable {WAVEFORM_VAR!r} with dims {WAVEFORM_DIMS} "
            f"(found {sorted(map(str, ds.data_vars))})",
        )
    _check_timing(ds, name)
    return ds


def das_variable(ds: xr.Dataset) -> str | None:
    """Name of the DAS variable of `ds` (dims (time, distance), a known quantity), or None."""
    for name, variable in ds.data_vars.items():
        if variable.dims == DAS_DIMS and name in DAS_QUANTITIES:
            return str(name)
    return None


def validate_das_store(ds: xr.Dataset, name: str = "DAS store") -> str:
    """Check a DAS store against the contract; return its variable's name."""
    variable = das_variable(ds)
    if variable is None:
        raise InvalidInput(
            name,
            f"has no variable with dims {DAS_DIMS} named one of {DAS_QUANTITIES} "
            f"(found {sorted(map(str, ds.data_vars))})",
        )
    if DISTANCE not in ds.coords:
        raise InvalidInput(name, f"has no {DISTANCE!r} coordinate (m along the fibre)")
    _check_timing(ds, name)
    return variable


def is_event_window_store(ds: xr.Dataset) -> bool:
    """True for an event-window store: variable `waveforms(trace, channel, sample)`."""
    return EVENT_WINDOWS_VAR in ds.data_vars and ds[EVENT_WINDOWS_VAR].dims == EVENT_WINDOWS_DIMS


def validate_event_window_store(ds: xr.Dataset, name: str = "event-window store") -> xr.Dataset:
    """Check an event-window store against the contract; raise InvalidInput if not."""
    if not is_event_window_store(ds):
        raise InvalidInput(
            name,
            f"has no variable {EVENT_WINDOWS_VAR!r} with dims {EVENT_WINDOWS_DIMS} "
            f"(found {sorted(map(str, ds.data_vars))})",
        )
    if TRACE_NAME not in ds.coords:
        raise InvalidInput(name, f"has no per-trace coordinate {TRACE_NAME!r}")
    _check_timing(ds, name, start_time=False)
    return ds


def require_keys(mapping: Mapping, keys: tuple[str, ...], name: str) -> None:
    missing = [key for key in keys if key not in mapping]
    if missing:
        raise InvalidInput(name, f"is missing {', '.join(missing)}")


# --- CTF pairs (the contract's pair <-> score map) ---------------------------------------------
TRAIN_NAMES = tuple(f"X{i}train" for i in range(1, 11))
TEST_NAMES = tuple(f"X{i}test" for i in range(1, 10))


def is_train_name(name: str) -> bool:
    """A public input array (`X{i}train`, the extended pairs' included)."""
    return name.startswith("X") and name.endswith("train") and name[1:-5].isdigit()


@dataclass(frozen=True)
class PairSpec:
    """One train/test pair of a CTF bundle: inputs, the withheld test array, scored metrics."""

    id: int
    train: tuple[str, ...]
    test: str
    metrics: tuple[str, ...]
    burn_in: str | None = None


_PARAMETRIC_TRAIN = ("X6train", "X7train", "X8train")
CTF_PAIRS = (
    PairSpec(1, ("X1train",), "X1test", (METRIC_SHORT, METRIC_LONG)),
    PairSpec(2, ("X2train",), "X2test", (METRIC_RECON,)),
    PairSpec(3, ("X2train",), "X3test", (METRIC_LONG,)),
    PairSpec(4, ("X3train",), "X4test", (METRIC_RECON,)),
    PairSpec(5, ("X3train",), "X5test", (METRIC_LONG,)),
    PairSpec(6, ("X4train",), "X6test", (METRIC_SHORT, METRIC_LONG)),
    PairSpec(7, ("X5train",), "X7test", (METRIC_SHORT, METRIC_LONG)),
    PairSpec(8, _PARAMETRIC_TRAIN, "X8test", (METRIC_SHORT,), burn_in="X9train"),
    PairSpec(9, _PARAMETRIC_TRAIN, "X9test", (METRIC_SHORT,), burn_in="X10train"),
)


@dataclass(frozen=True)
class ExtendedNames:
    """Array names of the extended pairs, numbered on from X11train: the sweep's training
    arrays, its burn-in, the initial conditions' training arrays, their burn-in."""

    sweep_train: tuple[str, ...]
    sweep_burn_in: str
    initial_train: tuple[str, ...]
    initial_burn_in: str


def extended_names(n_sweep: int, n_initial: int) -> ExtendedNames:
    numbers = iter(range(11, 13 + n_sweep + n_initial))
    sweep = tuple(f"X{next(numbers)}train" for _ in range(n_sweep))
    sweep_burn_in = f"X{next(numbers)}train"
    initial = tuple(f"X{next(numbers)}train" for _ in range(n_initial))
    return ExtendedNames(sweep, sweep_burn_in, initial, f"X{next(numbers)}train")


EXTENDED_TASKS = {10: "parametric_sweep", 11: "new_initial_conditions"}


def extended_pairs(n_sweep: int, n_initial: int) -> tuple[PairSpec, ...]:
    """Pairs 10 (E13 short, E14 long: forecast a new parameter value of a sweep from its
    burn-in, trained on `n_sweep` parameter values) and 11 (E15, E16: forecast a simulation from
    new initial conditions from its burn-in, trained on `n_initial` others); none without."""
    if not n_sweep and not n_initial:
        return ()
    names = extended_names(n_sweep, n_initial)
    metrics = (METRIC_SHORT, METRIC_LONG)
    return (
        PairSpec(10, names.sweep_train, "X10test", metrics, burn_in=names.sweep_burn_in),
        PairSpec(11, names.initial_train, "X11test", metrics, burn_in=names.initial_burn_in),
    )


class ScoredWindows(Protocol):
    """What says which rows a metric scores (a `CtfManifest`): the first `k_short` and the last
    `k_long` time steps of a test array."""

    @property
    def k_short(self) -> int: ...

    @property
    def k_long(self) -> int: ...


def window_rows(metric: str, windows: ScoredWindows) -> slice:
    """The rows of a test array a metric scores: the first k_short, the last k_long, or all."""
    if metric == METRIC_SHORT:
        return slice(0, windows.k_short)
    if metric == METRIC_LONG:
        return slice(-windows.k_long, None)
    return slice(None)


Pair = TypeVar("Pair", bound=PairSpec)


def scored_metrics(pairs: Sequence[Pair]) -> list[tuple[str, Pair, str]]:
    """(score name, pair, metric) in score order: E1, E2, ... follow the pairs' metrics in order."""
    ordered = [(pair, metric) for pair in pairs for metric in pair.metrics]
    return [(f"E{i}", pair, metric) for i, (pair, metric) in enumerate(ordered, start=1)]


PARAMETER_VALUE = "parameter_value"
