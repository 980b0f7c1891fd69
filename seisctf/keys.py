"""Seeds and salts of a challenge, all derived from the organiser's secret.

The secret never appears in public outputs. Every random choice of a challenge (generator
parameters, noise) uses a seed `derive_seed(secret, purpose)`; the commitment salt is derived the
same way and published only when the challenge closes. HMAC-SHA256 makes each derived value
useless for recovering the secret or any other derived value.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets as stdlib_secrets

SECRET_ENV = "SEISCTF_SECRET"


def resolve_secret(secret: str | None) -> tuple[str, bool]:
    """The secret to use and whether seisctf generated it (then it must be kept with the truth)."""
    given = secret or os.environ.get(SECRET_ENV)
    if given:
        return given, False
    return stdlib_secrets.token_hex(32), True


def derive_bytes(secret: str, purpose: str, n_bytes: int = 32) -> bytes:
    digest = hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).digest()
    return digest[:n_bytes]


def derive_seed(secret: str, purpose: str) -> int:
    """A 63-bit seed for `purpose` (e.g. "synth/global", "noise/X2train")."""
    return int.from_bytes(derive_bytes(secret, purpose, 8), "little") >> 1


def derive_salt(secret: str) -> str:
    """Hex salt of the truth commitment."""
    return derive_bytes(secret, "ctf-salt", 16).hex()
