"""What a transform did, recorded in the attrs of what it returns (`ATTR_TRANSFORMS`).

Each transform appends {"transform": name, **parameters} to the list it inherited, so a store
says how it was made. Parameters must be JSON-serialisable and public: seeds and secrets are
never passed here (they stay in private outputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import xarray as xr

from seisctf import conventions as cv


def recorded(
    result: xr.DataArray, source: xr.DataArray, name: str, parameters: Mapping[str, Any]
) -> xr.DataArray:
    """`result` with `source`'s attrs plus this transform appended to its history."""
    history = [*source.attrs.get(cv.ATTR_TRANSFORMS, []), {"transform": name, **parameters}]
    return result.assign_attrs({**source.attrs, **result.attrs, cv.ATTR_TRANSFORMS: history})
