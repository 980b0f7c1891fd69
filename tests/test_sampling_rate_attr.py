"""The `sampling_rate` attr has one reader, `conventions.sampling_rate_hz`: every store, array
and record reads its rate through it, so a bad rate is the same clear error wherever it is read
(the transforms, the bundles, the pick scorer) instead of a KeyError or a rate of zero."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
import xarray as xr

from seisctf import conventions as cv
from seisctf.errors import InvalidInput
from seisctf.pipeline.transforms.das_channels import convert_quantity
from seisctf.pipeline.transforms.filters import butterworth
from seisctf.pipeline.transforms.noise import sampling_rate_of

PACKAGE = pathlib.Path(cv.__file__).parent


@pytest.mark.parametrize("rate", [100, 100.0, np.float32(20.0), np.int64(5), 0.5])
def test_a_positive_number_of_any_kind_is_read_as_float_hz(rate):
    read = cv.sampling_rate_hz({cv.ATTR_SAMPLING_RATE: rate}, "store.zarr")
    assert isinstance(read, float) and read == float(rate)


@pytest.mark.parametrize("rate", [None, 0, -1.0, math.nan, math.inf, True, "100", [100.0]])
def test_anything_else_is_refused_naming_the_store(rate):
    attrs = {} if rate is None else {cv.ATTR_SAMPLING_RATE: rate}
    with pytest.raises(InvalidInput, match="store.zarr attr 'sampling_rate': expected a positive"):
        cv.sampling_rate_hz(attrs, "store.zarr")


def data_at(rate) -> xr.DataArray:
    data = xr.DataArray(np.zeros((4, 64)), dims=(cv.SENSOR, cv.TIME))
    return data.assign_attrs({cv.ATTR_SAMPLING_RATE: rate, "quantity": "strain_rate"})


@pytest.mark.parametrize("rate", [0, "fast", True])
def test_the_transforms_refuse_a_bad_rate_alike(rate):
    """Before, each transform read the attr its own way: `convert_quantity` took a missing or
    zero rate as 0 and `sampling_rate_of` accepted the string "100"."""
    for read in (
        lambda data: butterworth(data, freqmax=1.0),
        lambda data: convert_quantity(data, to="strain"),
        sampling_rate_of,
    ):
        with pytest.raises(InvalidInput, match="attr 'sampling_rate': expected a positive number"):
            read(data_at(rate))


def test_no_module_reads_the_attr_by_hand():
    """`attrs[cv.ATTR_SAMPLING_RATE]` read and converted outside the one reader."""
    by_hand = re.compile(r"float\([\w.]*attrs(\[|\.get\()cv\.ATTR_SAMPLING_RATE")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if by_hand.search(line)
    ]
    assert found == []
