"""Seeds and salts of a challenge, all derived from the organiser's secret through a slow KDF.

The secret never appears in public outputs. It is stretched once per process into a 32-byte
master key by scrypt (RFC 7914) with the public parameters `KDF_PARAMETERS`: n = 2**15, r = 8,
p = 1, a fixed salt naming this derivation (`label`), 32 MiB of memory and about 0.1 s of one
core per evaluation (docs/release.md, "Secrets"). Every random choice of a challenge (generator
parameters, noise) uses a seed `derive_seed(secret, purpose)` = HMAC-SHA256(master key,
purpose); the commitment salt and the keyed part of a build's provenance fingerprint are derived
the same way. So every value that depends on the secret, published or not, costs an offline
guesser one scrypt evaluation per guess, and HMAC makes each derived value useless for
recovering the master key or any other derived value.

Secrets a person gives (`--secret`, $SEISCTF_SECRET, a recipe's `secret:`) must have at least
`MIN_SECRET_CHARS` characters (`checked_secret`): a short one is a guessable one. The library's
`secret=` parameters (`seisctf.cli.demo.run_demo`, `seisctf.recipes.engine.build_file`,
`seisctf.pipeline.bundles.segments.build_bundle`) take any string, for tests that need a weak
secret on purpose; the published `seisctf.cli.demo.DEMO_SECRET` passes the check.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets as stdlib_secrets

from seisctf.errors import InvalidInput

SECRET_ENV = "SEISCTF_SECRET"
MIN_SECRET_CHARS = 20
GENERATE_SECRET = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'
# Public: recorded as `key_derivation` in the provenance attr of every `seisctf build` output.
# `label` is scrypt's salt argument (fixed: the same secret always gives the same seeds);
# 128 · n · r bytes = 32 MiB of memory per evaluation.
KDF_PARAMETERS = {
    "function": "scrypt",
    "n": 2**15,
    "r": 8,
    "p": 1,
    "dklen": 32,
    "label": "seisctf/master-key/v1",
}
_KDF_MAX_MEMORY_BYTES = 64 * 2**20


def checked_secret(secret: str, where: str) -> str:
    """`secret` if it has at least MIN_SECRET_CHARS characters; InvalidInput naming `where`
    (e.g. "--secret", "$SEISCTF_SECRET") otherwise."""
    if len(secret) < MIN_SECRET_CHARS:
        raise InvalidInput(
            where,
            f"a secret shorter than {MIN_SECRET_CHARS} characters ({len(secret)} given) can be "
            f"guessed offline from the public outputs; make one with: {GENERATE_SECRET}",
        )
    return secret


def secret_from_env() -> str | None:
    """$SEISCTF_SECRET, checked (None when unset or empty)."""
    value = os.environ.get(SECRET_ENV)
    return checked_secret(value, f"${SECRET_ENV}") if value else None


def resolve_secret(secret: str | None) -> tuple[str, bool]:
    """The secret to use and whether seisctf generated it (then it must be kept with the truth):
    `secret` as given, else $SEISCTF_SECRET (checked), else 256 random bits in hex."""
    given = secret or secret_from_env()
    if given:
        return given, False
    return stdlib_secrets.token_hex(32), True


@functools.lru_cache(maxsize=16)
def master_key(secret: str) -> bytes:
    """scrypt(secret) with KDF_PARAMETERS: 32 bytes, about 0.1 s, once per secret and process."""
    return hashlib.scrypt(
        secret.encode(),
        salt=KDF_PARAMETERS["label"].encode(),
        n=KDF_PARAMETERS["n"],
        r=KDF_PARAMETERS["r"],
        p=KDF_PARAMETERS["p"],
        dklen=KDF_PARAMETERS["dklen"],
        maxmem=_KDF_MAX_MEMORY_BYTES,
    )


def derive_bytes(secret: str, purpose: str, n_bytes: int = 32) -> bytes:
    """HMAC-SHA256(master_key(secret), purpose), first `n_bytes` bytes."""
    digest = hmac.new(master_key(secret), purpose.encode(), hashlib.sha256).digest()
    return digest[:n_bytes]


def derive_seed(secret: str, purpose: str) -> int:
    """A 63-bit seed for `purpose` (e.g. "synth/global", "noise/X2train")."""
    return int.from_bytes(derive_bytes(secret, purpose, 8), "little") >> 1


def derive_salt(secret: str) -> str:
    """Hex salt of the truth commitment."""
    return derive_bytes(secret, "ctf-salt", 16).hex()
