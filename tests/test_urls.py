"""`seisctf.urls.checked`: each misspelling of a URL a user was seen to type is refused with the
spelling meant; well-formed URLs and ordinary local paths pass unchanged."""

from __future__ import annotations

import pytest

from seisctf.errors import InvalidInput
from seisctf.urls import checked

# (as typed, what the message says is wrong, the spelling it offers or None)
MISSPELT = [
    ("s3://demo//typo.zarr", "empty path segment", "s3://demo/typo.zarr"),
    ("s3://demo/a//b/", "empty path segment", "s3://demo/a/b"),
    ("s3:///demo/x.zarr", "no bucket or host", "s3://demo/x.zarr"),
    ("s3://", "no bucket or host", None),
    ("s3://demo/./x.zarr", "'.' or '..'", "s3://demo/x.zarr"),
    ("s3://demo/../x.zarr", "'.' or '..'", None),
    ("s3:/demo/x.zarr", "missing a slash", "s3://demo/x.zarr"),
    ("s3:demo/x.zarr", "missing a slash", "s3://demo/x.zarr"),
    ("Https:/host/x", "missing a slash", "https://host/x"),
    ("s3//demo/x.zarr", "missing its ':'", "s3://demo/x.zarr"),
    ("S3//demo/x.zarr", "missing its ':'", "s3://demo/x.zarr"),
    ("S3://demo/x.zarr", "lower case", "s3://demo/x.zarr"),
    ("GS://b/x.zarr", "lower case", "gs://b/x.zarr"),
    ("s4://demo/x.zarr", "unknown URL scheme 's4'", "s3://demo/x.zarr"),
    ("htps://host/x", "unknown URL scheme 'htps'", "https://host/x"),
    ("zipp::s3://demo/x.zip", "unknown URL scheme 'zipp'", "zip::s3://demo/x.zip"),
    ("s3://s3://demo/x.zarr", "scheme is given twice", "s3://demo/x.zarr"),
    ("s3://demo/x.zarr ", "white space", "s3://demo/x.zarr"),
    ("s3://demo/x.zarr\n", "white space", "s3://demo/x.zarr"),
    ("s3://demo/x\t.zarr", "control character", None),
    ("s3 ://demo/x.zarr", "not a URL scheme", None),
]

WELL_FORMED = [
    "s3://demo/x.zarr",
    "s3://demo/x.zarr/",
    "s3://demo",
    "s3a://demo/raw/**/*.mseed",
    "gs://bucket/key",
    "http://127.0.0.1:8333/b/x?from=http://elsewhere//a",
    "simplecache::s3://demo/x.zarr",
    "file:///tmp//x.zarr",
    "memory://x//y",
    "store.zarr",
    "/tmp/a//b.zarr",
    "./s3:x.zarr",
    "./s3//demo",
    "data//x.mseed",  # a folder named as fsspec's data: scheme, not an object store
    "2026-01-01T00:00:00.mseed",
    "C:/x",  # one letter: a drive, not a scheme
]


@pytest.mark.parametrize(("typed", "problem", "meant"), MISSPELT)
def test_a_misspelt_url_is_refused_with_the_spelling_meant(typed, problem, meant):
    with pytest.raises(InvalidInput) as refused:
        checked(typed, f"--out {typed}")
    assert refused.value.what == f"--out {typed}"
    assert problem in refused.value.problem
    if meant is None:
        assert "did you mean" not in refused.value.problem
    else:
        assert f"did you mean {meant}?" in refused.value.problem or refused.value.problem.endswith(
            f": {meant}"
        )
        assert checked(meant) == meant  # the spelling offered passes


@pytest.mark.parametrize("location", WELL_FORMED)
def test_well_formed_locations_pass_unchanged(location):
    assert checked(location) == location
