"""Pick tables (submissions and baseline outputs): a CSV or Parquet file, one row per trace.

Columns (docs/contract.md, "Pick submissions and scoring"): `trace_name` (text), `detection`
(probability in [0, 1]), `p_time_s`, `s_time_s` (seconds from the window start; empty where there
is no pick).
Other columns are ignored. Everything wrong is bad input (`InvalidInput`) naming the file and the
offending trace names (the first few and how many): missing columns, duplicate or unknown trace
names, traces of the scored split missing, probabilities outside [0, 1] or absent, non-finite or
negative times, values that are not numbers. A column whose Parquet type is neither a number nor
text is refused as a whole. Submissions are data: read with pandas' CSV parser or pyarrow, never
evaluated; files above `MAX_SUBMISSION_BYTES` (Parquet: declaring more uncompressed data) are
refused before they are read, and of a Parquet file only the contract's columns are decoded.

CSV values are read as text and converted here, so the errors can name traces: an empty field or
one of `NA_TOKENS` is "no value"; anything else must parse as a number (`inf` parses, and is then
refused as non-finite). Parquet nulls are "no value"; text columns are converted like CSV fields.
A CSV whose header is one column holding `;` or a tab (written with another delimiter, as
spreadsheets do in many locales) is refused saying so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation

TRACE_NAME = "trace_name"
DETECTION = "detection"
P_TIME = "p_time_s"
S_TIME = "s_time_s"
PICK_COLUMNS = (TRACE_NAME, DETECTION, P_TIME, S_TIME)
TIME_COLUMNS = (P_TIME, S_TIME)
NA_TOKENS = ("", "nan", "NaN", "NA")
MAX_SUBMISSION_BYTES = 4 * 2**30
SHOWN_NAMES = 5  # offending trace names an error message lists before "and N more"
CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet", ".pq")
PARSER_MESSAGE_CHARS = 300  # of a CSV or Parquet parser's message, quoted on one line
OTHER_DELIMITERS = {";": "semicolon", "\t": "tab"}  # CSV delimiters other than the comma


def describe_traces(names: np.ndarray | pd.Series | list, problem: str) -> str:
    """'3 traces with detection outside [0, 1]: 'A', 'B', 'C'' (first `SHOWN_NAMES`, then count)."""
    names = [str(name) for name in list(names)]
    shown = ", ".join(repr(name) for name in names[:SHOWN_NAMES])
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    return f"{len(names)} trace{'s' * (len(names) != 1)} {problem}: {shown}{more}"


def _open_binary(source: StoreLocation):
    """(file object, size in bytes) of a local path or fsspec URL; missing: bad input."""
    fs, path = source.filesystem()
    if not fs.isfile(path):
        raise InvalidInput(source.url, "submission file not found")
    return fs.open(path, "rb"), int(fs.size(path))


def read_table(source: StoreLocation, *, max_bytes: int = MAX_SUBMISSION_BYTES) -> pd.DataFrame:
    """The raw table of a CSV (every field as text) or Parquet file, by its suffix."""
    lowered = source.url.lower()
    if not lowered.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES):
        raise InvalidInput(source.url, "expected a pick table ending in .csv, .parquet or .pq")
    file, size = _open_binary(source)
    if size > max_bytes:
        file.close()
        raise InvalidInput(source.url, f"{size} bytes, above the limit of {max_bytes}")
    with file:
        try:
            if lowered.endswith(CSV_SUFFIXES):
                refuse_other_delimiter(pd.read_csv(file, nrows=0).columns, source.url)
                file.seek(0)
                frame = pd.read_csv(file, dtype=str, keep_default_na=False, na_filter=False)
            else:
                frame = _read_parquet(file, source.url, max_bytes)
        except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as error:
            raise unreadable(source.url, error) from None
    if not isinstance(frame.index, pd.RangeIndex):  # pandas made the extra fields an index
        raise InvalidInput(
            source.url, "rows hold more fields than the header names; expected one per column"
        )
    return frame


def refuse_other_delimiter(header: pd.Index, what: str) -> None:
    """Bad input when a CSV header is one column holding `;` or a tab: a table written with
    another delimiter (a spreadsheet's in many locales), whose columns pandas cannot see."""
    if len(header) != 1:
        return
    for delimiter, name in OTHER_DELIMITERS.items():
        if delimiter in str(header[0]):
            raise InvalidInput(
                what,
                f"its header is one column {str(header[0])[:PARSER_MESSAGE_CHARS]!r}: it looks "
                f"{name}-delimited; expected comma-separated columns {', '.join(PICK_COLUMNS)} "
                "(with `.` as the decimal point)",
            )


def unreadable(what: str, error: BaseException) -> InvalidInput:
    """The parser's message, on one line and cut short, as bad input naming the file."""
    problem = " ".join(str(error).split())[:PARSER_MESSAGE_CHARS]
    return InvalidInput(what, f"not a readable pick table ({problem})")


def _read_parquet(file, what: str, max_bytes: int) -> pd.DataFrame:
    """The contract's columns of a Parquet file (others are never decoded), refused before
    reading when its footer declares more than `max_bytes` of uncompressed data. The pandas
    metadata a writer may store is not used: it is the writer's say, and can be anything."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(file)
        metadata = parquet.metadata
        row_groups = range(metadata.num_row_groups)
        declared = sum(metadata.row_group(i).total_byte_size for i in row_groups)
        if declared > max_bytes:
            raise InvalidInput(
                what, f"declares {declared} bytes uncompressed, above the limit of {max_bytes}"
            )
        present = set(parquet.schema_arrow.names)
        table = parquet.read(columns=[name for name in PICK_COLUMNS if name in present])
        table.validate(full=True)  # text that is not UTF-8 fails here, not later in pandas
        return table.replace_schema_metadata(None).to_pandas()
    except pa.ArrowException as error:  # ArrowInvalid and ArrowIOError are ValueError, OSError
        raise unreadable(what, error) from None


def _names_column(frame: pd.DataFrame, what: str) -> np.ndarray:
    """`trace_name` as an object array of str; nulls and non-text types are bad input."""
    column = frame[TRACE_NAME]
    if not (
        pd.api.types.is_string_dtype(column.dtype) or pd.api.types.is_object_dtype(column.dtype)
    ):
        raise InvalidInput(what, f"column {TRACE_NAME!r} has type {column.dtype}, expected text")
    missing = np.flatnonzero(column.isna().to_numpy())
    if missing.size:
        rows = ", ".join(str(int(row)) for row in missing[:SHOWN_NAMES])
        raise InvalidInput(what, f"{missing.size} row(s) without a {TRACE_NAME} (rows {rows})")
    values = column.to_numpy(dtype=object)
    if not isinstance(column.dtype, pd.StringDtype):  # object columns may hold anything
        if not all(isinstance(value, str) for value in values):
            raise InvalidInput(what, f"column {TRACE_NAME!r} holds non-text values")
    return values


def _numeric_column(frame: pd.DataFrame, name: str, names: np.ndarray, what: str) -> np.ndarray:
    """A value column as float64, NaN where there is no value; text that is not a number is bad
    input naming its traces."""
    column = frame[name]
    dtype = column.dtype
    if pd.api.types.is_bool_dtype(dtype) or not (
        pd.api.types.is_numeric_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or pd.api.types.is_object_dtype(dtype)
    ):
        raise InvalidInput(what, f"column {name!r} has type {dtype}, expected numbers")
    if pd.api.types.is_numeric_dtype(dtype):
        return column.to_numpy(dtype=np.float64, na_value=np.nan)
    text = column.astype(object).where(column.notna(), "").astype(str).str.strip()
    empty = text.isin(NA_TOKENS).to_numpy()
    values = pd.to_numeric(text.where(~empty, "nan"), errors="coerce").to_numpy(dtype=np.float64)
    not_numbers = np.isnan(values) & ~empty
    if not_numbers.any():
        raise InvalidInput(what, describe_traces(names[not_numbers], f"with {name} not a number"))
    return values


def read_pick_submission(
    source: StoreLocation, *, max_bytes: int = MAX_SUBMISSION_BYTES, check_unique: bool = True
) -> pd.DataFrame:
    """The submission as a DataFrame with exactly the four contract columns (`trace_name` str;
    `detection`, `p_time_s`, `s_time_s` float64, NaN where there is no pick), row order kept,
    every check of the module doc that needs no truth done."""
    table = read_table(source, max_bytes=max_bytes)
    return validate_pick_table(table, source.url, check_unique=check_unique)


def refuse_duplicates(names: np.ndarray, what: str) -> None:
    """Bad input naming the trace names listed more than once."""
    duplicated = pd.Series(names, dtype=object).duplicated(keep="first").to_numpy()
    if duplicated.any():
        raise InvalidInput(what, describe_traces(np.unique(names[duplicated]), "listed twice"))


def validate_pick_table(
    frame: pd.DataFrame, what: str, *, check_unique: bool = True
) -> pd.DataFrame:
    """Check a raw pick table (module doc) and return it typed; see `read_pick_submission`.
    `check_unique=False` leaves the duplicate check to the caller (`scoring.picks.align` skips
    it for a table in the store's order)."""
    missing = [name for name in PICK_COLUMNS if name not in frame.columns]
    if missing:
        raise InvalidInput(
            what, f"missing column(s) {missing}; expected {list(PICK_COLUMNS)} (one row per trace)"
        )
    repeated = [name for name in PICK_COLUMNS if list(frame.columns).count(name) > 1]
    if repeated:
        raise InvalidInput(what, f"column(s) {repeated} appear more than once; expected one each")
    if len(frame) == 0:
        raise InvalidInput(what, "holds no rows")
    names = _names_column(frame, what)
    if check_unique:
        refuse_duplicates(names, what)
    detection = _numeric_column(frame, DETECTION, names, what)
    outside = ~((detection >= 0.0) & (detection <= 1.0))  # NaN is outside too
    if outside.any():
        raise InvalidInput(
            what, describe_traces(names[outside], "with detection missing or outside [0, 1]")
        )
    columns = {TRACE_NAME: names, DETECTION: detection}
    for name in TIME_COLUMNS:
        times = _numeric_column(frame, name, names, what)
        infinite = np.isinf(times)
        if infinite.any():
            raise InvalidInput(what, describe_traces(names[infinite], f"with {name} not finite"))
        negative = times < 0
        if negative.any():
            raise InvalidInput(
                what, describe_traces(names[negative], f"with {name} negative (before the window)")
            )
        columns[name] = times
    return pd.DataFrame(columns)


def write_pick_submission(
    frame: pd.DataFrame, out: StoreLocation, *, metadata: dict | None = None
) -> str:
    """Write a pick table (the four contract columns) as CSV or Parquet by `out`'s suffix, whole
    or not at all: a temporary file beside `out`, renamed (moved) into place last. `metadata`
    (JSON-able) goes into Parquet's key-value metadata under `seisctf`. Returns `out`."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = validate_pick_table(frame[list(PICK_COLUMNS)], out.url)
    lowered = out.url.lower()
    if not lowered.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES):
        raise InvalidInput(out.url, "expected an output ending in .csv, .parquet or .pq")
    fs, path = out.filesystem()
    parent = path.rpartition("/")[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)
    partial = f"{path}.partial"
    with fs.open(partial, "wb") as file:
        if lowered.endswith(CSV_SUFFIXES):
            frame.to_csv(file, index=False, float_format="%.17g", na_rep="")
        else:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if metadata is not None:
                table = table.replace_schema_metadata(
                    {**(table.schema.metadata or {}), b"seisctf": json.dumps(metadata).encode()}
                )
            pq.write_table(table, file)
    fs.mv(partial, path)
    return out.url
