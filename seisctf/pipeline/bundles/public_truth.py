"""A challenge's truth must not be regenerable: the refusal of a public-truth source, and the
stamp of a bundle an organiser cut from one on purpose (`--public-truth`, for teaching).

A store's truth is public when its provenance says so (`cv.PROVENANCE_TRUTH`: generated from an
explicit seed or from the published demo secret) or when the bundle's own secret is the published
one (then its input noise and its commitment salt can be derived by anyone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seisctf import conventions as cv
from seisctf import keys
from seisctf.errors import InvalidInput


def public_truth_reason(store_attrs: Mapping[str, Any], secret: keys.Secret) -> str | None:
    """Why anyone could regenerate a bundle cut from a store with `store_attrs` under `secret`
    (None when nobody can)."""
    recorded = store_attrs.get(cv.ATTR_PROVENANCE) or {}
    if recorded.get(cv.PROVENANCE_TRUTH) == keys.TRUTH_PUBLIC:
        return recorded.get(cv.PROVENANCE_TRUTH_REASON) or "its store is marked truth: public"
    if secret.public:
        return "the bundle's secret is the published demo secret"
    return None


def truth_stamp(
    store_attrs: Mapping[str, Any], secret: keys.Secret, *, allowed: bool, what: str
) -> dict[str, str]:
    """The manifest keys of a bundle cut from `what` (a store with `store_attrs`) under
    `secret`: none for a hidden truth; for a public one, InvalidInput unless the organiser
    `allowed` it (`--public-truth`), else `truth: public`, the reason and `cv.PUBLIC_TRUTH_NOTE`."""
    reason = public_truth_reason(store_attrs, secret)
    if reason is None:
        return {}
    if not allowed:
        raise InvalidInput(
            what,
            f"its truth is public ({reason}): anyone who repeats the public commands "
            "regenerates it, so it cannot be a challenge's withheld truth. Generate it again "
            f"without --seed, with --secret or ${keys.SECRET_ENV} (or neither: a random secret "
            "is drawn), or give --public-truth to cut a bundle for teaching, stamped "
            f"'{cv.PUBLIC_TRUTH_NOTE}'",
        )
    return {
        cv.PROVENANCE_TRUTH: keys.TRUTH_PUBLIC,
        cv.PROVENANCE_TRUTH_REASON: reason,
        "truth_note": cv.PUBLIC_TRUTH_NOTE,
    }
