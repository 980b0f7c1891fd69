"""A plugin's options declared once, as a dataclass: its JSON schema (what a recipe is checked
against) and its command-line flags are made from it, under the fields' own names.

    @dataclass(frozen=True)
    class TaperOptions:
        max_percentage: float = option(0.05, "fraction of the trace tapered at each end",
                                       exclusive_minimum=0, maximum=0.5)

Types map to JSON schema as `int` → integer, `float` → number, `str` → string, `bool` →
boolean, `list[X]`/`tuple[X, ...]` → array of X, `Literal[...]` → enum, `X | None` → X or
null, `Location` → a store or file URL. A field without a default is required. `option()`
adds a help text and JSON-schema bounds; `schema=` replaces what the type gives.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, NewType, Union

# A store, file or folder: a local path or an fsspec URL (checked as such in a recipe).
Location = NewType("Location", str)
LOCATION_FORMAT = "seisctf-location"
LOCATION_SCHEMA = {"type": "string", "minLength": 1, "format": LOCATION_FORMAT}

_METADATA_KEY = "seisctf"
_BOUNDS = {
    "minimum": "minimum",
    "exclusive_minimum": "exclusiveMinimum",
    "maximum": "maximum",
    "min_items": "minItems",
    "max_items": "maxItems",
}
_SCALARS: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    Location: LOCATION_SCHEMA,
}


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    schema: Mapping[str, Any] | None = None,
    **bounds: Any,
) -> Any:
    """A dataclass field of an options class: its default (none: required), its help (the
    schema's `description` and the flag's help) and JSON-schema bounds (`minimum`,
    `exclusive_minimum`, `maximum`, `min_items`, `max_items`), or a whole `schema`."""
    unknown = sorted(set(bounds) - set(_BOUNDS))
    if unknown:
        raise TypeError(f"option(): no such bound {', '.join(unknown)}")
    metadata = {_METADATA_KEY: {"help": help, "schema": schema, "bounds": bounds}}
    if isinstance(default, list | dict):
        frozen = default
        return dataclasses.field(default_factory=lambda: type(frozen)(frozen), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def type_schema(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a type annotation (see the module's docstring)."""
    if annotation in _SCALARS:
        return dict(_SCALARS[annotation])
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return {"enum": list(arguments)}
    if origin in (Union, types.UnionType):
        kept = [argument for argument in arguments if argument is not type(None)]
        schemas = [type_schema(argument) for argument in kept]
        if len(kept) < len(arguments):
            schemas.append({"type": "null"})
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin in (list, tuple) and arguments:
        return {"type": "array", "items": type_schema(arguments[0])}
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        return {"type": "object"}
    raise TypeError(f"no JSON schema for the option type {annotation!r}")


def field_schema(field: dataclasses.Field, annotation: Any) -> dict[str, Any]:
    """One field's schema: from its type, bounds and help, or its explicit `schema`."""
    declared = field.metadata.get(_METADATA_KEY, {})
    schema = copy.deepcopy(dict(declared.get("schema") or type_schema(annotation)))
    target = schema.get("items", schema)  # bounds of a value: of each item of an array
    for name, value in (declared.get("bounds") or {}).items():
        (schema if name in ("min_items", "max_items") else target)[_BOUNDS[name]] = value
    if declared.get("help"):
        schema["description"] = declared["help"]
    return schema


def options_schema(options_type: type) -> dict[str, Any]:
    """The JSON schema of an options dataclass: an object of its fields, those without a
    default required, no other key."""
    hints = typing.get_type_hints(options_type)
    properties, required = {}, []
    for field in dataclasses.fields(options_type):
        properties[field.name] = field_schema(field, hints[field.name])
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def option_help(options_type: type | None, name: str) -> str:
    """The help text an options dataclass declares for one field ("" if none)."""
    if options_type is None:
        return ""
    for field in dataclasses.fields(options_type):
        if field.name == name:
            return field.metadata.get(_METADATA_KEY, {}).get("help", "")
    return ""
