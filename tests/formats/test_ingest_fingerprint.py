"""The ingest fingerprint hashes the sorted hex sha256 of every input a piece at a time
(`resumable.SortedDigests`): the same hash as the canonical JSON of the plain list."""

from __future__ import annotations

import hashlib
import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seisctf.formats.shared import resumable


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n_files=st.integers(0, 3 * resumable.DIGESTS_PER_PIECE // 1000),
    seed=st.integers(0, 2**32 - 1),
    piece=st.sampled_from([1, 3, 1000]),
)
def test_sorted_digests_hash_as_the_json_of_their_sorted_hex(n_files, seed, piece, monkeypatch):
    rng = np.random.default_rng(seed)
    digests = rng.integers(0, 256, (n_files, 32), dtype=np.uint8)
    if n_files >= 2:  # two digests differing only in a trailing zero byte sort as bytes do
        digests[1] = digests[0]
        digests[0, -1], digests[1, -1] = 1, 0
    monkeypatch.setattr(resumable, "DIGESTS_PER_PIECE", piece)
    parts = {"rate": None, "block_samples": 7, "version": "0", "resampling": {"a": [1, 2]}}
    plain = {**parts, "inputs": sorted(row.tobytes().hex() for row in digests)}
    expected = hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()
    streamed = {**parts, "inputs": resumable.SortedDigests(digests)}
    assert resumable.fingerprint_of(streamed) == expected
