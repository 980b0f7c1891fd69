"""Choosing traces of an event-window store by a pandas query on its per-trace metadata.

One meaning for every verb that takes a query (`seisctf subset --query`, `seisctf export
seisbench --filter`): `pandas.DataFrame.query` on the store's per-trace table (every per-trace
coordinate and variable under its SeisBench name, text as `str`, `split` included), e.g.
`split == "train" and source_magnitude >= 2` or `station_network_code in ["CI", "AZ"]`. The
query sees the table's columns only (no variables of the caller: `@name` is refused). The
selection keeps store order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from seisctf.errors import InvalidInput
from seisctf.wording import counted


def select_traces(table: pd.DataFrame, query: str, what: str) -> np.ndarray:
    """Positions (int64, ascending: store order) of the rows of `table` (one row per trace,
    store order) that `query` selects. A query pandas cannot evaluate, one that is not a
    condition on rows, or one that selects nothing is InvalidInput naming `what` (the store)."""
    text = str(query).strip()
    if not text:
        raise InvalidInput(f"query for {what}", "is empty; expected a pandas query on the metadata")
    if "@" in text:
        raise InvalidInput(
            f"query {text!r}", "refers to a variable with @; use the metadata columns only"
        )
    positioned = table.reset_index(drop=True)
    try:
        chosen = positioned.query(text, local_dict={}, global_dict={})
    except Exception as error:  # noqa: BLE001 - pandas raises many kinds for a bad expression
        reason = f"{type(error).__name__}: {error}".splitlines()[0]
        raise InvalidInput(
            f"query {text!r}",
            f"cannot be evaluated on the metadata of {what} ({reason}); columns: "
            f"{', '.join(map(str, table.columns))}",
        ) from None
    if not isinstance(chosen, pd.DataFrame) or list(chosen.columns) != list(positioned.columns):
        raise InvalidInput(f"query {text!r}", "is not a condition on the traces")
    if chosen.empty:
        raise InvalidInput(
            f"query {text!r}", f"selects none of the {counted(len(table), 'trace')} of {what}"
        )
    return np.sort(chosen.index.to_numpy(dtype=np.int64))
