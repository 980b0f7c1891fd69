"""Fuzzing (hypothesis) of the two parsers that take text and bytes from strangers: the CTF
submission intake (random names, dtypes, shapes and values written as .npz, a folder of .npy,
a zarr group or a zipped one, then random bytes changed or cut) and the recipe YAML reader
(random documents, random edits of a valid recipe's structure and of its text). The only
outcomes allowed are success and `InvalidInput`: any other exception is a bug."""

from __future__ import annotations

import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import dask
import numpy as np
import pytest
import yaml
import zarr
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

# Imported now: Python 3.11.7 can fail to compile a module imported after a RecursionError was
# caught in its thread ("AST constructor recursion depth mismatch", CPython gh-106905), and
# hypothesis imports its optimiser lazily, after examples whose reading recursed deeply.
from hypothesis.internal.conjecture import optimiser  # noqa: F401

from seisctf.build import engine as recipe
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.scoring.submission import open_submission
from seisctf.scoring.values import value_report

sys.path.insert(0, str(Path(__file__).parents[1] / "data"))

from bad_writers import npy_bytes, write_npz, zip_folder  # noqa: E402
from conftest import shapes_manifest  # noqa: E402

NAMES = tuple(f"X{i}test" for i in range(1, 10))
SHAPES = {name: (6 + (i % 3), 4) for i, name in enumerate(NAMES)}
MANIFEST = shapes_manifest(SHAPES)
DTYPES = ("<f4", ">f8", "<f2", "<i4", "|u1", "|b1", "<c8", "|O", "<U3", "|S2", "|V8",
          "<M8[s]", [("a", "<f4"), ("b", "<f4")])  # fmt: skip
FLOAT_DTYPES = ("<f4", ">f8", "<f2")
VALUES = (0.0, -0.0, 1.5, -2.0, 1e300, np.nan, np.inf, -np.inf)
FORMATS = ("npz", "npy", "zarr", "zip")
# Submissions of exotic dtypes are written on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3")
FUZZ = settings(
    max_examples=100,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def submission_arrays(draw) -> dict[str, np.ndarray]:
    """Half the time every expected name and shape in a float dtype, else sometimes others and
    other dtypes; some arrays hold a non-finite or extreme value (at one place or everywhere)."""
    arrays = {}
    wild = draw(st.booleans())  # else every name, shape and a float dtype as the manifest asks
    for name, shape in SHAPES.items():
        if wild and draw(st.integers(0, 19)) == 0:
            continue  # missing
        if wild and draw(st.integers(0, 9)) == 0:
            name = draw(st.text("abcXtest0123456789_.-", min_size=1, max_size=12))
        if wild and draw(st.integers(0, 5)) == 0:
            shape = tuple(draw(st.lists(st.integers(0, 9), min_size=0, max_size=3)))
        dtypes = DTYPES if wild else FLOAT_DTYPES
        dtype = np.dtype("<f4") if draw(st.booleans()) else np.dtype(draw(st.sampled_from(dtypes)))
        array = np.full(shape, 0.25 if dtype.kind in "fc" else 0, dtype=dtype)
        if dtype.kind in "fcO" and array.size and draw(st.integers(0, 3)) == 0:
            where = draw(st.one_of(st.none(), st.integers(0, array.size - 1)))  # None: all
            with np.errstate(over="ignore"):  # 1e300 in float16/32 is inf: a case too
                array.flat[slice(None) if where is None else where] = draw(st.sampled_from(VALUES))
        arrays[name] = array
    return arrays


def write_submission(arrays: dict[str, np.ndarray], kind: str, root: Path) -> Path:
    """`arrays` as a submission of `kind`; arrays a format cannot hold are written as .npy
    bytes where the format has files, else left out."""
    if kind == "npz":
        return write_npz(root / "s.npz", arrays)
    if kind == "npy":
        (root / "npy").mkdir()
        for name, array in arrays.items():
            (root / "npy" / f"{name}.npy").write_bytes(npy_bytes(array))
        return root / "npy"
    group = root / "g.zarr"
    zarr.open_group(str(group), mode="w", zarr_format=3)
    for name, array in arrays.items():
        try:
            _add_array(group, name, array)
        except (TypeError, ValueError, NotImplementedError, zarr.errors.BaseZarrError):
            continue  # zarr cannot store it: the submission just lacks it
    if kind == "zarr":
        return group
    return zip_folder(group, root / "s.zip")


def _add_array(group: Path, name: str, array: np.ndarray) -> None:
    target = zarr.open_group(str(group), mode="r+")
    chunks = tuple(max(1, n // 2) for n in array.shape) or None
    stored = target.create_array(name, shape=array.shape, dtype=array.dtype, chunks=chunks)
    stored[...] = array


def damage(path: Path, edits: list[tuple[int, int]], cut: int | None) -> None:
    """Change bytes (relative offset in permille, new value) of one file of the submission (its
    largest), then cut it to `cut` permille of its length."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    if not files:
        return
    target = max(files, key=lambda p: (p.stat().st_size, str(p)))
    data = bytearray(target.read_bytes())
    for offset, value in edits:
        if data:
            data[offset * len(data) // 1000 % len(data)] = value
    if cut is not None:
        data = data[: cut * len(data) // 1000]
    target.write_bytes(bytes(data))


def read_everything(source: Path) -> dict[str, np.ndarray]:
    """The intake, then every value read (as the scoring pass reads them); each array's
    `value_report` checked against numpy on the values read."""
    opened = open_submission(StoreLocation(source), MANIFEST)
    names = list(opened)
    reports = dask.compute(*(value_report(opened[n]) for n in names), scheduler="synchronous")
    values = dask.compute(*(opened[n] for n in names), scheduler="synchronous")
    for name, report, array in zip(names, reports, values, strict=True):
        assert array.shape == SHAPES[name], name
        bad = np.flatnonzero(~np.isfinite(array))
        count, first, largest = report
        assert (count, first) == (len(bad), bad[0] if len(bad) else -1), name
        expected = np.max(np.abs(array)) if array.size else 0.0
        assert largest == expected or (np.isnan(largest) and np.isnan(expected)), name
    return dict(zip(names, values, strict=True))


def nonfinite_counts(arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """{name: NaN/Inf count} of the arrays of the manifest's names and shapes."""
    return {
        name: int(np.count_nonzero(~np.isfinite(array)))
        for name, array in arrays.items()
        if name in SHAPES and array.shape == SHAPES[name] and array.dtype.kind == "f"
    }


@FUZZ
@given(
    arrays=submission_arrays(),
    kind=st.sampled_from(FORMATS),
    edits=st.lists(st.tuples(st.integers(0, 999), st.integers(0, 255)), max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 999)),
)
def test_submission_intake_accepts_or_refuses_as_bad_input(arrays, kind, edits, cut, tmp_path):
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh folder per example
    try:
        source = write_submission(arrays, kind, root)
        damage(source, edits, cut)
        try:
            read = read_everything(source)
            event("accepted")
        except InvalidInput:
            event("refused")
            return
        if not edits and cut is None:  # undamaged: the values written, NaN/Inf counted as such
            assert nonfinite_counts(read) == nonfinite_counts(arrays)
            for name, array in read.items():
                assert np.array_equal(array, arrays[name].astype(array.dtype), equal_nan=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- recipes ----------------------------------------------------------------------------------

SHIPPED = recipe.shipped("demo-global")
VALID = yaml.safe_load(SHIPPED.read_text())
YAML_CHARACTERS = "&*!:{}[],-#|>'\"%@`? \t\n\r\x00\x85\ufeffab01."
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def load_text(text: str, tmp_path: Path) -> None:
    """`recipe.load` of the text as a file (the bytes checks included); InvalidInput passes."""
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    try:
        recipe.load(path)
        event("accepted")
    except InvalidInput:
        event("refused")


def _locations(value, location=()):
    yield location
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _locations(item, (*location, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _locations(item, (*location, index))


LOCATIONS = list(_locations(VALID))


def replaced(document, location, value):
    """A deep copy of `document` with the value at `location` replaced (None: deleted)."""
    if not location:
        return value
    copy = dict(document) if isinstance(document, dict) else list(document)
    head, *rest = location
    if rest:
        copy[head] = replaced(document[head], tuple(rest), value)
    elif value is None and isinstance(copy, dict):
        copy.pop(head)
    else:
        copy[head] = value
    return copy


@FUZZ
@given(document=documents)
def test_random_yaml_documents_are_recipes_or_bad_input(document, tmp_path):
    load_text(yaml.safe_dump(document, allow_unicode=True), tmp_path)


@FUZZ
@given(
    location=st.sampled_from(LOCATIONS),
    value=documents,
    extra=st.dictionaries(st.text(max_size=6), scalars, max_size=2),
)
def test_edits_of_a_valid_recipe_are_recipes_or_bad_input(location, value, extra, tmp_path):
    document = replaced(VALID, location, value)
    if isinstance(document, dict):
        document = {**document, **extra}
    load_text(yaml.safe_dump(document, allow_unicode=True), tmp_path)


@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.text(YAML_CHARACTERS, max_size=3)),
        min_size=1,
        max_size=6,
    )
)
def test_text_edits_of_a_valid_recipe_are_recipes_or_bad_input(edits, tmp_path):
    text = SHIPPED.read_text()
    for position, removed, inserted in edits:
        at = position % (len(text) + 1)
        text = text[:at] + inserted + text[at + removed :]
    load_text(text, tmp_path)


def test_the_unedited_recipe_loads():
    assert recipe.load(SHIPPED).data == VALID


@pytest.mark.parametrize("kind", FORMATS)
def test_a_valid_submission_of_each_format_reads(kind, tmp_path):
    arrays = {name: np.full(shape, 0.25, np.float32) for name, shape in SHAPES.items()}
    read_everything(write_submission(arrays, kind, tmp_path))
    assert zipfile.is_zipfile(tmp_path / "s.zip") == (kind == "zip")
