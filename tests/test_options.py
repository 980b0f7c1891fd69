"""Options declared once as a dataclass (`seisctf.options`): the JSON schema made from it, checked
against what jsonschema accepts and refuses, and the help its fields carry."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Annotated, Literal

import pytest
from jsonschema import Draft202012Validator

from seisctf.options import (
    LOCATION_SCHEMA,
    Location,
    is_location,
    option,
    option_help,
    options_from_signature,
    options_schema,
    spec,
    type_schema,
)


@dataclass(frozen=True)
class Example:
    path: Location = option(help="a file")
    rate_hz: float = option(help="Hz", exclusive_minimum=0)
    order: int = option(4, minimum=1, maximum=10)
    corners: list[float] = option([1.0, 2.0], min_items=2, max_items=2, exclusive_minimum=0)
    kind: Literal["linear", "constant"] = "linear"
    label: str | None = None
    strict: bool = False


def test_the_schema_follows_the_types_bounds_and_defaults():
    schema = options_schema(Example)
    Draft202012Validator.check_schema(schema)
    properties = schema["properties"]
    assert schema["required"] == ["path", "rate_hz"]
    assert schema["additionalProperties"] is False
    assert properties["path"] == {**LOCATION_SCHEMA, "description": "a file"}
    assert properties["rate_hz"] == {"type": "number", "exclusiveMinimum": 0, "description": "Hz"}
    assert properties["order"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert properties["corners"] == {
        "type": "array",
        "items": {"type": "number", "exclusiveMinimum": 0},
        "minItems": 2,
        "maxItems": 2,
    }
    assert properties["kind"] == {"enum": ["linear", "constant"]}
    assert properties["label"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert properties["strict"] == {"type": "boolean"}


@pytest.mark.parametrize(
    ("change", "valid"),
    [
        ({}, True),
        ({"rate_hz": 0}, False),
        ({"order": 11}, False),
        ({"corners": [1.0]}, False),
        ({"corners": [1.0, -2.0]}, False),
        ({"kind": "cubic"}, False),
        ({"label": None}, True),
        ({"gain": 2}, False),
    ],
)
def test_a_dataclass_default_is_valid_and_each_bound_refuses(change, valid):
    validator = Draft202012Validator(options_schema(Example))
    options = {**asdict(Example(path="a.csv", rate_hz=20.0)), **change}
    assert validator.is_valid(options) is valid


def test_defaults_are_not_shared_and_help_is_read_back():
    first, second = Example(path="a", rate_hz=1.0), Example(path="b", rate_hz=1.0)
    assert first.corners == second.corners and first.corners is not second.corners
    assert option_help(Example, "rate_hz") == "Hz" and option_help(Example, "kind") == ""
    with pytest.raises(TypeError, match="no such bound minimun"):
        option(1, minimun=0)


@dataclass(frozen=True)
class Inner:
    kind: Literal["a", "b"]
    count: int = option(1, minimum=1)


Positive = Annotated[float, spec("inner help", exclusive_minimum=0)]


@dataclass(frozen=True)
class Outer:
    inner: Inner = option(help="nested options")
    window: tuple[float, float] = option((0.0, 1.0), "start, stop, s")
    rate: Annotated[Positive, spec("rate, Hz")] = 1.0


def test_fixed_tuples_nested_options_and_aliases_of_aliases():
    schema = options_schema(Outer)
    properties = schema["properties"]
    assert properties["window"] == {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 2,
        "maxItems": 2,
        "description": "start, stop, s",
    }
    assert properties["inner"]["required"] == ["kind"] and properties["inner"]["description"]
    assert properties["rate"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "description": "rate, Hz",
    }
    validator = Draft202012Validator(schema)
    good = {"inner": {"kind": "a"}, "window": [0, 2.5], "rate": 2.0}
    assert validator.is_valid(good)
    for bad in (
        {"window": [0, 1, 2]},
        {"inner": {"kind": "c"}},
        {"inner": {"kind": "a", "count": 0}},
        {"inner": {"kind": "a", "other": 1}},
        {"rate": 0},
    ):
        assert not validator.is_valid({**good, **bad}), bad
    with pytest.raises(TypeError, match="mixed types"):
        type_schema(tuple[int, str])


def test_a_signature_keeps_every_spec_of_an_alias_of_an_alias():
    def scale(data: list[float], *, rate: Annotated[Positive, spec("rate, Hz")] = 1.0) -> None:
        """A function whose option's type is an alias with bounds, given its own help."""

    (field,) = fields(options_from_signature(scale))
    rate = options_schema(options_from_signature(scale))["properties"]["rate"]
    assert rate == {"type": "number", "exclusiveMinimum": 0, "description": "rate, Hz"}
    assert field.default == 1.0


def test_a_location_option_is_known_by_its_format_whatever_its_help():
    assert is_location(options_schema(Example)["properties"]["path"])
    assert is_location(LOCATION_SCHEMA)
    assert not is_location(options_schema(Example)["properties"]["label"])
