"""`StoreLocation`: a URL and its storage options as one value: joins, equality, the options
this process opens it with, and credentials that stay out of pickles (Dask graphs)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path

import dask
import pytest
from distributed.protocol.pickle import dumps

from seisctf import s3
from seisctf.location import StoreLocation

KEY = "LOCATIONKEY4F1C"
SECRET = "location-secret-9d27b0"
ENDPOINT = "http://127.0.0.1:8333"


def given_options() -> dict:
    """Storage options as a caller writes them: a plain dict, credentials at two depths."""
    return {
        "endpoint_url": ENDPOINT,
        "key": KEY,
        "client_kwargs": {"aws_secret_access_key": SECRET},
    }


def credentialed(url: str = "s3://bucket/bundle.zarr") -> StoreLocation:
    return StoreLocation.from_url(url, given_options())


def carries_credentials(pickled: bytes) -> bool:
    return any(text.encode() in pickled for text in (KEY, SECRET))


@pytest.mark.parametrize(
    ("url", "child"),
    [
        ("out/bundle.zarr", "out/bundle.zarr/truth"),
        ("out/bundle.zarr/", "out/bundle.zarr/truth"),
        ("/abs/bundle.zarr", "/abs/bundle.zarr/truth"),
        ("/", "/truth"),
        ("s3://bucket/bundle.zarr", "s3://bucket/bundle.zarr/truth"),
        ("s3://bucket/bundle.zarr/", "s3://bucket/bundle.zarr/truth"),
        ("s3://bucket", "s3://bucket/truth"),
    ],
)
def test_a_joined_path_is_below_the_location_with_the_same_options(url, child):
    location = credentialed(url)
    joined = location / "truth"
    assert joined.url == child
    assert joined == StoreLocation.from_url(child, given_options())
    assert joined.storage_options.credentials == location.storage_options.credentials
    assert (location / "a" / "b").url == (location / "a/b").url == f"{url.rstrip('/')}/a/b"


def test_locations_are_equal_and_hash_alike_when_url_and_options_are():
    first, second = credentialed(), credentialed()
    assert first == second and hash(first) == hash(second) and len({first, second}) == 1
    assert StoreLocation("x.zarr") == StoreLocation("x.zarr", {}) == StoreLocation(Path("x.zarr"))
    assert StoreLocation("x.zarr").storage_options is None
    assert first != credentialed("s3://bucket/other.zarr")
    assert first != StoreLocation(first.url, {"endpoint_url": ENDPOINT, "key": KEY})
    other_secret = {
        "endpoint_url": ENDPOINT,
        "key": KEY,
        "client_kwargs": {"aws_secret_access_key": "x"},
    }
    assert first != StoreLocation(first.url, other_secret)  # the credentials count
    assert first != first.url and str(first) == first.url
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.url = "elsewhere"  # type: ignore[misc]


def test_credentials_stay_out_of_pickles_and_dask_graphs():
    """Pickled, alone or as a task's argument, a location carries its other options only; its
    copies keep the credentials; the process that made it opens its URL with them."""
    location = credentialed()
    assert location.storage_options == {"endpoint_url": ENDPOINT, "client_kwargs": {}}
    unpickled = pickle.loads(pickle.dumps(location))
    assert unpickled == StoreLocation(location.url, {"endpoint_url": ENDPOINT, "client_kwargs": {}})
    assert unpickled.options["endpoint_url"] == ENDPOINT and "key" not in unpickled.options
    task = dask.delayed(str)(location / "truth")
    graph = dict(task.__dask_graph__())
    assert not any(carries_credentials(dumps(value)) for value in graph.values())
    assert not carries_credentials(pickle.dumps([location, {"deep": location}]))
    assert KEY not in repr(location) and SECRET not in repr(location)
    assert copy.deepcopy(location) == location == copy.copy(location)
    opened = location.options
    assert opened["key"] == KEY and opened["client_kwargs"]["aws_secret_access_key"] == SECRET
    assert opened["config_kwargs"]["retries"]["max_attempts"] == s3.s3_retries()


def test_from_url_holds_a_plain_dicts_credentials_and_keeps_a_location():
    plain = {"endpoint_url": ENDPOINT, "secret": SECRET}
    location = StoreLocation.from_url("s3://bucket/x.zarr", plain)
    assert isinstance(location.storage_options, s3.CredentialedOptions)
    assert location.storage_options.credentials == {"secret": SECRET}
    assert plain == {"endpoint_url": ENDPOINT, "secret": SECRET}  # the caller's dict untouched
    assert StoreLocation.from_url(location) is location
    assert StoreLocation.from_url(Path("/data/x.zarr")).url == "/data/x.zarr"
    held = StoreLocation.from_url("s3://bucket/y.zarr", {"key": KEY})  # credentials alone
    assert held.storage_options is not None and held.options["key"] == KEY
    with pytest.raises(TypeError, match="holds its options"):
        StoreLocation.from_url(location, {"anon": True})


def test_options_are_none_for_local_paths_and_given_for_other_urls():
    options = {"endpoint_url": ENDPOINT}
    for local in ("store.zarr", "/abs/store.zarr", "file:///abs/store.zarr"):
        location = StoreLocation(local, options)
        assert not location.is_remote and location.options is None
    https = StoreLocation("https://host/store.zarr", {"headers": {"a": "b"}})
    assert https.is_remote and https.options == {"headers": {"a": "b"}}
    assert StoreLocation("memory://store.zarr").options is None
    assert StoreLocation("s3://b/x").with_url("s3://b/y") == StoreLocation("s3://b/y")


def test_the_filesystem_reaches_the_url_with_the_held_credentials(s3_server, s3_bucket):
    """A location on real S3 given the server's credentials as a plain dict: its filesystem
    writes and reads there, and a pickled copy (no credentials) names the same place."""
    location = StoreLocation.from_url(f"{s3_bucket}/probe", s3_server.storage_options) / "a.txt"
    fs, path = location.filesystem()
    fs.pipe(path, b"written through a location")
    assert path == location.url.removeprefix("s3://")
    assert s3_server.filesystem().cat(path) == b"written through a location"
    assert pickle.loads(pickle.dumps(location)).url == location.url
