"""The options of seisctf's ingests, synthetic sources, outputs and the `store` source and output
are declared once, as dataclasses or keyword-only parameters (`seisctf.options`): the schemas made
from them accept and refuse exactly what the hand-written JSON schemas they replace did, with the
error at the same place. Those schemas are kept here, written out, as the reference."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from seisctf import urls
from seisctf.build import engine
from seisctf.errors import InvalidInput
from seisctf.options import LOCATION_FORMAT
from seisctf.plugins.schema import read_recipe
from seisctf.registry import INGESTS, OUTPUTS

ROOT = Path(__file__).resolve().parents[1]

# The hand-written schemas as they were before the dataclasses (their properties, required).
URL = {"type": "string", "minLength": 1, "format": LOCATION_FORMAT}
NUMBER = {"type": "number"}
POSITIVE = {"type": "number", "exclusiveMinimum": 0}
POSITIVE_INT = {"type": "integer", "minimum": 1}
COUNT = {"type": "integer", "minimum": 0}
NON_NEGATIVE = {"type": "number", "minimum": 0}
SEED = {"type": "integer", "minimum": 0}
INPUT_PATHS = {"type": "array", "items": URL, "minItems": 1}
URLS = {"type": "array", "items": URL}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


SPLIT = _object(
    {
        "strategy": {"enum": ["source-clusters", "station-disjoint", "event", "time"]},
        "seed": SEED,
        "fractions": {"type": "array", "items": NUMBER, "minItems": 3, "maxItems": 3},
        "buffer_km": NON_NEGATIVE,
        "n_clusters": POSITIVE_INT,
        "test_clusters": POSITIVE_INT,
        "dev_fraction": NUMBER,
        "budgets": {"type": "array", "items": POSITIVE_INT},
        "draws": POSITIVE_INT,
    },
    ("strategy",),
)
BEFORE = {
    ("source", "waveform_archive"): _object(
        {
            "sources": INPUT_PATHS,
            "inventory": URLS,
            "rate": POSITIVE,
            "strict": {"type": "boolean"},
            "remove_response": {"enum": ["VEL", "DISP", "ACC"]},
            "pre_filt": {
                "anyOf": [
                    {"const": "auto"},
                    {"type": "null"},
                    {"type": "array", "items": POSITIVE, "minItems": 4, "maxItems": 4},
                ]
            },
            "water_level": {"type": ["number", "null"]},
            "store": URL,
            "block_samples": POSITIVE_INT,
        },
        ("sources",),
    ),
    ("source", "das_files"): _object(
        {
            "sources": INPUT_PATHS,
            "strict": {"type": "boolean"},
            "store": URL,
            "block_samples": POSITIVE_INT,
        },
        ("sources",),
    ),  # fmt: skip
    ("source", "quakeml"): _object(
        {
            "catalog": URL,
            "archive": INPUT_PATHS,
            "window_s": POSITIVE,
            "pre_arrival_s": NON_NEGATIVE,
            "noise_windows": COUNT,
            "inventory": URLS,
            "store": URL,
        },
        ("catalog", "archive"),
    ),
    ("source", "synthetic_global"): _object(
        {
            "sensors": POSITIVE_INT,
            "duration_s": POSITIVE,
            "sampling_rate_hz": POSITIVE,
            "seed": SEED,
        }
    ),  # fmt: skip
    ("source", "synthetic_das"): _object(
        {
            "channels": {"type": "integer", "minimum": 2},
            "channel_spacing_m": POSITIVE,
            "gauge_length_m": POSITIVE,
            "depth_profile": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2},
            },
            "sampling_rate_hz": POSITIVE,
            "ctf_rate_hz": POSITIVE,
            "earthquakes": {"type": "boolean"},
            "noise_rms": NON_NEGATIVE,
            "seed": SEED,
        }
    ),
    ("source", "synthetic_crustal"): _object(
        {
            "sensors": POSITIVE_INT,
            "parametric": COUNT,
            "initial_conditions": COUNT,
            **{
                name: POSITIVE
                for name in (
                    "sensor_spacing_m",
                    "sampling_rate_hz",
                    "duration_s",
                    "spacing_m",
                    "depth_m",
                    "correlation_length_m",
                )
            },  # fmt: skip
            "perturbation_std": NON_NEGATIVE,
            "medium": {"enum": ["von_karman", "gaussian"]},
            "seed": SEED,
        }
    ),
    ("source", "store"): _object({"url": URL}, ("url",)),
    ("outputs", "ctf_bundle"): _object({"public": URL, "truth": URL}, ("public", "truth")),
    ("outputs", "picking"): _object({"url": URL, "split": SPLIT, "audit": URL}, ("url", "split")),
    ("outputs", "store"): _object(
        {"url": URL, "chunks": {"type": "object", "additionalProperties": POSITIVE_INT}}, ("url",)
    ),
}
# A document each schema accepts, and values of every kind to mix into it.
VALID = {
    "waveform_archive": {"sources": ["archive/*.mseed"]},
    "das_files": {"sources": ["das/*.h5"]},
    "quakeml": {"catalog": "events.xml", "archive": ["continuous.zarr"]},
    "synthetic_global": {},
    "synthetic_das": {},
    "synthetic_crustal": {},
    "store": {"url": "private/waves.zarr"},
    "ctf_bundle": {"public": "public/b.zarr", "truth": "private/t.zarr"},
    "picking": {"url": "picking.zarr", "split": {"strategy": "event"}},
}
VALUES = [
    None, True, False, 0, 1, 2, -1, 0.0, 0.5, 2.5, -0.5, "", "auto", "VEL", "NONE", "gaussian",
    "von_karman", "a.zarr", "s3:/demo/typo.zarr", "S3://demo/x.zarr", "s3://demo//x.zarr",
    [], ["a.mseed"], ["a.mseed", ""], [1], [0, 1], [1.0, 2.0, 3.0], [0.1, 0.2, 5, 10],
    [0, 0.2, 5, 10], [0.1, 0.2, 5], [[0, 5], [1000, 150]], [[0, 5, 1]], [["a", 5]], [0, 1, 3],
    {}, {"time": 1024, "sensor": 64}, {"time": 0}, {"time": 1.5}, {"strategy": "event"},
    {"strategy": "time", "seed": -1}, {"strategy": "cluster"}, {"seed": 1},
    {"strategy": "event", "fractions": [0.7, 0.3]}, {"strategy": "event", "budgets": [0, 3]},
    {"strategy": "event", "dev_fraction": "a"}, {"strategy": "event", "poles": 2},
    {"strategy": "source-clusters", "n_clusters": 8, "test_clusters": 2, "buffer_km": -1.0},
]  # fmt: skip


def _entry(part: str, name: str) -> Any:
    if part == "outputs":
        return None if name == "store" else OUTPUTS[name]
    return engine.SOURCES[name]


def _schema(part: str, name: str) -> dict[str, Any]:
    """The schema seisctf checks a recipe's options of this source or output against."""
    if (part, name) == ("outputs", "store"):
        return engine.STORE_OUTPUT
    return _entry(part, name).options


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    formats = FormatChecker(formats=())
    formats.checks(LOCATION_FORMAT, raises=InvalidInput)(lambda value: bool(urls.checked(value)))
    return Draft202012Validator(schema, format_checker=formats)


def _where(validator: Draft202012Validator, document: Any) -> set[tuple[Any, ...]]:
    """Every place the document is refused: the path to the value, or the unknown key."""
    places = set()
    for error in validator.iter_errors(document):
        path = tuple(error.absolute_path)
        if error.validator == "additionalProperties":
            known = error.schema.get("properties", {})
            path += tuple(sorted(key for key in error.instance if key not in known))
        places.add(path)
    return places


CASES = sorted(BEFORE)
VALIDATORS = {case: (_validator(BEFORE[case]), _validator(_schema(*case))) for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[name for _, name in CASES])
def test_each_is_declared_by_a_dataclass_of_the_recipe_keys(case):
    """The options are a dataclass whose fields are the recipe's keys (an ingest's `store` is
    every ingest's, added by the registry), and the schema is made from it."""
    entry = _entry(*case)
    options_type = engine.StoreOutputOptions if entry is None else entry.options_type
    assert options_type is not None and dataclasses.is_dataclass(options_type)
    keys = set(BEFORE[case]["properties"]) - ({"store"} if case[1] in INGESTS else set())
    assert {field.name for field in dataclasses.fields(options_type)} == keys
    Draft202012Validator.check_schema(_schema(*case))


def _one_changed(case: tuple[str, str]) -> list[dict[str, Any]]:
    """The valid document with one key (or one key of a picking's `split`) set to each value."""
    valid = VALID[case[1]]
    documents = [{**valid, key: value} for key in BEFORE[case]["properties"] for value in VALUES]
    documents += [{**valid, "poles": 1}] + [{k: v for k, v in valid.items() if k != key}
                                           for key in valid]  # fmt: skip
    if case == ("outputs", "picking"):
        split = valid["split"]
        documents += [
            {**valid, "split": {**split, key: value}}
            for key in SPLIT["properties"]
            for value in VALUES
        ]
    return documents


@pytest.mark.parametrize("case", CASES, ids=[name for _, name in CASES])
def test_each_value_of_each_key_is_accepted_or_refused_as_before(case):
    before, now = VALIDATORS[case]
    for document in _one_changed(case):
        assert now.is_valid(document) == before.is_valid(document), document
        assert _where(now, document) == _where(before, document), document


@pytest.mark.parametrize("case", CASES, ids=[name for _, name in CASES])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_schema_accepts_and_refuses_what_the_hand_written_one_did(case, data):
    before, now = VALIDATORS[case]
    keys = [*BEFORE[case]["properties"], "poles"]
    drawn = st.dictionaries(st.sampled_from(keys), st.sampled_from(VALUES), max_size=4)
    document = {**VALID[case[1]], **data.draw(drawn)}
    for key in data.draw(st.lists(st.sampled_from(keys), max_size=1)):
        document.pop(key, None)
    if case == ("outputs", "picking") and data.draw(st.booleans()):
        split = st.dictionaries(st.sampled_from(list(SPLIT["properties"])), st.sampled_from(VALUES))
        document["split"] = {"strategy": "time", **data.draw(split)}
    assert now.is_valid(document) == before.is_valid(document), document
    assert _where(now, document) == _where(before, document), document


def _shipped_and_documented() -> list[tuple[str, dict[str, Any]]]:
    """The shipped recipes and every recipe in the README's and docs' YAML examples."""
    found = [(path.name, path.read_text()) for path in sorted(engine.SHIPPED.glob("*.yaml"))]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for index, block in enumerate(re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)):
            if re.search(r"^recipe: 1", block, re.M):
                found.append((f"{page.name}#{index}", block))
    return [(where, yaml.safe_load(text)) for where, text in found]


RECIPES = _shipped_and_documented()


def test_the_shipped_and_documented_recipes_name_the_converted_plugins():
    named = {("source", name) for _, data in RECIPES for name in data["source"]}
    named |= {("outputs", name) for _, data in RECIPES for name in data["outputs"]}
    assert len(RECIPES) >= 8
    assert named >= {
        ("source", "synthetic_global"), ("source", "synthetic_das"),
        ("source", "synthetic_crustal"), ("source", "waveform_archive"),
        ("outputs", "store"), ("outputs", "ctf_bundle"), ("outputs", "picking"),
    }  # fmt: skip


@pytest.mark.parametrize(("where", "data"), RECIPES, ids=[where for where, _ in RECIPES])
def test_the_shipped_and_documented_recipes_are_accepted_by_both(where, data):
    parts = [("source", name, values) for name, values in data["source"].items()]
    parts += [("outputs", name, values) for name, values in data["outputs"].items()]
    for part, name, values in parts:
        if (part, name) in VALIDATORS:
            before, now = VALIDATORS[part, name]
            assert before.is_valid(values or {}) and now.is_valid(values or {}), (where, name)


def _recipe(source: str, options: str, outputs: str) -> str:
    return f"recipe: 1\nsource:\n  {source}:\n{options}outputs:\n{outputs}"


STORE = "  store:\n    url: out.zarr\n"
REFUSED = [
    _recipe("waveform_archive", "    sources: [a.mseed]\n    water_level: loud\n", STORE),
    _recipe("waveform_archive", "    sources: [a.mseed]\n    pre_filt: [0.1, 0.2, 5]\n", STORE),
    _recipe("waveform_archive", "    sources: []\n", STORE),
    _recipe("das_files", "    sources: [a.h5]\n    block_samples: 0\n", STORE),
    _recipe("das_files", "    sources: [a.h5]\n    strict: yes please\n", STORE),
    _recipe("quakeml", "    catalog: e.xml\n    archive: [c.zarr]\n    window: 30\n", STORE),
    _recipe("quakeml", "    catalog: 's3:/e.xml'\n    archive: [c.zarr]\n", STORE),
    _recipe("synthetic_global", "    seed: null\n", STORE),
    _recipe("synthetic_das", "    depth_profile: [[0, 5], [1, 2, 3]]\n", STORE),
    _recipe("synthetic_crustal", "    medium: granite\n", STORE),
    _recipe("store", "    url: a.zarr\n", "  store:\n    url: b.zarr\n    chunks: {time: 0}\n"),
    _recipe("synthetic_global", "    sensors: 64\n", "  ctf_bundle:\n    public: p.zarr\n"),
    _recipe(
        "stead",
        "    hdf5: a.hdf5\n    csv: a.csv\n",
        "  picking:\n    url: p.zarr\n    split:\n      strategy: event\n      seed: -1\n",
    ),  # fmt: skip
]


@pytest.mark.parametrize("text", REFUSED)
def test_a_refused_recipe_names_the_same_line_and_place_as_before(text):
    """`seisctf build`'s check of the recipe fails where the hand-written schema did."""
    recipe = read_recipe("r.yaml", text)
    with pytest.raises(InvalidInput) as refused:
        engine.validate(recipe)
    ((source, values),) = recipe.data["source"].items()
    checks = [(("source", source), values)]
    checks += [(("outputs", name), options) for name, options in recipe.data["outputs"].items()]
    with pytest.raises(InvalidInput) as before:
        for location, options in checks:
            recipe.check(BEFORE.get(location, {}), options or {}, location)
    assert refused.value.what == before.value.what  # the file and line
    assert refused.value.problem.split(": ")[0] == before.value.problem.split(": ")[0]


def test_the_urls_a_build_writes_are_its_outputs_location_options(tmp_path):
    """The written URLs (what `seisctf build` checks and locks) are read from the location
    options of the outputs' schemas, whatever help the options carry."""
    text = _recipe(
        "quakeml", "    catalog: e.xml\n    archive: [c.zarr]\n",
        "  picking:\n    url: p.zarr\n    split: {strategy: event}\n    audit: audit.json\n",
    )  # fmt: skip
    written = engine.output_urls(read_recipe("r.yaml", text), tmp_path)
    assert written == [str(tmp_path / name) for name in ("p.zarr", "audit.json", "p.zarr")]
    text = _recipe(
        "synthetic_global", "    sensors: 64\n",
        f"{STORE}  ctf_bundle:\n    public: pub.zarr\n    truth: truth.zarr\n",
    )  # fmt: skip
    written = engine.output_urls(read_recipe("r.yaml", text), tmp_path)
    assert written == [str(tmp_path / name) for name in ("out.zarr", "pub.zarr", "truth.zarr")]
