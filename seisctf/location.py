"""Where a store or file lives: `StoreLocation`, a local path or fsspec URL with the storage
options it is opened with, one value passed where a URL and its options went as a pair.

A location's credentials stay in the process that made it, as `--storage-option`'s do: its
options are held apart (`s3.held_apart`), so a location pickled into a Dask graph carries the
other options only, and a task's filesystem finds credentials in its worker's own environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import fsspec

from seisctf import s3


@dataclass(frozen=True, eq=False)
class StoreLocation:
    """A local path or fsspec URL (`url`) and the fsspec storage options it opens with
    (`storage_options`, held apart: `s3.CredentialedOptions`; None when there are none).

    `location / "truth"` is the location of a path below it, with the same options. Two
    locations are equal when their URLs and options, credentials included, are; `str()` is
    the URL, as messages name it."""

    url: str
    storage_options: s3.StorageOptions | None = None  # held apart: a CredentialedOptions

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", str(self.url))
        object.__setattr__(self, "storage_options", _held(self.storage_options))

    @classmethod
    def from_url(
        cls, url: LocationLike, storage_options: Mapping[str, Any] | None = None
    ) -> StoreLocation:
        """The location of `url` (a path or fsspec URL) with `storage_options` (a plain dict's
        credentials held apart); a location given as `url` is returned as it is."""
        if isinstance(url, StoreLocation):
            if storage_options is not None:
                raise TypeError(f"{url.url}: a StoreLocation holds its options; give them once")
            return url
        return cls(os.fspath(url), _held(storage_options))

    @property
    def is_remote(self) -> bool:
        """Whether the URL is read with fsspec (any scheme but `file://`)."""
        return is_remote(self.url)

    @property
    def options(self) -> s3.StorageOptions | None:
        """The fsspec options this process opens the URL with: None for a local path (zarr
        refuses options there); the held credentials put back (`s3.with_credentials`: this
        process's own requests; never give them to a task); for S3 seisctf's retry defaults
        under the given options (`s3.with_retries`)."""
        if not self.is_remote:
            return None
        if self.url.startswith(("s3://", "s3a://")):
            return s3.with_retries(self.storage_options)
        return s3.with_credentials(self.storage_options) or None

    def filesystem(self) -> tuple[fsspec.AbstractFileSystem, str]:
        """(the fsspec filesystem this process reaches the URL with, the path on it)."""
        return fsspec.core.url_to_fs(self.url, **(self.options or {}))

    def with_url(self, url: str | os.PathLike[str]) -> StoreLocation:
        """Another URL with the same storage options."""
        return StoreLocation(os.fspath(url), self.storage_options)

    def __truediv__(self, path: str) -> StoreLocation:
        """The location of `path` below this one (joined with "/", local path or URL alike)."""
        return self.with_url("/".join([self.url.rstrip("/"), str(path).lstrip("/")]))

    def __str__(self) -> str:
        return self.url

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoreLocation):
            return NotImplemented
        mine, theirs = _held(self.storage_options), _held(other.storage_options)
        return self.url == other.url and _with_held(mine) == _with_held(theirs)

    def __hash__(self) -> int:
        return hash((self.url, _frozen(dict(self.storage_options or {}))))


# What a public entry point takes as a place: a path or fsspec URL (its storage options given
# beside it), or a location holding them (`StoreLocation.from_url`).
LocationLike: TypeAlias = str | os.PathLike[str] | StoreLocation


def is_remote(url: str) -> bool:
    """Whether `url` is read with fsspec: it has a scheme other than `file://`."""
    return "://" in str(url) and not str(url).startswith("file://")


def _held(options: Mapping[str, Any] | None) -> s3.CredentialedOptions | None:
    """`options` held apart; None for none (no options and no credentials)."""
    held = s3.held_apart(options)
    if held is None or (not held and not held.credentials):
        return None
    return held


def _with_held(options: s3.CredentialedOptions | None) -> tuple[dict, dict]:
    return (dict(options or {}), getattr(options, "credentials", None) or {})


def _frozen(value: Any) -> Any:
    """`value` with its dicts and lists as sorted tuples (hashable)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(key), _frozen(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    return value
