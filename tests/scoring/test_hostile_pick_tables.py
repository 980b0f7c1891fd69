"""Hostile pick tables through `seisctf score picks`: what a stranger's CSV or Parquet file holds
is scored or refused with exit 3 on one line naming the file, never a traceback. Parquet
columns outside the contract and the writer's pandas metadata are never used; random damage to
a valid file (hypothesis) gives a table or `InvalidInput`, nothing else."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from event_window_fixtures import write_picking_windows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf import cli
from seisctf import conventions as cv
from seisctf.catalogs import pick_table
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    """(event-window store URL, a valid pick table of every trace: P picks at the arrival)."""
    url = str(tmp_path_factory.mktemp("picks") / "windows.zarr")
    dataset = write_picking_windows(url)
    rate = float(dataset.attrs[cv.ATTR_SAMPLING_RATE])
    table = pd.DataFrame(
        {
            "trace_name": [str(name) for name in dataset[cv.TRACE_NAME].values],
            "detection": 0.8,
            "p_time_s": dataset[cv.P_ARRIVAL_SAMPLE].values / rate,
            "s_time_s": np.nan,
        }
    )
    return url, table


def _parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _score_picks(store: str, path, tmp_path, scheduler: str, capsys) -> tuple[int, list, dict]:
    """(exit code, stderr lines, JSON written or None) of `seisctf score picks --split all`."""
    out = tmp_path / "result.json"
    argv = ["score", "picks", "--truth", store, "--submission", str(path), "--split", "all",
            "--json", str(out), "--quiet", "--scheduler", scheduler]  # fmt: skip
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.err.splitlines(), json.loads(out.read_text()) if out.exists() else None


def _duplicate_column(table: pd.DataFrame) -> bytes:
    clean = pa.Table.from_pandas(table, preserve_index=False)
    return _parquet(clean.append_column("detection", clean.column("detection")))


def _invalid_utf8(table: pd.DataFrame) -> bytes:
    names = [name.encode() for name in table["trace_name"]]
    names[3] = b"PK.\xff\xfe"
    clean = pa.Table.from_pandas(table, preserve_index=False)
    return _parquet(
        clean.set_column(0, "trace_name", pa.array(names, pa.binary()).view(pa.string()))
    )


def _ragged_csv(table: pd.DataFrame) -> bytes:
    """The first row holds two fields more than the header: pandas made them an index."""
    lines = table.to_csv(index=False).splitlines()
    lines[1] += ",9,9"
    return "\n".join(lines).encode()


def _unparsable_csv(table: pd.DataFrame) -> bytes:
    """A later row holds more fields than the first: the parser's message ends in a newline."""
    lines = table.to_csv(index=False).splitlines()
    lines[3] += ",9,9"
    return "\n".join(lines).encode()


REFUSED = {
    "duplicate-column.parquet": (
        _duplicate_column,
        "column(s) ['detection'] appear more than once",
    ),
    "invalid-utf8.parquet": (_invalid_utf8, "not a readable pick table (Column 0"),
    "ragged.csv": (_ragged_csv, "rows hold more fields than the header names"),
    "unparsable.csv": (_unparsable_csv, "(Error tokenizing data. C error: Expected 4 fields"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_hostile_tables_exit_3_on_one_line(case, windows, tmp_path, capsys, dask_cluster):
    store, table = windows
    writer, fragment = REFUSED[case]
    path = tmp_path / case
    path.write_bytes(writer(table))
    code, err, written = _score_picks(store, path, tmp_path, dask_cluster.address, capsys)
    assert (code, written) == (3, None)
    assert len(err) == 1 and err[0].startswith(f"seisctf: invalid input: {path}: "), err
    assert fragment in err[0], err


def test_foreign_columns_and_pandas_metadata_are_never_used(
    windows, tmp_path, capsys, dask_cluster
):
    """Extra columns of list, struct and map types, and pandas metadata naming a dtype that does
    not exist: the same scores as the plain table."""
    store, table = windows
    n = len(table)
    clean = pa.Table.from_pandas(table, preserve_index=False).replace_schema_metadata(None)
    odd = clean.append_column("lists", pa.array([[1.0, 2.0]] * n))
    odd = odd.append_column("structs", pa.array([{"a": 1}] * n))
    odd = odd.append_column(
        "maps", pa.array([[("k", 1.0)]] * n, pa.map_(pa.string(), pa.float64()))
    )
    damaged = {"index_columns": [], "columns": [{"name": "detection", "field_name": "detection",
               "numpy_type": "Kloat64", "pandas_type": "float64", "metadata": None}]}  # fmt: skip
    odd = odd.replace_schema_metadata({b"pandas": json.dumps(damaged).encode()})
    with pytest.raises(TypeError, match="Kloat64"):  # what pandas makes of that metadata
        odd.to_pandas()
    results = {}
    for name, parquet in {"plain": clean, "odd": odd}.items():
        (tmp_path / name).mkdir()
        path = tmp_path / name / f"{name}.parquet"
        path.write_bytes(_parquet(parquet))
        code, err, results[name] = _score_picks(
            store, path, tmp_path / name, dask_cluster.address, capsys
        )
        assert code == 0, err
    assert results["odd"]["p"] == results["plain"]["p"]
    assert results["odd"]["detection"] == results["plain"]["detection"]
    assert results["plain"]["p"]["recall"] == 1.0  # every P pick at its arrival


def test_a_parquet_footer_declaring_too_much_data_is_refused_before_reading(windows, tmp_path):
    """Constant columns encode to a few bytes a row: the footer declares what they decode to."""
    _, table = windows
    many = pd.concat([table] * 2000, ignore_index=True)
    path = tmp_path / "many.parquet"
    path.write_bytes(_parquet(pa.Table.from_pandas(many, preserve_index=False)))
    declared = sum(
        pq.ParquetFile(path).metadata.row_group(i).total_byte_size
        for i in range(pq.ParquetFile(path).metadata.num_row_groups)
    )
    assert declared > 4 * path.stat().st_size
    limit = declared - 1
    with pytest.raises(
        InvalidInput, match=f"declares {declared} bytes uncompressed, above the limit of {limit}"
    ):
        pick_table.read_pick_submission(StoreLocation(path), max_bytes=limit)
    assert len(
        pick_table.read_pick_submission(StoreLocation(path), max_bytes=declared, check_unique=False)
    ) == len(many)


def _damaged(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """`data` with each (position, bytes removed, bytes inserted) applied in turn."""
    damaged = bytearray(data)
    for position, removed, inserted in edits:
        at = position % (len(damaged) + 1)
        damaged[at : at + removed] = inserted
    return bytes(damaged)


EDITS = st.lists(
    st.tuples(st.integers(0, 2**20), st.integers(0, 16), st.binary(max_size=8)),
    min_size=1,
    max_size=6,
)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_damaged_tables_are_read_or_refused(suffix, windows, tmp_path):
    _, table = windows
    valid = (
        table.to_csv(index=False).encode()
        if suffix == ".csv"
        else _parquet(pa.Table.from_pandas(table, preserve_index=False))
    )
    path = tmp_path / f"damaged{suffix}"

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(EDITS)
    def read_or_refuse(edits):
        path.write_bytes(_damaged(valid, edits))
        try:
            frame = pick_table.read_pick_submission(StoreLocation(path))
        except InvalidInput as error:
            assert error.what == str(path) and "\n" not in error.problem
        else:
            assert list(frame.columns) == list(pick_table.PICK_COLUMNS)

    read_or_refuse()
