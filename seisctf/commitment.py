"""Salted SHA-256 commitments of truth arrays (commit–reveal).

Two commitments are published for every truth array (docs/contract.md, "CTF task bundle"):
- `truth_sha256[name]`: SHA-256(salt ‖ the array's values in C order as little-endian bytes of its
  stored dtype) — the contract's commitment, computed by streaming whole-row blocks in order.
- `truth_sha256_blocks[name]`: SHA-256(salt ‖ d_1 ‖ … ‖ d_B), d_i = SHA-256(salt ‖ bytes of row
  block i), blocks of `block_rows` whole rows. Each leaf is hashed where its block is read, so the
  referee verifies the truth inside its single scoring pass, in parallel.
Both are checkable by anyone once the salt is revealed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np

from seisctf import conventions as cv
from seisctf.blocks import Cover, Stored, assemble, named


def array_bytes_le(block: np.ndarray) -> bytes:
    """C-order little-endian bytes of a block in its own dtype."""
    return np.ascontiguousarray(block, dtype=block.dtype.newbyteorder("<")).tobytes()


def _salt(salt_hex: str | None) -> bytes:
    return bytes.fromhex(salt_hex or "")


def sha256_commitment(
    array: da.Array, salt_hex: str | None, rows_per_read: int | None = None
) -> str:
    """The contract's streamed commitment; memory stays at one row block whatever the size."""
    digest = hashlib.sha256(_salt(salt_hex))
    row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize)
    step = rows_per_read or max(1, cv.TARGET_CHUNK_BYTES * 4 // row_bytes)
    for start in range(0, array.shape[0], step):
        block = np.asarray(array[start : start + step].compute(scheduler="sync"))
        digest.update(array_bytes_le(block))
    return digest.hexdigest()


def block_rows(n_space: int, itemsize: int = 4) -> int:
    """Rows per commitment block: the stored time-chunk length of a wide array (about 4 MiB)."""
    return cv.time_space_chunks(2**62, n_space, itemsize)[0]


def _leaf_digest(cover: Cover, shape: tuple[int, int], dtype: Any, salt: bytes) -> bytes:
    """SHA-256(salt ‖ little-endian C-order bytes of the block): the block is assembled in
    little-endian order and hashed in place (no copy to `bytes`)."""
    digest = hashlib.sha256(salt)
    digest.update(
        assemble(shape, cover, np.dtype(dtype).newbyteorder("<")).reshape(-1).view(np.uint8).data
    )
    return digest.digest()


def block_digests(array: da.Array | Stored, salt_hex: str | None, rows: int) -> list[Any]:
    """Lazy leaf digests (Delayed 32-byte strings) of whole-row blocks of `rows` rows, each
    hashed in the task that assembles its block from the stored chunks."""
    stored = array if isinstance(array, Stored) else Stored(array)
    n_rows, n_cols = stored.shape
    digests = []
    for start in range(0, n_rows, rows):
        stop = min(start + rows, n_rows)
        cover = stored.cover((start, stop))
        shape = (stop - start, n_cols)
        digests.append(
            named(_leaf_digest, "leaf_digest", cover, shape, stored.array.dtype, _salt(salt_hex))
        )
    return digests


def block_root(digests: Sequence[bytes], salt_hex: str | None) -> str:
    """Root of the block commitment from the computed leaf digests."""
    return hashlib.sha256(_salt(salt_hex) + b"".join(bytes(d) for d in digests)).hexdigest()
