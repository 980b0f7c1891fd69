"""A plugin's options declared once, as a dataclass: its JSON schema (what a recipe is checked
against) and its command-line flags are made from it, under the fields' own names.

    @dataclass(frozen=True)
    class TaperOptions:
        max_percentage: float = option(0.05, "fraction of the trace tapered at each end",
                                       exclusive_minimum=0, maximum=0.5)

A function whose keyword-only parameters are its options needs no second declaration: the
dataclass is made from its signature (`options_from_signature`), bounds and help given with
`Annotated`:

    def taper(data, *, max_percentage: Annotated[float, spec(minimum=0, maximum=0.5)] = 0.05)

Types map to JSON schema as `int` → integer, `float` → number, `str` → string, `bool` →
boolean, `list[X]`/`tuple[X, ...]` → array of X, `tuple[X, X]` → array of exactly two X,
`Literal[...]` → enum, `X | None` → X or null, `Location` → a store or file URL, an options
dataclass → its object (nested options). A field without a default is required. `option()`
adds a help text and JSON-schema bounds; `schema=` replaces what the type gives (a union of
shapes, say).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Any, Literal, NewType, Union

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


@dataclasses.dataclass(frozen=True)
class Spec:
    """What an option's type does not say: its help, JSON-schema bounds, or a whole schema."""

    help: str = ""
    schema: Mapping[str, Any] | None = None
    bounds: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def spec(help: str = "", *, schema: Mapping[str, Any] | None = None, **bounds: Any) -> Spec:
    """An option's help and bounds (`minimum`, `exclusive_minimum`, `maximum`, `min_items`,
    `max_items`; those of a value apply to each item of an array), or a whole `schema`."""
    unknown = sorted(set(bounds) - set(_BOUNDS))
    if unknown:
        raise TypeError(f"no such bound {', '.join(unknown)}")
    return Spec(help, schema, bounds)


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    schema: Mapping[str, Any] | None = None,
    **bounds: Any,
) -> Any:
    """A dataclass field of an options class: its default (none: required) and `spec`."""
    metadata = {_METADATA_KEY: spec(help, schema=schema, **bounds)}
    if isinstance(default, list | dict):
        frozen = default
        return dataclasses.field(default_factory=lambda: type(frozen)(frozen), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def options_from_signature(
    function: Callable[..., Any], injected: Collection[str] = (), optional: Collection[str] = ()
) -> type:
    """The options dataclass of a function's keyword-only parameters (their names, types,
    defaults and `Annotated` specs), but those the caller `injected`; `optional`: parameters
    without a default that a recipe may leave out (the caller then supplies them)."""
    hints = typing.get_type_hints(function, include_extras=True)
    fields = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY or parameter.name in injected:
            continue
        annotation, declared = _declared(hints[parameter.name], Spec())
        default = parameter.default
        if default is inspect.Parameter.empty:
            default = None if parameter.name in optional else dataclasses.MISSING
        field = option(default, declared.help, schema=declared.schema, **declared.bounds)
        fields.append((parameter.name, annotation, field))
    name = "".join(part.title() for part in function.__name__.split("_")) + "Options"
    return dataclasses.make_dataclass(name, fields, frozen=True, kw_only=True)


def _declared(annotation: Any, declared: Spec) -> tuple[Any, Spec]:
    """The type under an `Annotated` one, and `declared` filled with what its `Spec`s say (an
    alias of an alias: the outer `Spec` first)."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation, declared
    annotation, *extras = typing.get_args(annotation)
    for extra in reversed(extras):
        if isinstance(extra, Spec):
            declared = Spec(
                declared.help or extra.help,
                declared.schema or extra.schema,
                {**extra.bounds, **declared.bounds},
            )
    return annotation, declared


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
    if origin is tuple and arguments and arguments[-1] is not Ellipsis:
        if len(set(arguments)) > 1:
            raise TypeError(f"no JSON schema for a tuple of mixed types {annotation!r}")
        items = type_schema(arguments[0])
        return {
            "type": "array",
            "items": items,
            "minItems": len(arguments),
            "maxItems": len(arguments),
        }
    if origin in (list, tuple) and arguments:
        return {"type": "array", "items": type_schema(arguments[0])}
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return options_schema(annotation)
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        return {"type": "object"}
    raise TypeError(f"no JSON schema for the option type {annotation!r}")


def field_schema(field: dataclasses.Field, annotation: Any) -> dict[str, Any]:
    """One field's schema: from its type, bounds and help, or its explicit `schema` (a `Spec`
    in an `Annotated` type, then the field's own, each filling what the other leaves out)."""
    annotation, declared = _declared(annotation, field.metadata.get(_METADATA_KEY, Spec()))
    schema = copy.deepcopy(dict(declared.schema or type_schema(annotation)))
    target = schema.get("items", schema)  # bounds of a value: of each item of an array
    for name, value in declared.bounds.items():
        (schema if name in ("min_items", "max_items") else target)[_BOUNDS[name]] = value
    if declared.help:
        schema["description"] = declared.help
    return schema


def options_schema(options_type: type) -> dict[str, Any]:
    """The JSON schema of an options dataclass: an object of its fields, those without a
    default required, no other key."""
    hints = typing.get_type_hints(options_type, include_extras=True)
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


def is_location(schema: Mapping[str, Any]) -> bool:
    """Whether an option's JSON schema is that of a `Location` (a store or file URL)."""
    return schema.get("format") == LOCATION_FORMAT


def option_help(options_type: type | None, name: str) -> str:
    """The help text an options dataclass declares for one field ("" if none)."""
    if options_type is None:
        return ""
    for field in dataclasses.fields(options_type):
        if field.name == name:
            return field.metadata.get(_METADATA_KEY, Spec()).help
    return ""
