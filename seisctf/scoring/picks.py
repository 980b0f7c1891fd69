"""`seisctf score picks`: a pick table scored against an event-window store's labels.

Truth: the store's per-trace `trace_name`, `trace_p_arrival_sample`, `trace_s_arrival_sample`,
`split` and the grouping columns, read chunk-wise with Dask (`read_trace_table`), never the
waveforms. A window with a P or S arrival is an earthquake window, any other a noise window;
arrival time = arrival sample / the store's `sampling_rate`. A store whose `trace_name` repeats
is refused (a submission row could not say which trace it means).

Scored traces: those of `split` (`train`, `dev`, `test`; `all`: every trace, the only choice for a
store without a split). The submission must hold each of them once (intake and its errors:
`seisctf.catalogs.pick_table`); rows naming other traces of the store are ignored and counted
(`n_ignored`), rows naming traces the store does not have are bad input. Rules and float rule:
`seisctf.scoring.pick_metrics`.

Groups (`group_by`): `station` (`NET.STA`), `magnitude` (`source_magnitude` in bins of
MAGNITUDE_BIN units, `[1, 2)`), `snr` (`trace_snr_db` in bins of SNR_BIN_DB dB; a value holding
several numbers, as STEAD's per-component `[56.8 55.4 47.4]`, counts as their mean). Traces
without the value (noise windows have no magnitude) form the group `none`.

Pick times are seconds from the window start: when most given picks of a column lie beyond the
windows they belong to (`window_s`, the store's samples per window / rate), as pick *samples*
would, a `PickTimeWarning` names the column; the scores are not changed.

Truth commitment (`truth_commitment`, hex SHA-256, so a leaderboard can say which truth a score
comes from): over `COMMITMENT_HEADER`, then `sampling_rate_hz=<repr of the float>\\n`, then the
scored traces' names sorted by code point, joined by `\\n` and UTF-8 encoded, then `\\n`, then their
P and then S arrival samples in that order as little-endian float64 (NaN as numpy's quiet NaN,
0x7ff8000000000000; −0.0 as 0.0).

Public and private halves (`parts`): the scored traces split by name (`parts.trace_split`) with
a salt derived from the withheld labels, `split_salt`: the same hash as the commitment with
`SALT_HEADER` in place of `COMMITMENT_HEADER`. Nobody without the scored split's arrivals can
compute it (the public bundle has none); anyone can once they are revealed at the close. Each
half is scored on its own, as the whole split is (`parts.public`, `parts.private`).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from seisctf import conventions as cv
from seisctf import storage
from seisctf.catalogs import pick_table
from seisctf.catalogs.trace_keys import station_keys
from seisctf.catalogs.trace_table import read_trace_table
from seisctf.errors import InvalidInput
from seisctf.location import LocationLike, StoreLocation
from seisctf.scoring import parts, pick_metrics
from seisctf.scoring.pick_metrics import PHASES, Tally

DEFAULT_TOLERANCE_S = 0.5
DEFAULT_THRESHOLD = 0.5
ALL_SPLITS = "all"
SPLIT_CHOICES = (*cv.SPLIT_VALUES, ALL_SPLITS)
MAGNITUDE_COLUMN = "source_magnitude"
SNR_COLUMN = "trace_snr_db"
MAGNITUDE_BIN = 1.0
SNR_BIN_DB = 10.0
NO_GROUP = "none"
GROUPINGS = ("station", "magnitude", "snr")
COMMITMENT_HEADER = b"seisctf picks truth v1\n"
SALT_HEADER = b"seisctf picks split salt v1\n"
ARRIVAL_COLUMNS = (cv.P_ARRIVAL_SAMPLE, cv.S_ARRIVAL_SAMPLE)


class PickTimeWarning(UserWarning):
    """Pick times that look like samples, not seconds (most beyond their windows)."""


@dataclass(frozen=True)
class PickTruth:
    """The labels of an event-window store: `labels` one row per trace in store order with
    `trace_name` (str), `p_arrival_s`, `s_arrival_s` (float64 s, NaN: none), `split` (str, ""
    without a split) and the raw grouping columns asked for; `window_s` the windows' duration
    (s; inf: unknown)."""

    url: str
    dataset: str
    sampling_rate_hz: float
    labels: pd.DataFrame
    window_s: float = math.inf

    def scored(self, split: str) -> np.ndarray:
        """Store positions (ascending) of the traces `split` scores."""
        if split not in SPLIT_CHOICES:
            raise InvalidInput("split", f"expected one of {list(SPLIT_CHOICES)}, got {split!r}")
        if split == ALL_SPLITS:
            return np.arange(len(self.labels))
        values = self.labels[cv.SPLIT_VAR].to_numpy(dtype=object)
        if not (values != "").any():
            raise InvalidInput(
                self.url,
                f"has no per-trace {cv.SPLIT_VAR!r} (run `seisctf split` first, or score "
                f"{{split}} {ALL_SPLITS})",
                parameters=["split"],
            )
        positions = np.flatnonzero(values == split)
        if positions.size == 0:
            raise InvalidInput(self.url, f"has no trace in split {split!r}")
        return positions

    def commitment(self, split: str, header: bytes = COMMITMENT_HEADER) -> str:
        """The truth commitment of the traces `split` scores (module doc); with `SALT_HEADER`
        the salt of its halves (`split_salt`)."""
        labels = self.labels.iloc[self.scored(split)]
        rate = self.sampling_rate_hz
        return truth_commitment(
            labels[cv.TRACE_NAME].to_numpy(),
            labels["p_arrival_s"].to_numpy(dtype=np.float64) * rate,
            labels["s_arrival_s"].to_numpy(dtype=np.float64) * rate,
            rate,
            header,
        )

    def split_salt(self, split: str) -> str:
        """Hex salt splitting the traces `split` scores into public and private halves (module
        doc): secret while their arrivals are."""
        return self.commitment(split, SALT_HEADER)


def _group_source_columns(group_by: Sequence[str]) -> list[str]:
    columns = {"station": [cv.NETWORK_CODE, cv.STATION_CODE], "magnitude": [MAGNITUDE_COLUMN]}
    columns["snr"] = [SNR_COLUMN]
    unknown = [name for name in group_by if name not in columns]
    if unknown:
        raise InvalidInput("group_by", f"unknown {unknown}; expected some of {list(GROUPINGS)}")
    return [column for name in group_by for column in columns[name]]


def _arrival_seconds(
    table: pd.DataFrame, column: str, sampling_rate_hz: float, url: str
) -> np.ndarray:
    """Arrival samples / rate (s); text that is not a number, and infinities, are bad input."""
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
    unreadable = np.zeros(len(values), dtype=bool)
    if not pd.api.types.is_numeric_dtype(table[column].dtype):
        text = table[column].astype(str).str.strip()
        unreadable = np.isnan(values) & ~text.isin(["", "nan", "NaN", "None"]).to_numpy()
    infinite = np.isinf(values)
    if unreadable.any() or infinite.any():
        names = table[cv.TRACE_NAME].to_numpy()[unreadable | infinite]
        raise InvalidInput(url, pick_table.describe_traces(names, f"with {column} not a number"))
    return values / sampling_rate_hz


def read_truth(
    store: StoreLocation,
    group_by: Sequence[str] = (),
    *,
    quiet: bool = True,
    labelled: bool = True,
) -> PickTruth:
    """The labels of the event-window store at `store` (module doc): its label columns only,
    read with Dask chunk by chunk; duplicate trace names and missing label columns are bad
    input. `labelled=False` reads a store that may lack the arrival columns (a public bundle:
    its arrivals NaN then)."""
    url = store.url
    ds = cv.validate_event_window_store(storage.open_dataset(store), url)
    sampling_rate_hz = cv.sampling_rate_hz(ds.attrs, url)
    missing = [column for column in ARRIVAL_COLUMNS if column not in ds.variables]
    if missing and labelled:
        raise InvalidInput(str(url), f"has no per-trace {missing} (the pick labels)")
    group_columns = _group_source_columns(group_by)
    columns = [cv.TRACE_NAME, *ARRIVAL_COLUMNS, cv.SPLIT_VAR, *group_columns]
    table = read_trace_table(ds, columns, quiet=quiet)
    absent = [column for column in group_columns if column not in table]
    if absent:
        raise InvalidInput(str(url), f"has no per-trace {absent} to group by")
    names = table[cv.TRACE_NAME].astype(str).astype(object)  # str objects: fast hashing
    repeated = names[names.duplicated(keep="first")].unique()
    if len(repeated):
        raise InvalidInput(
            str(url),
            pick_table.describe_traces(repeated, f"appear more than once in {cv.TRACE_NAME}")
            + "; the trace name is the key submissions use, it must be unique",
        )
    split = table[cv.SPLIT_VAR].astype(str) if cv.SPLIT_VAR in table else ""
    for column in missing:  # only when not `labelled`
        table[column] = np.nan
    labels = pd.DataFrame(
        {
            cv.TRACE_NAME: names.to_numpy(dtype=object),
            "p_arrival_s": _arrival_seconds(table, cv.P_ARRIVAL_SAMPLE, sampling_rate_hz, str(url)),
            "s_arrival_s": _arrival_seconds(table, cv.S_ARRIVAL_SAMPLE, sampling_rate_hz, str(url)),
            cv.SPLIT_VAR: split,
            **{column: table[column] for column in group_columns},
        }
    )
    dataset = str(ds.attrs.get(cv.ATTR_DATASET) or Path(str(url).rstrip("/")).name)
    window_s = ds.sizes[cv.SAMPLE] / sampling_rate_hz
    return PickTruth(str(url), dataset.removesuffix(".zarr"), sampling_rate_hz, labels, window_s)


# --- alignment -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aligned:
    """Submission values of the scored traces, in store order: `detection` (n,), `pick_s` (2, n)
    P and S picks (s, NaN: none); `n_ignored` rows named other traces of the store."""

    detection: np.ndarray
    pick_s: np.ndarray
    n_ignored: int


def align(
    truth_names: np.ndarray, scored: np.ndarray, submission: pd.DataFrame, what: str
) -> Aligned:
    """Match a checked pick table (`pick_table.validate_pick_table`, duplicates not yet
    checked) to the store's trace names (all of them, store order) and the scored positions;
    duplicate and unknown names, and scored traces without a row, are bad input naming them.
    A table listing exactly the scored traces in store order (as the baseline pickers write
    it) is matched without hashing a name."""
    names = submission[pick_table.TRACE_NAME].to_numpy(dtype=object)
    values = np.stack(
        [submission[name].to_numpy(dtype=np.float64) for name in pick_table.PICK_COLUMNS[1:]]
    )
    if len(names) == len(scored) and np.array_equal(names, truth_names[scored]):
        return Aligned(values[0], values[1:], 0)
    pick_table.refuse_duplicates(names, what)
    rows = pd.Index(truth_names).get_indexer(pd.Index(names))
    unknown = rows < 0
    if unknown.any():
        raise InvalidInput(
            what, pick_table.describe_traces(names[unknown], "not in the truth store")
        )
    row_of_trace = np.full(len(truth_names), -1, dtype=np.int64)
    row_of_trace[rows] = np.arange(len(rows))
    taken = row_of_trace[scored]
    absent = taken < 0
    if absent.any():
        raise InvalidInput(
            what, pick_table.describe_traces(truth_names[scored[absent]], "of the split missing")
        )
    return Aligned(values[0, taken], values[1:, taken], int(len(rows) - len(taken)))


def warn_if_picks_look_like_samples(truth: PickTruth, pick_s: np.ndarray, what: str) -> None:
    """A `PickTimeWarning` per pick column (`pick_s`: (2, n) P and S, s) of which most given
    picks lie outside [0, window_s]: times given in samples instead of seconds."""
    for column, picks in zip(pick_table.TIME_COLUMNS, pick_s, strict=True):
        given = picks[~np.isnan(picks)]
        outside = int(np.count_nonzero((given < 0) | (given > truth.window_s)))
        if outside * 2 > len(given):
            warnings.warn(
                f"{what}: {outside} of {len(given)} {column} picks lie outside their "
                f"{truth.window_s:g} s windows; {column} is seconds from the window start "
                f"(samples / {truth.sampling_rate_hz:g} Hz), were samples given?",
                PickTimeWarning,
                stacklevel=3,
            )


# --- groups ----------------------------------------------------------------------------------


def _numeric_values(column: pd.Series) -> np.ndarray:
    """Numbers of a column; text holding several numbers (`[56.8 55.4 47.4]`) gives their mean."""
    if pd.api.types.is_numeric_dtype(column.dtype):
        return column.to_numpy(dtype=np.float64, na_value=np.nan)
    parts = column.astype(str).str.replace(r"[\[\](),;]", " ", regex=True).str.split().explode()
    numbers = pd.to_numeric(parts, errors="coerce")
    numbers = numbers.where(np.isfinite(numbers))
    return numbers.groupby(level=0).mean().reindex(column.index).to_numpy(dtype=np.float64)


def _bins(values: np.ndarray, width: float, unit: str) -> tuple[np.ndarray, list[str]]:
    """(cell per trace, labels) of `width`-wide bins `[lo, hi)`, ascending, `none` last."""
    with np.errstate(invalid="ignore"):
        index = np.floor(values / width)
    finite = np.isfinite(index)
    present = np.unique(index[finite])
    cells = np.full(len(values), len(present), dtype=np.int64)
    cells[finite] = np.searchsorted(present, index[finite])
    labels = [f"[{k * width:g}, {(k + 1) * width:g}){unit}" for k in present]
    return cells, [*labels, NO_GROUP]


def group_cells(labels: pd.DataFrame, by: str) -> tuple[np.ndarray, list[str]]:
    """(cell per trace, cell names) of a grouping (module doc), rows as `labels` has them."""
    if by == "station":
        codes, names = pd.factorize(station_keys(labels), sort=True)
        return codes.astype(np.int64), [str(name) for name in names]
    if by == "magnitude":
        return _bins(_numeric_values(labels[MAGNITUDE_COLUMN]), MAGNITUDE_BIN, "")
    return _bins(_numeric_values(labels[SNR_COLUMN]), SNR_BIN_DB, " dB")


# --- the score -------------------------------------------------------------------------------


def truth_commitment(
    names: np.ndarray,
    p_arrival_sample: np.ndarray,
    s_arrival_sample: np.ndarray,
    sampling_rate_hz: float,
    header: bytes = COMMITMENT_HEADER,
) -> str:
    """Hex SHA-256 of the scored labels (module doc, "Truth commitment"), after `header`."""
    text = np.asarray(names).astype(np.dtypes.StringDType())
    in_order = len(text) < 2 or bool(np.all(text[:-1] <= text[1:]))
    order = np.arange(len(text)) if in_order else np.argsort(text, kind="stable")
    digest = hashlib.sha256(header)
    digest.update(f"sampling_rate_hz={float(sampling_rate_hz)!r}\n".encode())
    digest.update("\n".join(np.asarray(names, dtype=object)[order].tolist()).encode())
    digest.update(b"\n")
    for samples in (p_arrival_sample, s_arrival_sample):
        values = np.asarray(samples, dtype=np.float64)[order] + 0.0
        values[np.isnan(values)] = np.nan
        digest.update(values.astype("<f8").tobytes())
    return digest.hexdigest()


def _cell_block(counts: Tally, names: list[str], sizes: np.ndarray) -> dict[str, Any]:
    return {
        name: {"n_traces": int(sizes[cell]), **pick_metrics.cell_metrics(counts, cell)}
        for cell, name in enumerate(names)
        if sizes[cell] > 0
    }


def score_pick_table(
    truth: PickTruth,
    submission: pd.DataFrame,
    *,
    name: str,
    what: str = "submission",
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    threshold: float = DEFAULT_THRESHOLD,
    split: str = "test",
    group_by: Sequence[str] = (),
) -> dict[str, Any]:
    """The results object of a checked pick table against loaded labels (the contract's keys
    plus those docs/contract.md lists)."""
    if not (np.isfinite(tolerance_s) and tolerance_s > 0):
        raise InvalidInput(
            "tolerance_s", f"must be a positive number of seconds, got {tolerance_s}"
        )
    if not (np.isfinite(threshold) and 0 <= threshold <= 1):
        raise InvalidInput("threshold", f"must be a probability in [0, 1], got {threshold}")
    scored = truth.scored(split)
    labels = truth.labels.iloc[scored].reset_index(drop=True)
    aligned = align(truth.labels[cv.TRACE_NAME].to_numpy(dtype=object), scored, submission, what)
    warn_if_picks_look_like_samples(truth, aligned.pick_s, what)
    arrival_s = labels[["p_arrival_s", "s_arrival_s"]].to_numpy(dtype=np.float64).T.copy()
    earthquake = ~np.isnan(arrival_s).all(axis=0)
    options = {"tolerance_s": float(tolerance_s), "threshold": float(threshold)}

    def counts(cells: np.ndarray | None = None, n_cells: int = 1) -> Tally:
        return pick_metrics.blockwise_tally(
            earthquake, aligned.detection, arrival_s, aligned.pick_s, cells=cells,
            n_cells=n_cells, tolerance_s=options["tolerance_s"], threshold=options["threshold"],
        )  # fmt: skip

    overall = counts()
    metrics = pick_metrics.cell_metrics(overall, 0)
    split_codes, split_names = pd.factorize(labels[cv.SPLIT_VAR].replace("", "none"), sort=True)
    groups = {}
    for by in group_by:
        cells, cell_names = group_cells(labels, by)
        sizes = np.bincount(cells, minlength=len(cell_names))
        groups[by] = _cell_block(counts(cells, len(cell_names)), cell_names, sizes)
    halves = {}
    if len(scored) >= 2:
        names = labels[cv.TRACE_NAME].tolist()
        private = (~parts.trace_split(truth.split_salt(split), names)).astype(np.int64)
        halves = {"parts": _cell_block(counts(private, 2), list(parts.PARTS), np.bincount(private))}
    edges = pick_metrics.histogram_edges(tolerance_s)
    return {
        "name": name,
        "dataset": truth.dataset,
        "family": "picks",
        "split": split,
        "n_traces": int(len(scored)),
        "n_ignored": aligned.n_ignored,
        **options,
        **metrics,
        "scores": {f"{key}_f1": metrics[key]["f1"] for key in ("detection", *PHASES)},
        "truth_commitment": truth.commitment(split),
        "splits": _cell_block(
            counts(split_codes.astype(np.int64), len(split_names)),
            [str(value) for value in split_names],
            np.bincount(split_codes, minlength=len(split_names)),
        ),
        "groups": groups,
        **halves,
        "residual_histogram": {
            "edges_s": edges.tolist(),
            **{phase: overall.histogram[i].tolist() for i, phase in enumerate(PHASES)},
        },
    }


def score_picks(
    truth_url: LocationLike,
    submission: LocationLike | pd.DataFrame,
    *,
    name: str | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    threshold: float = DEFAULT_THRESHOLD,
    split: str = "test",
    group_by: Sequence[str] = (),
    storage_options: Mapping[str, Any] | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Score a pick table (a CSV or Parquet path/URL, or a DataFrame of the contract's columns)
    against the event-window store at `truth_url`; returns the results object. Paths and URLs
    take `storage_options`; a `StoreLocation` holds its own. `name` defaults to the file's
    stem. The table is checked before the store is read."""
    if isinstance(submission, pd.DataFrame):
        what = "submission"
        table = pick_table.validate_pick_table(submission, what, check_unique=False)
    else:
        source = StoreLocation.from_url(submission, storage_options)
        what = source.url
        table = pick_table.read_pick_submission(source, check_unique=False)
    truth_store = StoreLocation.from_url(truth_url, storage_options)
    truth = read_truth(truth_store, group_by, quiet=quiet)
    return score_pick_table(
        truth,
        table,
        name=name or Path(str(what).rstrip("/")).stem,
        what=what,
        tolerance_s=tolerance_s,
        threshold=threshold,
        split=split,
        group_by=group_by,
    )


def check_pick_submission(
    store: StoreLocation | PickTruth,
    submission: StoreLocation,
    *,
    split: str = "test",
    max_bytes: int = pick_table.MAX_SUBMISSION_BYTES,
) -> int:
    """The checks `score_picks` makes of a pick table before it reads a label, against the trace
    names and splits of the event-window store at `store` (a public bundle: no label is read;
    or its `read_truth(..., labelled=False)`, read before): InvalidInput naming the file and the
    traces otherwise. Returns the rows naming other traces of the store (ignored when scored)."""
    table = pick_table.read_pick_submission(submission, max_bytes=max_bytes, check_unique=False)
    public = store if isinstance(store, PickTruth) else read_truth(store, labelled=False)
    names = public.labels[cv.TRACE_NAME].to_numpy(dtype=object)
    return align(names, public.scored(split), table, submission.url).n_ignored


def mean_f1_objective(
    truth: PickTruth,
    split: str,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    threshold: float = DEFAULT_THRESHOLD,
) -> Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], float]:
    """For tuning a picker on `split` (never the test split): a function of candidate picks for
    every trace of that split — trace names, `detection`, P and S picks in seconds (n,) each —
    to the mean of their detection, P and S F1."""
    if split == "test":
        raise InvalidInput("split", "tuning on the test split is not allowed")
    scored = truth.scored(split)
    all_names = truth.labels[cv.TRACE_NAME].to_numpy(dtype=object)
    arrival_s = truth.labels[["p_arrival_s", "s_arrival_s"]].to_numpy(np.float64)[scored].T.copy()
    earthquake = ~np.isnan(arrival_s).all(axis=0)

    def objective(
        names: np.ndarray, detection: np.ndarray, p_time_s: np.ndarray, s_time_s: np.ndarray
    ) -> float:
        columns = (names, detection, p_time_s, s_time_s)
        frame = pd.DataFrame(dict(zip(pick_table.PICK_COLUMNS, columns, strict=True)))
        aligned = align(all_names, scored, frame, f"candidate picks on {split}")
        counts = pick_metrics.blockwise_tally(
            earthquake,
            aligned.detection,
            arrival_s,
            aligned.pick_s,
            tolerance_s=tolerance_s,
            threshold=threshold,
        )
        return pick_metrics.mean_f1(pick_metrics.cell_metrics(counts, 0))

    return objective
