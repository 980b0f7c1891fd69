"""Signed score receipts: what a team can show anyone, checked offline with the competition's
public key (`seisctf referee verify RECEIPT`).

A receipt is JSON `{"payload": {...}, "signature": hex, "public_key": PEM}`. The payload holds
the competition, team, dataset, the submission's SHA-256, the truth's commitment, the seisctf
version, the released scores and when they were scored; the signature is Ed25519 over the
payload's canonical JSON (keys sorted, no spaces, UTF-8)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from seisctf.errors import InvalidInput

PAYLOAD_KEYS = (
    "competition",
    "team",
    "dataset",
    "submission_id",
    "submission_sha256",
    "truth_commitment",
    "seisctf_version",
    "released",
    "scored_at",
)


def canonical(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInput(str(path), "not an Ed25519 private key")
    return key


def _public_key(pem: bytes, what: str) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as error:
        raise InvalidInput(what, f"not a PEM public key ({error})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidInput(what, "not an Ed25519 public key")
    return key


def public_pem(key: Ed25519PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def sign(payload: Mapping[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """The receipt of `payload` (module doc)."""
    missing = sorted(set(PAYLOAD_KEYS) - payload.keys())
    if missing:
        raise ValueError(f"a receipt's payload lacks {missing}")
    return {
        "payload": dict(payload),
        "signature": key.sign(canonical(payload)).hex(),
        "public_key": public_pem(key),
    }


def verify(receipt: Mapping[str, Any], trusted_pem: bytes | None = None) -> dict[str, Any]:
    """The payload of a receipt whose signature holds, by the key `trusted_pem` (the
    competition's published key) or else the receipt's own; InvalidInput otherwise. With no
    trusted key the check proves only that the receipt is unaltered since signed by its key."""
    try:
        payload, signature = receipt["payload"], bytes.fromhex(receipt["signature"])
        embedded = str(receipt["public_key"]).encode()
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidInput(
            "receipt", f"not a seisctf receipt ({error!r} missing or malformed)"
        ) from None
    key = _public_key(trusted_pem or embedded, "public key")
    if trusted_pem is not None and _public_key(embedded, "receipt's key").public_bytes_raw() != (
        key.public_bytes_raw()
    ):
        raise InvalidInput("receipt", "signed by another key than the one given")
    try:
        key.verify(signature, canonical(payload))
    except InvalidSignature:
        raise InvalidInput(
            "receipt", "signature does not match its payload: altered, or not signed by this key"
        ) from None
    return dict(payload)
