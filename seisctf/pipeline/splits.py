"""Station-aware train/dev/test splits of an event-window store (`seisctf split`).

Strategies (every choice a pure function of the per-trace metadata, the options and the seed;
units are taken in sorted order of their keys before any seeded permutation, so the split never
depends on the store's trace order, its chunks or the cluster):

- `source-clusters` (as in arXiv 2501.14809): k-means (scikit-learn, `n_init=10`,
  `random_state=seed`, one thread) on the distinct source locations (latitude, longitude in
  degrees) into `n_clusters` (20) clusters, numbered by the latitude of their centres from
  south (0) to north. The `test_clusters` (4) southernmost and as many northernmost clusters
  are `test`; the central ones (12) are the training clusters, whose events go to `dev` with
  probability `dev_fraction` (a seeded choice of whole events), else to `train`. A trace
  without a source location (a noise window) joins the cluster whose centre is nearest its
  station, and within the training clusters goes to `dev` by a seeded choice of traces.
- `station-disjoint`: units are stations (`NET.STA`); with `buffer_km` > 0, stations closer than
  that (great-circle) are joined into one unit, transitively. Units in a seeded random order
  fill `train`, `dev`, `test` to the `fractions` of traces (a unit goes where the middle of its
  traces falls). `split_cluster` is the unit's number (sorted by its first station).
- `event`: units are events (`source_id`; a trace without one is its own unit), seeded order,
  filled like station-disjoint — SeisBench's random event split.
- `time`: the same units in time order (source origin time, else the window's start time):
  the earliest traces `train`, then `dev`, the latest `test`.

Budgets (source-clusters): for each budget b (1, 3, 6, 9, 12 training clusters) `draws` (12)
seeded draws of b of the training clusters, all different. When C(n_train, b) ≤ draws every
distinct draw is listed once and the budget is marked exhaustive: a budget of 12 of 12 clusters
is one draw, never twelve copies of it. A draw's training set is the `train` traces whose
`split_cluster` is in the draw; dev and test stay as they are.

Writing (`split_store`): the variables `split(trace)` (text) and `split_cluster(trace)` (int32,
−1 where a strategy has no clusters) are written into the store in place (waveforms untouched),
with Dask; then the attrs `split` (strategy, options, clusters, budgets) and `split_audit`, and
last the consolidated metadata. Readers keep seeing the previous, complete state until then.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import event_windows
from seisctf.catalogs.trace_keys import (
    EARTH_RADIUS_KM,
    event_keys,
    haversine_tree,
    station_keys,
)
from seisctf.catalogs.trace_table import read_trace_table
from seisctf.cluster import compute
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.options import option
from seisctf.pipeline.split_audit import leakage_audit
from seisctf.wording import counted

STRATEGIES = ("source-clusters", "station-disjoint", "event", "time")
CLUSTER_VAR = cv.SPLIT_CLUSTER_VAR
ATTR_SPLIT = cv.ATTR_SPLIT
ATTR_SPLIT_AUDIT = cv.ATTR_SPLIT_AUDIT
TRAIN, DEV, TEST = cv.SPLIT_VALUES
# Columns a split reads (those the store has).
SPLIT_COLUMNS = (
    cv.TRACE_NAME,
    cv.NETWORK_CODE,
    cv.STATION_CODE,
    cv.STATION_LATITUDE,
    cv.STATION_LONGITUDE,
    cv.SOURCE_ID,
    cv.SOURCE_LATITUDE,
    cv.SOURCE_LONGITUDE,
    cv.P_ARRIVAL_SAMPLE,
    cv.S_ARRIVAL_SAMPLE,
    cv.TRACE_CATEGORY,
    "source_origin_time",
    "trace_start_time",
)


@dataclass(frozen=True)
class SplitOptions:
    """A split's options (`seisctf split`'s, a `picking` output's `split`: the JSON schema of
    the recipe's keys is made from these fields, `seisctf.options`); `checked` checks them
    together."""

    strategy: str = option(help="how traces are split", schema={"enum": list(STRATEGIES)})
    n_clusters: int = option(20, "source-clusters: k-means clusters", minimum=1)
    test_clusters: int = option(4, "source-clusters: test clusters at each end", minimum=1)
    dev_fraction: float = option(0.1, "source-clusters: share of training events in dev")
    fractions: tuple[float, ...] = option(
        (0.7, 0.1, 0.2), "shares of train, dev, test", min_items=3, max_items=3
    )
    buffer_km: float = option(0.0, "station-disjoint: stations closer are one unit, km", minimum=0)
    budgets: tuple[int, ...] = option((1, 3, 6, 9, 12), "training clusters a draw", minimum=1)
    draws: int = option(12, "draws a budget", minimum=1)
    seed: int = option(0, "seed of every seeded choice", minimum=0)

    @classmethod
    def from_text(cls, strategy: str, *, fractions: str, budgets: str, **options) -> SplitOptions:
        """Options as the command line gives them (`fractions` "0.7,0.1,0.2", `budgets`
        "1,3,6,9,12"), checked."""
        try:
            shares = tuple(float(x) for x in fractions.split(","))
        except ValueError:
            raise InvalidInput("fractions", f"expected TRAIN,DEV,TEST, got {fractions!r}") from None
        try:
            sizes = tuple(int(x) for x in budgets.split(",") if x.strip())
        except ValueError:
            raise InvalidInput("budgets", f"expected integers, got {budgets!r}") from None
        return cls(strategy, fractions=shares, budgets=sizes, **options).checked()

    def checked(self) -> SplitOptions:
        if self.strategy not in STRATEGIES:
            raise InvalidInput("strategy", f"{self.strategy!r} is not one of {STRATEGIES}")
        if len(self.fractions) != 3 or min(self.fractions) < 0 or sum(self.fractions) <= 0:
            raise InvalidInput("fractions", f"need three shares ≥ 0, got {self.fractions}")
        if not 0 <= self.dev_fraction < 1:
            raise InvalidInput("dev_fraction", f"must be in [0, 1), got {self.dev_fraction}")
        if self.test_clusters < 1 or self.n_clusters < 2 * self.test_clusters + 1:
            raise InvalidInput(
                "n_clusters",
                f"{counted(self.n_clusters, 'cluster')} leave no training cluster beside 2 × "
                f"{counted(self.test_clusters, 'test cluster')}",
            )
        if self.buffer_km < 0:
            raise InvalidInput("buffer_km", f"must be ≥ 0, got {self.buffer_km}")
        if self.seed < 0:
            raise InvalidInput("seed", f"must be ≥ 0, got {self.seed}")
        if self.draws < 1 or any(b < 1 for b in self.budgets):
            raise InvalidInput("draws/budgets", "draws and budgets must be ≥ 1")
        return self

    @property
    def n_train_clusters(self) -> int:
        return self.n_clusters - 2 * self.test_clusters


@dataclass
class Split:
    """A split of a trace table: per trace `split` and `cluster`, and what defines it."""

    split: np.ndarray  # object, one of SPLIT_VALUES per trace
    cluster: np.ndarray  # int32, −1 without clusters
    clusters: list[dict[str, Any]] = field(default_factory=list)
    budgets: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --- seeded choices ----------------------------------------------------------------------------


def seeded_order(keys: Iterable[str], seed: int, purpose: str) -> list[str]:
    """The distinct `keys`, sorted, then in a random order drawn from (seed, purpose)."""
    distinct = sorted(set(keys))
    rng = np.random.default_rng([seed, int.from_bytes(purpose.encode()[:8], "little")])
    return [distinct[i] for i in rng.permutation(len(distinct))]


def fill_in_order(units: pd.Series, order: Sequence[str], fractions: Sequence[float]) -> np.ndarray:
    """Assign units, taken in `order`, to train/dev/test by the cumulative share of traces: a
    unit goes to the split where the middle of its traces falls."""
    counts = units.value_counts().reindex(list(order)).to_numpy(dtype=np.float64)
    middle = (np.cumsum(counts) - counts / 2) / counts.sum()
    bounds = np.cumsum(np.asarray(fractions, dtype=np.float64) / sum(fractions))
    chosen = np.array(cv.SPLIT_VALUES, dtype=object)[
        np.minimum(np.searchsorted(bounds, middle, side="right"), 2)
    ]
    return units.map(dict(zip(order, chosen, strict=True))).to_numpy(dtype=object)


def require(
    table: pd.DataFrame,
    columns: Sequence[str],
    what: str,
    purpose: str,
    parameters: Sequence[str] = (),
) -> None:
    """InvalidInput unless `table` has `columns`; `purpose` may name `parameters` as `{name}`."""
    missing = [c for c in columns if c not in table]
    if missing:
        raise InvalidInput(
            what,
            f"{purpose} needs the per-trace column(s) {', '.join(missing)}",
            parameters=parameters,
        )


def buffered_groups(coordinates: pd.DataFrame, buffer_km: float) -> dict[str, str]:
    """Station → its group's key (the group's first station, sorted): stations closer than
    `buffer_km` are in one group, transitively. Stations without coordinates stay alone."""
    stations = list(coordinates.index)
    parent = list(range(len(stations)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    located = np.flatnonzero(np.isfinite(coordinates.to_numpy()).all(axis=1))
    if buffer_km > 0 and located.size:
        points = coordinates.to_numpy()[located]
        tree = haversine_tree(points[:, 0], points[:, 1])
        radius = buffer_km / EARTH_RADIUS_KM
        for i, neighbours in zip(
            located, tree.query_radius(np.radians(points), r=radius), strict=True
        ):
            for j in located[neighbours]:
                a, b = root(int(i)), root(int(j))
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {station: stations[root(i)] for i, station in enumerate(stations)}


# --- strategies --------------------------------------------------------------------------------


def kmeans_sources(points: np.ndarray, n_clusters: int, seed: int) -> np.ndarray:
    """Cluster centres (n_clusters, 2) of distinct (lat, lon) points, sorted south to north."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        model = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit(points)
    centres = model.cluster_centers_
    return centres[np.lexsort((centres[:, 1], centres[:, 0]))]


def nearest_centre(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (Euclidean in degrees, as k-means measures) of each point."""
    from sklearn.metrics import pairwise_distances_argmin

    return pairwise_distances_argmin(points, centres).astype(np.int32)


def source_clusters(table: pd.DataFrame, options: SplitOptions, what: str) -> Split:
    require(table, (cv.SOURCE_LATITUDE, cv.SOURCE_LONGITUDE), what, "source-clusters")
    source = table[[cv.SOURCE_LATITUDE, cv.SOURCE_LONGITUDE]].to_numpy(dtype=np.float64)
    located = np.isfinite(source).all(axis=1)
    points = np.unique(source[located], axis=0)
    if len(points) < options.n_clusters:
        raise InvalidInput(
            what,
            f"{len(points)} distinct source locations, fewer than the {options.n_clusters} "
            "clusters asked for (--clusters)",
        )
    centres = kmeans_sources(points, options.n_clusters, options.seed)
    cluster = np.full(len(table), -1, dtype=np.int32)
    cluster[located] = nearest_centre(source[located], centres)
    notes = []
    if not located.all():
        require(table, (cv.STATION_LATITUDE, cv.STATION_LONGITUDE), what, "noise windows")
        station = table[[cv.STATION_LATITUDE, cv.STATION_LONGITUDE]].to_numpy(dtype=np.float64)
        unlocated = ~located & ~np.isfinite(station).all(axis=1)
        if unlocated.any():
            name = table[cv.TRACE_NAME].iloc[int(np.flatnonzero(unlocated)[0])]
            raise InvalidInput(
                f"trace {name}",
                f"has neither a source nor a station location "
                f"({counted(int(unlocated.sum()), 'such trace')})",
            )
        cluster[~located] = nearest_centre(station[~located], centres)
        notes.append(
            f"{counted(int((~located).sum()), 'trace')} without a source location (noise "
            "windows) assigned to the cluster nearest their station"
        )
    t = options.test_clusters
    test_ids = set(range(t)) | set(range(options.n_clusters - t, options.n_clusters))
    split = np.where(np.isin(cluster, list(test_ids)), TEST, TRAIN).astype(object)
    # dev: whole events of the training clusters (and single noise traces), seeded.
    training = split == TRAIN
    units = event_keys(table)[training]
    if options.dev_fraction > 0 and training.any():
        order = seeded_order(units, options.seed, "dev")
        n_dev = round(options.dev_fraction * len(order))
        dev_units = set(order[:n_dev])
        split[np.flatnonzero(training)[units.isin(dev_units).to_numpy()]] = DEV
    counts = pd.Series(cluster).value_counts()
    clusters = [
        {
            "id": i,
            "latitude": float(centres[i, 0]),
            "longitude": float(centres[i, 1]),
            "role": TEST if i in test_ids else TRAIN,
            "traces": int(counts.get(i, 0)),
        }
        for i in range(options.n_clusters)
    ]
    train_ids = [i for i in range(options.n_clusters) if i not in test_ids]
    budgets = draw_budgets(train_ids, options, split, cluster)
    return Split(split, cluster, clusters, budgets, notes)


def draw_budgets(
    train_ids: Sequence[int], options: SplitOptions, split: np.ndarray, cluster: np.ndarray
) -> dict[str, Any]:
    """Seeded draws of training clusters per budget (module doc); exhaustive where C(n, b) is
    no more than the draws asked for."""
    import itertools

    n = len(train_ids)
    result: dict[str, Any] = {}
    in_train = cluster[split == TRAIN]
    train_per_cluster = np.bincount(in_train[in_train >= 0], minlength=max(train_ids) + 1)
    for budget in options.budgets:
        if budget > n:
            raise InvalidInput(
                "budgets", f"budget {budget} exceeds the {counted(n, 'training cluster')}"
            )
        distinct = math.comb(n, budget)
        if distinct <= options.draws:
            draws = [list(c) for c in itertools.combinations(train_ids, budget)]
        else:
            rng = np.random.default_rng([options.seed, budget])
            seen: set[tuple[int, ...]] = set()
            draws = []
            while len(draws) < options.draws:
                draw = tuple(sorted(int(train_ids[i]) for i in rng.choice(n, budget, False)))
                if draw not in seen:
                    seen.add(draw)
                    draws.append(list(draw))
        train_traces = [int(train_per_cluster[d].sum()) for d in draws]
        entry = {
            "clusters": budget,
            "distinct_draws": distinct,
            "requested_draws": options.draws,
            "n_draws": len(draws),
            "exhaustive": distinct <= options.draws,
            "draws": draws,
            "train_traces": train_traces,
        }
        if distinct < options.draws:
            entry["note"] = (
                f"only {distinct} distinct draw(s) of {budget} of {n} clusters exist: "
                f"{options.draws} draws would repeat them, so each is listed once"
            )
        result[str(budget)] = entry
    return result


def station_disjoint(table: pd.DataFrame, options: SplitOptions, what: str) -> Split:
    require(table, (cv.NETWORK_CODE, cv.STATION_CODE), what, "station-disjoint")
    stations = station_keys(table)
    notes = []
    if options.buffer_km > 0:
        require(
            table, (cv.STATION_LATITUDE, cv.STATION_LONGITUDE), what, "{buffer_km}", ["buffer_km"]
        )
        coordinates = (
            table[[cv.STATION_LATITUDE, cv.STATION_LONGITUDE]]
            .astype(np.float64)
            .groupby(stations.to_numpy())
            .mean()
        )
        group_of = buffered_groups(coordinates.sort_index(), options.buffer_km)
        unlocated = int((~np.isfinite(coordinates.to_numpy()).all(axis=1)).sum())
        if unlocated:
            notes.append(f"{unlocated} station(s) without coordinates are not buffered")
    else:
        group_of = {s: s for s in stations.unique()}
    units = stations.map(group_of).astype(object)  # str objects: hashed one by one below
    order = seeded_order(units, options.seed, "station-disjoint")
    split = fill_in_order(units, order, options.fractions)
    numbers = {key: i for i, key in enumerate(sorted(set(units)))}
    cluster = units.map(numbers).to_numpy(dtype=np.int32)
    groups = units.groupby(stations.to_numpy()).first()
    clusters = [
        {"id": numbers[key], "stations": sorted(groups.index[groups == key])}
        for key in sorted(numbers)
    ]
    return Split(split, cluster, clusters, {}, notes)


def event_split(table: pd.DataFrame, options: SplitOptions, what: str) -> Split:
    require(table, (cv.TRACE_NAME,), what, "event")
    units = event_keys(table)
    split = fill_in_order(units, seeded_order(units, options.seed, "event"), options.fractions)
    return Split(split, np.full(len(table), -1, dtype=np.int32))


def trace_times(table: pd.DataFrame, what: str) -> pd.Series:
    """Time of each trace (ns): its source origin time, else its start time."""
    times = pd.Series(pd.NaT, index=table.index, dtype="datetime64[ns, UTC]")
    for column in ("source_origin_time", "trace_start_time"):
        if column in table:
            parsed = pd.to_datetime(
                table[column].replace({"": None, "nan": None}),
                utc=True,
                format="ISO8601",
                errors="coerce",
            ).astype("datetime64[ns, UTC]")
            times = times.fillna(parsed)
    if times.isna().any():
        name = table[cv.TRACE_NAME].iloc[int(np.flatnonzero(times.isna())[0])]
        raise InvalidInput(f"trace {name}", "has no source_origin_time or trace_start_time")
    return times


def time_split(table: pd.DataFrame, options: SplitOptions, what: str) -> Split:
    units = event_keys(table)
    first = trace_times(table, what).groupby(units.to_numpy()).min()
    frame = pd.DataFrame({"time": first.to_numpy(), "key": first.index.to_numpy()})
    order = frame.sort_values(["time", "key"], kind="stable")["key"].tolist()
    split = fill_in_order(units, order, options.fractions)
    return Split(split, np.full(len(table), -1, dtype=np.int32))


STRATEGY_FUNCTIONS = {
    "source-clusters": source_clusters,
    "station-disjoint": station_disjoint,
    "event": event_split,
    "time": time_split,
}


def make_split(table: pd.DataFrame, options: SplitOptions, what: str = "store") -> Split:
    """The split of a trace table (read_trace_table's columns) under `options`."""
    options.checked()
    if table.empty:
        raise InvalidInput(what, "has no trace to split")
    return STRATEGY_FUNCTIONS[options.strategy](table, options, what)


# --- the store ---------------------------------------------------------------------------------


@dataclass
class SplitResult:
    """The split written into a store: the trace table (with `split`, `split_cluster`) and
    the audit."""

    table: pd.DataFrame
    audit: dict[str, Any]
    split: Split


def split_chunk(n_trace: int) -> int:
    return max(1, min(n_trace, 2**20))


def write_split(store: StoreLocation, split: Split, attrs: dict[str, Any], quiet: bool) -> None:
    """Write `split` and `split_cluster` into the store with Dask, and into its Parquet
    catalogue (when the store has one); then attrs and the consolidated metadata, last
    (storage.finish_group)."""
    import dask.array as da
    import zarr

    group = zarr.open_group(
        storage.open_group(store, mode="r+").store, mode="r+", use_consolidated=False
    )
    # The catalogue is read before anything is written: a missing or unreadable one is refused
    # with the store as it was.
    catalog = event_windows.read_catalog(store) if group.attrs.get("catalog") else None
    n_trace = len(split.split)
    chunk = split_chunk(n_trace)
    sources, targets = [], []
    for name, values, dtype, fill in (
        (cv.SPLIT_VAR, split.split, str, ""),
        (CLUSTER_VAR, split.cluster.astype(np.int32), np.int32, -1),
    ):
        targets.append(
            group.create_array(
                name,
                shape=(n_trace,),
                chunks=(chunk,),
                dtype=dtype,
                fill_value=fill,
                dimension_names=(cv.TRACE,),
                overwrite=True,
            )
        )
        sources.append(da.from_array(np.asarray(values), chunks=chunk))
    # dask types the targets as numpy-like arrays; zarr's arrays take `[region] = values` too.
    writes = da.store(sources, targets, lock=False, compute=False)  # type: ignore[arg-type]
    compute(writes, label="write split", quiet=quiet)
    if catalog is not None:
        catalog[cv.SPLIT_VAR] = pd.array(split.split.astype(str), dtype="str")
        catalog[CLUSTER_VAR] = split.cluster.astype(np.int32)
        event_windows.write_catalog(catalog, store)
        attrs = {**attrs, "catalog": event_windows.CATALOG_PATH}  # now inside the store
    storage.finish_group(store, attrs)


def split_store(store: StoreLocation, options: SplitOptions, *, quiet: bool = False) -> SplitResult:
    """Split the event-window store at `store` in place and audit the split (split_audit)."""
    options = options.checked()
    url = store.url
    ds = cv.validate_event_window_store(storage.open_dataset(store), url)
    table = read_trace_table(ds, SPLIT_COLUMNS, quiet=quiet)
    split = make_split(table, options, url)
    table = table.assign(**{cv.SPLIT_VAR: split.split, CLUSTER_VAR: split.cluster})
    audit = leakage_audit(table, options.strategy, split.budgets)
    audit["options"] = asdict(options)
    if split.notes:
        audit["notes"] = list(split.notes)
    attrs = {
        ATTR_SPLIT: {
            "strategy": options.strategy,
            "options": asdict(options),
            "clusters": split.clusters,
            "budgets": split.budgets,
            "variables": [cv.SPLIT_VAR, CLUSTER_VAR],
        },
        ATTR_SPLIT_AUDIT: audit,
    }
    write_split(store, split, attrs, quiet)
    return SplitResult(table, audit, split)
