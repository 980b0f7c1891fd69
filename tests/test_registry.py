"""The registries: every entry's options are a valid JSON-schema object, names are unique, the
recipe document schema lists exactly the registered names, unknown names are refused, and a
function registered on a throwaway registry is callable through it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from jsonschema import Draft202012Validator

from seisctf.build import engine
from seisctf.errors import InvalidInput
from seisctf.options import option
from seisctf.registry import INGESTS, OUTPUTS, SYNTHS, TRANSFORMS, Registry, Transform

REGISTRIES = {"transform": TRANSFORMS, "synthetic source": SYNTHS, "recipe output": OUTPUTS}


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_every_entry_has_an_object_schema_of_its_options(kind):
    entries = REGISTRIES[kind].entries()
    assert entries
    for entry in entries:
        Draft202012Validator.check_schema(entry.options)
        assert entry.options["type"] == "object", entry.name
        assert entry.options["additionalProperties"] is False, entry.name
        assert set(entry.options["required"]) <= set(entry.options["properties"]), entry.name
        assert callable(entry.function) and entry.summary, entry.name


def test_names_are_unique_across_sources_and_the_registered_functions_are_the_entries():
    sources = ["store", *INGESTS, *SYNTHS]
    assert len(sources) == len(set(sources))
    for registry in REGISTRIES.values():
        names = [entry.name for entry in registry.entries()]
        assert len(names) == len(set(names))
        assert all(registry[name].name == name for name in names)


def test_the_recipe_document_schema_lists_exactly_the_registered_names():
    assert list(engine.SOURCES) == ["store", *INGESTS, *SYNTHS]
    assert engine.output_names() == ["store", *OUTPUTS]
    schema = engine.document_schema(list(engine.SOURCES), list(TRANSFORMS), engine.output_names())
    properties = schema["properties"]
    assert properties["source"]["propertyNames"]["enum"] == ["store", *INGESTS, *SYNTHS]
    assert properties["transforms"]["items"]["propertyNames"]["enum"] == list(TRANSFORMS)
    assert properties["outputs"]["propertyNames"]["enum"] == ["store", *OUTPUTS]
    assert set(TRANSFORMS) >= {"butterworth", "decimate", "add_gaussian_noise", "select_channels"}
    assert set(SYNTHS) == {"synthetic_global", "synthetic_das", "synthetic_crustal"}
    assert set(OUTPUTS) == {"ctf_bundle", "picking"}


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_an_unknown_name_names_the_kind_and_the_known_names(kind):
    registry = REGISTRIES[kind]
    with pytest.raises(InvalidInput) as refused:
        registry["no_such_name"]
    assert refused.value.what == kind
    assert "no_such_name" in refused.value.problem
    assert all(name in refused.value.problem for name in registry)
    with pytest.raises(InvalidInput, match="unknown source 'no_such_source'; known: store"):
        engine.SOURCES["no_such_source"]


@dataclass(frozen=True)
class ScaleOptions:
    factor: float = option(help="the factor", exclusive_minimum=0)


def test_a_function_registered_on_a_throwaway_registry_is_callable_through_it():
    registry = Registry("transform", Transform, group="seisctf.tests.no_such_group")

    @registry.register("scale", options=ScaleOptions, cheap=True)
    def scale(values: list[float], *, factor: float) -> list[float]:
        """Multiply every value by `factor`."""
        return [value * factor for value in values]

    entry = registry["scale"]
    assert entry.function is scale and entry.cheap is True and entry.seeded is False
    assert entry.summary == "Multiply every value by `factor`."
    assert entry.function([1.0, 2.0], factor=3.0) == [3.0, 6.0]
    assert list(registry) == ["scale"] and len(registry) == 1
    assert entry.options_type is ScaleOptions and entry.options["required"] == ["factor"]
    registry.register("scale", options=ScaleOptions)(scale)  # the same function: no error
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("scale", options=ScaleOptions)(lambda values: values)


def test_options_are_a_dataclass_not_a_json_schema():
    """A hand-written JSON schema is no longer taken: options are declared once, as a
    dataclass (or the function's keyword-only parameters), and the schema made from it."""
    registry = Registry("transform", Transform, group="seisctf.tests.no_such_group")
    schema = {"type": "object", "properties": {"factor": {"type": "number"}}}
    with pytest.raises(TypeError, match="'scale': options are a dataclass"):
        registry.register("scale", options=schema)(lambda values, *, factor: values)
    assert "scale" not in registry


def test_a_property_the_plugin_class_does_not_declare_is_refused_where_it_is_registered():
    registry = Registry("transform", Transform, group="seisctf.tests.no_such_group")
    with pytest.raises(TypeError, match="no such property chaep"):
        registry.register("scale", options=ScaleOptions, chaep=True)
