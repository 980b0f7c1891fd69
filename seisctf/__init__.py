"""seisctf: seismic benchmark datasets and a hidden-truth referee.

`seisctf.open_store(url, storage_options=None)` opens any complete store lazily with xarray,
with `time` and `distance` axes where the store's layout defines them (`seisctf.store_view`).
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:  # written once, in pyproject.toml: the installed package's metadata carries it
    __version__ = version("seisctf")
except PackageNotFoundError:  # the source tree imported without installing it
    __version__ = "0+unknown"
__all__ = ["__version__", "open_store"]


def __getattr__(name: str) -> Any:
    """`seisctf.open_store`, imported on first use, so `import seisctf.cli` (and `seisctf
    --help`) does not load xarray, zarr and Dask for it."""
    if name == "open_store":
        from seisctf.store_view import open_store

        return open_store
    raise AttributeError(f"module 'seisctf' has no attribute {name!r}")
