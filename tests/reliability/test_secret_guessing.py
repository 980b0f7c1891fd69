"""Secret guessing: a demo built with a dictionary word as its secret publishes nothing against
which a guess can be checked cheaply, and a person cannot give such a secret.

The global and DAS demos (small sizes, the shared cluster) are built through the library, which
takes any secret, with one word of a 10,000-word list as the secret. An attacker holding the
list computes, for every word, each value the old derivations made cheaply from a guess:
HMAC-SHA256(word, purpose) for every purpose the package derives (found in its source), the
seeds (decimal, hex) and the commitment salt taken from them, plain hashes of the word, the
provenance fingerprint recomputed from the public record with the old keyed part; and looks for
each (hex, decimal, base64) in every public text: each `zarr.json` (attrs, manifest) of the
public bundle and every JSON and HTML file of the demo outside `private/`. Nothing may match.
Controls: the same search finds the values the package does publish when they are recomputed
from the real secret through the published scrypt parameters (commitments, fingerprint), finds
the secret among the 10,000 words once old-derivation values are planted, and one scrypt
evaluation costs at least `MIN_KDF_SECONDS`, which bounds a guesser's rate per core."""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import itertools
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import TINY_LAYOUT_YAML

import seisctf
from seisctf import conventions as cv
from seisctf import keys
from seisctf.errors import InvalidInput

WORD_COUNT = 10_000
SECRET_INDEX = 7919
SMALL = {"global": {"n_sensors": 64, "duration_s": 300.0}, "das": {"n_sensors": 64}}
MIN_KDF_SECONDS = 0.02
# A value is looked up by the first 8 bytes of the digest it comes from (64 bits: with about
# 1e5 written values and 2e6 candidates, a chance match has probability below 1e-7).
PREFIX_BYTES = 8
SHORTEST_SEED = {"hex": 12, "decimal": 13}
INDEX_PLACEHOLDER = re.compile(r"(^|_)(index|i|j|k)$")
N_INDICES = 8
DERIVERS = {"derive_seed", "derive_bytes"}


def word_list() -> list[str]:
    """Distinct lower-case words of 4 or more letters in the standard library's own modules
    (tests, IDLE, lib2to3 and site-packages left out), sorted, the first WORD_COUNT."""
    library = Path(os.__file__).parent
    words: set[str] = set()
    for path in sorted(library.rglob("*.py")):
        parts = path.relative_to(library).parts
        if parts[0] in ("site-packages", "idlelib", "lib2to3") or any(
            "test" in part for part in parts[:-1]
        ):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        words.update(re.findall(r"\b[a-z]{4,}\b", text))
    return sorted(words)[:WORD_COUNT]


# --- what the attacker searches -----------------------------------------------------------------


def public_texts(workdir: Path, dataset: str) -> dict[str, str]:
    """Every `zarr.json` of the public bundle, every JSON and HTML file outside `private/`."""
    bundle = workdir / "public" / f"bundle-{dataset}.zarr"
    files = set(bundle.rglob("zarr.json"))
    files |= {p for p in workdir.rglob("*") if p.suffix in (".json", ".html")}
    files = {p for p in files if "private" not in p.relative_to(workdir).parts}
    return {str(p.relative_to(workdir)): p.read_text() for p in sorted(files)}


def _seed_prefixes(seed: int) -> list[bytes]:
    """The two 8-byte digest prefixes whose 63-bit seed (little-endian, shifted right by one)
    is `seed`."""
    return [((seed << 1) | low).to_bytes(PREFIX_BYTES, "little") for low in (0, 1)]


class Index:
    """The first PREFIX_BYTES bytes of every digest written somewhere in some texts, with how it
    was written: as hex (at any offset of a hex run: a longer or shorter value, e.g. a 16-byte
    salt, shares the prefix), as base64 or URL-safe base64, or as the 63-bit seed taken from
    it, in decimal or hex (every substring of SHORTEST_SEED digits or more: a random seed has
    fewer with probability below 1e-5). A digest is then checked with one lookup."""

    def __init__(self, texts: list[str]) -> None:
        text = "\n".join(texts)
        self.prefixes: dict[bytes, str] = {}
        for run in re.findall(r"[0-9a-f]+", text.lower()):
            for start in range(len(run)):
                rest = run[start:]
                if len(rest) >= 2 * PREFIX_BYTES:
                    self.prefixes.setdefault(bytes.fromhex(rest[: 2 * PREFIX_BYTES]), "hex")
                for length in range(SHORTEST_SEED["hex"], min(16, len(rest)) + 1):
                    self._add_seed(int(rest[:length], 16), "seed hex")
        for run in re.findall(r"[0-9]+", text):
            for start in range(len(run)):
                rest = run[start:]
                for length in range(SHORTEST_SEED["decimal"], min(19, len(rest)) + 1):
                    self._add_seed(int(rest[:length]), "seed")
        for run in re.findall(r"[A-Za-z0-9+/_-]+", text):
            standard = run.replace("-", "+").replace("_", "/")
            for start in range(len(standard) - 11):
                decoded = base64.b64decode(standard[start : start + 12])
                self.prefixes.setdefault(decoded[:PREFIX_BYTES], "base64")

    def _add_seed(self, seed: int, how: str) -> None:
        if seed < 2**63:
            for prefix in _seed_prefixes(seed):
                self.prefixes.setdefault(prefix, how)

    def finds(self, digest: bytes) -> str | None:
        """How `digest` is written in the texts, or None."""
        return self.prefixes.get(digest[:PREFIX_BYTES])


# --- what the attacker computes per guess ---------------------------------------------------------


def _call_name(function: ast.expr) -> str:
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def purpose_templates() -> set[tuple[str, ...]]:
    """Every purpose the package derives a value for: the `keys.Purpose` constants, the f-strings
    the `keys.*_purpose` functions return, and the purpose argument of any derive_seed or
    derive_bytes call given as a literal or an f-string (an f-string as its parts, a
    placeholder as "{expression}")."""
    templates: set[tuple[str, ...]] = {(purpose.value,) for purpose in keys.Purpose}
    for path in sorted(Path(seisctf.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_purpose"):
                returned = [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
                templates.update(_template(value) for value in returned if _template(value))
            elif isinstance(node, ast.Call) and _call_name(node.func) in DERIVERS:
                given = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "purpose")]
                templates.update(_template(value) for value in given if _template(value))
    return templates


def _template(argument: ast.expr | None) -> tuple[str, ...] | None:
    """A literal string as (value,), an f-string as its parts, anything else None."""
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return (argument.value,)
    if isinstance(argument, ast.JoinedStr):
        return tuple(
            part.value if isinstance(part, ast.Constant) else "{" + ast.unparse(part.value) + "}"
            for part in argument.values
        )
    return None


def expand(templates: set[tuple[str, ...]], names: set[str]) -> list[str]:
    """Every purpose the templates make: an index-like placeholder takes 0..N_INDICES-1; one
    after "transforms/" each transform name (the recipe's step names); any other one each of
    `names` (array, transform, source and dataset names)."""
    from seisctf.build.engine import TRANSFORMS

    purposes: set[str] = set()
    for template in templates:
        choices = []
        for part in template:
            if not part.startswith("{"):
                choices.append([part])
            elif INDEX_PLACEHOLDER.search(part[1:-1]):
                choices.append([str(i) for i in range(N_INDICES)])
            elif template[0].startswith("transforms/"):
                choices.append(sorted(TRANSFORMS))
            else:
                choices.append(sorted(names))
        purposes.update("".join(parts) for parts in itertools.product(*choices))
    return sorted(purposes)


def _seed_values(value):
    """The old fingerprint's seed skeleton (recipe.provenance before the KDF)."""
    if isinstance(value, dict):
        return [item if key == "seed" else _seed_values(item) for key, item in value.items()]
    if isinstance(value, list):
        return [_seed_values(item) for item in value]
    return []


class Fingerprint:
    """The provenance fingerprint of a published record, recomputed for any keyed part:
    SHA-256 of the record (less its fingerprint) with "seeds" = the keyed hex, keys sorted."""

    def __init__(self, record: dict) -> None:
        public = {key: value for key, value in record.items() if key != "fingerprint"}
        self.published = record["fingerprint"]
        self.seeds_json = json.dumps(_seed_values(public["recipe"]), sort_keys=True).encode()
        marker = "0" * 64
        self.head, self.tail = (
            json.dumps({**public, "seeds": marker}, sort_keys=True).encode().split(marker.encode())
        )

    def with_keyed(self, keyed_hex: str) -> bytes:
        return hashlib.sha256(self.head + keyed_hex.encode() + self.tail).digest()


HASHES = ("sha256", "sha1", "md5", "sha512", "blake2b", "sha3_256")


def cheap_values(word: str, purposes: list[str], fingerprints: list[Fingerprint]):
    """(label, digest) of every value the old derivations made cheaply from `word`:
    HMAC-SHA256(word, purpose), plain hashes of the word, the old keyed seeds and fingerprint."""
    secret = word.encode()
    for purpose in purposes:
        yield purpose, hmac.digest(secret, purpose.encode(), "sha256")
    for algorithm in HASHES:
        yield algorithm, hashlib.new(algorithm, secret).digest()
    for fingerprint in fingerprints:
        keyed = hmac.digest(secret, fingerprint.seeds_json, "sha256")
        yield "old keyed seeds", keyed
        yield "old fingerprint", fingerprint.with_keyed(keyed.hex())


def brute_force(words, purposes, fingerprints, indexes) -> list[list[tuple[str, str, str]]]:
    """Per index: every (word, value label, encoding) found."""
    found: list[list[tuple[str, str, str]]] = [[] for _ in indexes]
    for word in words:
        for label, digest in cheap_values(word, purposes, fingerprints):
            for hits, index in zip(found, indexes, strict=True):
                how = index.finds(digest)
                if how:
                    hits.append((word, label, how))
    return found


# --- the demos ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def words() -> list[str]:
    return word_list()


@pytest.fixture(scope="module")
def demos(tmp_path_factory, dask_cluster, words) -> dict[str, Path]:
    """The workdir of each demo, built with the word at SECRET_INDEX as the secret."""
    from seisctf.cli.demo import run_demo
    from seisctf.cluster import dask_client

    root = tmp_path_factory.mktemp("secret-guessing")
    layout = root / "tiny.yaml"
    layout.write_text(TINY_LAYOUT_YAML)
    with dask_client(dask_cluster.address, quiet=True):
        for name, sizes in SMALL.items():
            secret = words[SECRET_INDEX]
            run_demo(
                root / name, dataset=name, secret=secret, layout=str(layout), **sizes, quiet=True
            )
    return {name: root / name for name in SMALL}


@pytest.fixture(scope="module")
def published(demos) -> dict:
    """What the attacker has (texts, provenance records, names) and the organiser's truth."""
    texts, records, names = [], [], set()
    commitments, truths = {}, {}
    for name, workdir in demos.items():
        texts += public_texts(workdir, name).values()
        public = zarr.open_group(str(workdir / "public" / f"bundle-{name}.zarr"), mode="r")
        truth = zarr.open_group(str(workdir / "private" / f"truth-{name}.zarr"), mode="r")
        records.append(dict(public.attrs)[cv.ATTR_PROVENANCE])
        names |= set(public.array_keys()) | set(truth.array_keys())
        commitments[name] = dict(public.attrs)[cv.ATTR_CTF]["truth_sha256"]
        truths[name] = (dict(truth.attrs), {key: truth[key][...] for key in truth.array_keys()})
    from seisctf.build.engine import SOURCES, TRANSFORMS

    names |= set(TRANSFORMS) | set(SOURCES) | set(SMALL) | {"crustal"}
    return {
        "texts": texts,
        "index": Index(texts),
        "records": records,
        "names": names,
        "commitments": commitments,
        "truths": truths,
    }


def _scrypt(secret: str, parameters: dict) -> bytes:
    """The master key, from the parameters a participant reads in the public attrs."""
    return hashlib.scrypt(
        secret.encode(),
        salt=parameters["label"].encode(),
        n=parameters["n"],
        r=parameters["r"],
        p=parameters["p"],
        dklen=parameters["dklen"],
        maxmem=2 * 128 * parameters["n"] * parameters["r"] * parameters["p"],
    )


# --- the tests ----------------------------------------------------------------------------------


def test_the_package_s_purposes_are_found():
    purposes = expand(purpose_templates(), {"X1train"})
    expected = {"synth/global", "synth/das", "synth/crustal", "ctf-salt", "provenance/seeds"}
    assert expected | {"noise/X1train", "transforms/0/butterworth"} <= set(purposes)


def test_published_values_recomputed_through_the_kdf_are_found(published, words):
    """Control: with the real secret and the published scrypt parameters, an independent
    computation gives the commitment salt, every commitment (found by the search) and the
    fingerprint exactly; so the old-formula fingerprints below are the right formula."""
    secret = words[SECRET_INDEX]
    index = published["index"]
    for record, (dataset, (truth_attrs, arrays)) in zip(
        published["records"], published["truths"].items(), strict=True
    ):
        master = _scrypt(secret, record["key_derivation"])
        salt = hmac.digest(master, b"ctf-salt", "sha256")[:16]
        assert truth_attrs[cv.ATTR_CTF_SALT] == salt.hex()
        for name, array in arrays.items():
            data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            commitment = hashlib.sha256(salt + data).digest()
            assert commitment.hex() == published["commitments"][dataset][name]
            assert index.finds(commitment) == "hex", (dataset, name)
        fingerprint = Fingerprint(record)
        key = hmac.digest(master, b"provenance/seeds", "sha256")
        keyed = hmac.digest(key, fingerprint.seeds_json, "sha256").hex()
        assert fingerprint.with_keyed(keyed).hex() == record["fingerprint"]


def test_no_word_of_the_list_is_checkable_against_any_public_output(published, words):
    """The brute force over all 10,000 words finds nothing in the public texts; the same run
    finds the secret (and only it) once old-derivation values of it are planted."""
    secret = words[SECRET_INDEX]
    assert len(words) == WORD_COUNT and len(set(words)) == WORD_COUNT
    purposes = expand(purpose_templates(), published["names"])
    assert len(purposes) > 100
    fingerprints = [Fingerprint(record) for record in published["records"]]
    old = {p: hmac.digest(secret.encode(), p, "sha256") for p in (b"synth/global", b"ctf-salt")}
    planted = json.dumps(
        {
            "seed": int.from_bytes(old[b"synth/global"][:8], "little") >> 1,
            "salt": old[b"ctf-salt"][:16].hex(),
            "fingerprint": fingerprints[0]
            .with_keyed(hmac.digest(secret.encode(), fingerprints[0].seeds_json, "sha256").hex())
            .hex(),
        }
    )
    control = Index([*published["texts"], planted])
    started = time.perf_counter()
    hits, control_hits = brute_force(words, purposes, fingerprints, [published["index"], control])
    elapsed = time.perf_counter() - started
    assert not hits, hits[:10]
    assert {word for word, _, _ in control_hits} == {secret}
    found = {(label, encoding) for _, label, encoding in control_hits}
    assert {("synth/global", "seed"), ("ctf-salt", "hex"), ("old fingerprint", "hex")} <= found
    n_values = len(words) * (len(purposes) + len(HASHES) + 2 * len(fingerprints))
    print(f"{n_values} cheap values of {len(words)} words tested in {elapsed:.1f} s")


def test_one_guess_costs_a_scrypt_evaluation(published):
    """The published parameters are the package's, and one evaluation with them takes at
    least MIN_KDF_SECONDS here (at most 64 MiB)."""
    parameters = published["records"][0]["key_derivation"]
    assert parameters == keys.KDF_PARAMETERS
    assert 128 * parameters["n"] * parameters["r"] * parameters["p"] <= 64 * 2**20
    timings = []
    for attempt in range(3):
        started = time.perf_counter()
        master = _scrypt(f"timing-{attempt}", parameters)
        timings.append(time.perf_counter() - started)
    assert master == keys.master_key(f"timing-{attempt}")
    assert min(timings) >= MIN_KDF_SECONDS, timings
    print(f"one scrypt evaluation: {min(timings) * 1000:.0f} ms")


# --- a person cannot give a guessable secret ------------------------------------------------------


def test_short_secrets_are_refused_on_the_command_line(capsys, monkeypatch, words):
    from seisctf.cli import EXIT_INVALID_INPUT, main

    short = words[SECRET_INDEX]
    monkeypatch.delenv(keys.SECRET_ENV, raising=False)
    for argv in (
        ["demo", "--secret", short, "--quiet"],
        ["synth", "global", "--out", "unused.zarr", "--secret", short],
        ["build", "unused.yaml", "--secret", "x" * (keys.MIN_SECRET_CHARS - 1)],
        ["tasks", "w.zarr", "--public", "p", "--truth", "t", "--secret", short],
    ):
        assert main(argv) == EXIT_INVALID_INPUT, argv
        error = capsys.readouterr().err
        assert "--secret" in error and "guessed offline" in error, error
        assert "secrets.token_urlsafe(32)" in error
    monkeypatch.setenv(keys.SECRET_ENV, short)
    assert main(["demo", "--quiet"]) == EXIT_INVALID_INPUT
    assert f"${keys.SECRET_ENV}" in capsys.readouterr().err


def test_recipe_secrets_are_refused_and_drawn_secrets_pass_the_check(tmp_path, monkeypatch):
    """A recipe never holds a secret, short or long (it is made to be shared); the published
    demo secret and a drawn one pass the length check."""
    from seisctf.build import engine as recipes
    from seisctf.cli.demo import DEMO_SECRET

    shipped = recipes.shipped("demo-global").read_text()
    path = tmp_path / "r.yaml"
    for secret in ("tsunami2024", "x" * keys.MIN_SECRET_CHARS):
        path.write_text(shipped + f"secret: {secret}\n")
        with pytest.raises(InvalidInput, match="made to be shared") as refused:
            recipes.load(path)
        assert refused.value.what == f"{path}:{len(shipped.splitlines()) + 1}"
    assert keys.checked_secret(DEMO_SECRET, "demo") == DEMO_SECRET
    monkeypatch.delenv(keys.SECRET_ENV, raising=False)
    generated = keys.resolve_secret(None)
    assert generated.drawn and keys.checked_secret(generated.value, "generated")
