"""Provenance of a recipe's outputs: what each depends on (secret and seeds withheld), package
versions, a hash of the inputs, and a fingerprint of all of that. An output whose complete store
already carries the same fingerprint is up to date and is not rewritten."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

import fsspec

from seisctf import conventions as cv
from seisctf import keys, storage
from seisctf.errors import InvalidInput
from seisctf.formats.shared.input_manifest import recorded_inputs
from seisctf.plugins.context import BuildContext
from seisctf.plugins.schema import RecipeText
from seisctf.registry import SYNTHS

WITHHELD = "[withheld]"


def _withhold(value: Any) -> Any:
    """A copy with every `secret` and `seed` value replaced by WITHHELD."""
    if isinstance(value, dict):
        return {
            key: WITHHELD if key in ("secret", "seed") else _withhold(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_withhold(item) for item in value]
    return value


def _seeds(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [item if key == "seed" else _seeds(item) for key, item in value.items()]
    if isinstance(value, list):
        return [_seeds(item) for item in value]
    return []


def versions() -> dict[str, str]:
    """Versions of the packages a build's bytes depend on."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("seisctf", "numpy", "scipy", "dask", "xarray", "zarr", "numcodecs"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def input_hash(context: BuildContext, source: Mapping[str, Any]) -> str:
    """sha256 of what the source reads: for an ingest source (it wrote `context.source_url`)
    the ingest's own record of its inputs; for a `store` source its metadata documents and its
    chunk listing (names and sizes); for generators, their parameters (part of the recipe
    already)."""
    ((name, values),) = source.items()
    digest = hashlib.sha256(name.encode())
    if name != "store" and context.source_url:
        # The ingest's own record of its inputs: path, size and sha256 of every file.
        written = context.location(context.source_url)
        attrs = storage.read_attrs(written)
        recorded = {
            "inputs": recorded_inputs(written),
            "ingest_fingerprint": attrs.get("ingest_fingerprint"),
        }
        digest.update(json.dumps(recorded, sort_keys=True).encode())
    elif name == "store":
        store = context.location(context.resolve(values["url"]))
        mapper = fsspec.get_mapper(store.url, **(store.options or {}))
        listing = sorted(mapper.fs.find(mapper.root, detail=True).items())
        for path, info in listing:
            relative = path[len(mapper.root) :]
            digest.update(f"{relative}\0{info.get('size')}\0".encode())
            if relative.endswith("zarr.json"):
                digest.update(mapper.fs.cat_file(path))
    return digest.hexdigest()


def provenance(
    recipe: RecipeText,
    context: BuildContext,
    parts: tuple[str, ...],
    output: str,
    resolved: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance attr of one output: the recipe parts it depends on (secret and seeds
    withheld), versions, input hash, the public parameters of the secret's KDF
    (`keys.KDF_PARAMETERS`) and a fingerprint of them all. Seeds and secret enter the
    fingerprint only through `_keyed_seeds`, so testing a guess of either costs a scrypt."""
    data = recipe.data
    depends = {key: data[key] for key in ("name", *parts) if key in data}
    depends["output"] = {output: data["outputs"][output]}
    record = {
        "recipe": _withhold(depends),
        "versions": versions(),
        "input_sha256": input_hash(context, data["source"]),
        "key_derivation": dict(keys.KDF_PARAMETERS),
        **source_truth(data["source"], context),
        **({"resolved": dict(resolved)} if resolved else {}),
    }
    secret = context.secret.value if context.secret else None
    keyed = _keyed_seeds(secret, json.dumps(_seeds(depends), sort_keys=True))
    canonical = json.dumps({**record, "seeds": keyed}, sort_keys=True).encode()
    return {**record, "fingerprint": hashlib.sha256(canonical).hexdigest()}


def source_truth(source: Mapping[str, Any], context: BuildContext) -> dict[str, str]:
    """The provenance keys saying whether anyone can regenerate what `source` makes
    (`cv.PROVENANCE_TRUTH`, and `cv.PROVENANCE_TRUTH_REASON` when public): a generator's output
    is public when its seed is explicit or derives from the published demo secret; a `store`
    source passes on what its store records; an archive's ingest says nothing (the data are as
    hidden as the archive)."""
    ((name, values),) = source.items()
    if name in SYNTHS:
        truth, reason = keys.generator_truth("seed" in (values or {}), context.secret)
        return truth_keys(truth, reason)
    if name == "store":
        try:
            attrs = storage.read_attrs(context.location(context.resolve(values["url"])))
        except InvalidInput:
            return {}
        recorded = attrs.get(cv.ATTR_PROVENANCE) or {}
        return truth_keys(
            recorded.get(cv.PROVENANCE_TRUTH), recorded.get(cv.PROVENANCE_TRUTH_REASON)
        )
    return {}


def truth_keys(truth: str | None, reason: str | None) -> dict[str, str]:
    """{PROVENANCE_TRUTH: truth, PROVENANCE_TRUTH_REASON: reason}, without the missing ones."""
    keyed = {cv.PROVENANCE_TRUTH: truth, cv.PROVENANCE_TRUTH_REASON: reason}
    return {key: value for key, value in keyed.items() if value}


def _keyed_seeds(secret: str | None, seeds_json: str) -> str:
    """Hex HMAC-SHA256 of a recipe's seed values keyed by the secret's derived
    "provenance/seeds" key; without a secret, the seed values themselves go through the KDF
    (explicit seeds are withheld too, and a small integer is easy to guess)."""
    if secret:
        key = keys.derive_bytes(secret, keys.Purpose.PROVENANCE_SEEDS)
        return hmac.new(key, seeds_json.encode(), hashlib.sha256).hexdigest()
    return keys.derive_bytes(seeds_json, keys.Purpose.PROVENANCE_SEEDS).hex()


def up_to_date(url: str, fingerprint: str, context: BuildContext) -> bool:
    """Whether the complete store at `url` carries this provenance fingerprint."""
    try:
        attrs = storage.read_attrs(context.location(url))
    except InvalidInput:
        return False
    return (attrs.get(cv.ATTR_PROVENANCE) or {}).get("fingerprint") == fingerprint
