"""Reading a recipe YAML: parse with line numbers, validate against JSON Schemas, point at lines.

A recipe names a source, a chain of transforms, splits and outputs (the format is in
docs/recipes.md). Everything is checked here, before any work: the document's shape (`SCHEMA`),
each source's, transform's and output's parameters (their own schemas, registered with them in
`seisctf.registry`), duplicate keys. Errors are `InvalidInput("FILE:LINE", "where: what")`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml

from seisctf import urls
from seisctf.cluster_config import CLUSTER_SCHEMA
from seisctf.errors import InvalidInput
from seisctf.options import LOCATION_FORMAT, spec

Location = tuple[Any, ...]  # keys and indices from the document's root

# A (start, stop) window, s (transforms' options whose type does not say its length).
SECONDS_WINDOW = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
# A synthetic source's own seed: a recipe gives an integer ≥ 0 or leaves it out (None: derived
# from the build's secret; a recipe's null is refused, as it always was).
SynthSeed = Annotated[
    int | None,
    spec("seed (default: derived from the secret)", schema={"type": "integer", "minimum": 0}),
]
# Bounds of a recipe document (the shipped ones have under 30 values and 6 levels).
MAX_RECIPE_BYTES = 2**20
MAX_NODES = 10_000  # values once aliases are expanded
MAX_DEPTH = 64


def parameters(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The schema of a parameter mapping: these keys only."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def one_key_of(names: list[str]) -> dict[str, Any]:
    """A mapping with exactly one key, one of `names` (a source, a transform step)."""
    return {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "propertyNames": {"enum": names},
    }


def document_schema(sources: list[str], transforms: list[str], outputs: list[str]) -> dict:
    return {
        "type": "object",
        "required": ["recipe", "source", "outputs"],
        "additionalProperties": False,
        "properties": {
            "recipe": {"const": 1},
            "name": {"type": "string", "minLength": 1},
            "description": {"type": "string"},
            "secret": {"type": "string", "minLength": 1},
            # The Dask cluster `seisctf build` starts (`seisctf.build.cluster_file`).
            "cluster": CLUSTER_SCHEMA,
            "source": one_key_of(sources),
            "transforms": {"type": "array", "items": one_key_of(transforms)},
            "splits": parameters({"ctf": parameters({"layout": {"type": "string"}})}),
            "outputs": {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"enum": outputs},
            },
        },
    }


class _Lines:
    """Line (1-based) of every key and item of a YAML document, by location.

    Walking the composed document also bounds it: aliases may not expand it beyond
    `MAX_NODES` values (a "billion laughs" document) nor refer to their own ancestors, and it
    may not nest deeper than `MAX_DEPTH`."""

    def __init__(self, text: str, where: str) -> None:
        self.where = where
        self.lines: dict[Location, int] = {}
        self.visited = 0
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as error:
            raise _yaml_problem(error, where) from None
        except RecursionError:
            raise InvalidInput(f"{where}:1", f"nested deeper than {MAX_DEPTH} levels") from None
        if node is not None:
            self._walk(node, (), ())

    def _walk(self, node: yaml.Node, location: Location, ancestors: tuple[int, ...]) -> None:
        line = node.start_mark.line + 1
        self.visited += 1
        if self.visited > MAX_NODES:
            raise InvalidInput(
                f"{self.where}:{line}",
                f"{describe(location)}: more than {MAX_NODES} values once aliases are expanded "
                "(a YAML bomb?)",
            )
        if id(node) in ancestors:
            raise InvalidInput(f"{self.where}:{line}", f"{describe(location)}: recursive alias")
        if len(ancestors) >= MAX_DEPTH:
            raise InvalidInput(
                f"{self.where}:{line}", f"{describe(location)}: nested deeper than {MAX_DEPTH}"
            )
        self.lines.setdefault(location, line)
        ancestors = (*ancestors, id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise InvalidInput(
                        f"{self.where}:{key_node.start_mark.line + 1}",
                        f"{describe(location)}: a key must be a plain name, not a list or mapping",
                    )
                key = key_node.value
                if key in seen:
                    raise InvalidInput(
                        f"{self.where}:{key_node.start_mark.line + 1}",
                        f"{describe(location + (key,))}: duplicate key",
                    )
                seen.add(key)
                self.lines[location + (key,)] = key_node.start_mark.line + 1
                self._walk(value_node, location + (key,), ancestors)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._walk(item, location + (index,), ancestors)

    def of(self, location: Location) -> int:
        """The line of `location`, or of its nearest ancestor present in the document."""
        while location not in self.lines and location:
            location = location[:-1]
        return self.lines.get(location, 1)


def _yaml_problem(error: yaml.YAMLError, where: str) -> InvalidInput:
    """A PyYAML error (syntax, or a tag safe_load does not construct) at its line."""
    mark = getattr(error, "problem_mark", None)
    line = mark.line + 1 if mark else 1
    parts = [getattr(error, "context", None), getattr(error, "problem", None)]
    text = ", ".join(part for part in parts if part) or str(error).splitlines()[0]
    return InvalidInput(f"{where}:{line}", f"not valid YAML: {text}")


def describe(location: Location) -> str:
    """'transforms[2].butterworth.freqmax' for ('transforms', 2, 'butterworth', 'freqmax')."""
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "recipe"


@dataclass(frozen=True)
class RecipeText:
    """A parsed recipe: its data, its text, where it came from, and its lines."""

    data: dict[str, Any]
    text: str
    where: str
    lines: _Lines

    def error(self, location: Location, problem: str) -> InvalidInput:
        return InvalidInput(
            f"{self.where}:{self.lines.of(location)}", f"{describe(location)}: {problem}"
        )

    def check(self, schema: Mapping[str, Any], value: Any, location: Location) -> None:
        """Validate `value` (found at `location`) against `schema`; the first error, by line."""
        found = [(location + _offending(error), error) for error in _errors(schema, value)]
        if found:
            where, error = min(found, key=lambda item: self.lines.of(item[0]))
            raise self.error(where, _message(error))


def check_options(
    schema: Mapping[str, Any], options: Mapping[str, Any], name_of: Callable[[str], str] = str
) -> None:
    """Validate a plugin's `options` against its schema outside a recipe (a command's flags):
    InvalidInput naming the first offending option as `name_of(option)` (its flag)."""
    for error in _errors(schema, options):
        location = _offending(error)
        option = str(location[0]) if location else "options"
        raise InvalidInput(name_of(option), _message(error))


def _errors(schema: Mapping[str, Any], value: Any) -> list[Any]:
    """jsonschema's errors of `value`, URLs checked as seisctf checks them (`urls.checked`)."""
    from jsonschema import Draft202012Validator, FormatChecker

    formats = FormatChecker(formats=())
    formats.checks(LOCATION_FORMAT, raises=InvalidInput)(_is_location)
    return list(Draft202012Validator(schema, format_checker=formats).iter_errors(value))


def _is_location(value: Any) -> bool:
    """jsonschema's check of a location: `urls.checked` raises InvalidInput for a bad one."""
    return bool(urls.checked(value))


def _offending(error: Any) -> Location:
    """Where the error is: the unexpected key itself for unknown keys and names."""
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        unexpected = [key for key in error.instance if key not in allowed]
        return path + (unexpected[0],) if unexpected else path
    if error.validator == "propertyNames" or (
        error.validator == "enum" and "propertyNames" in error.relative_schema_path
    ):
        return path + (error.instance,)
    return path


def _message(error: Any) -> str:
    if error.validator == "format" and isinstance(error.cause, InvalidInput):
        return error.cause.problem
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown key(s)")
    if error.validator == "propertyNames":
        allowed = error.validator_value.get("enum")
        return f"{error.instance!r} is not one of {allowed}" if allowed else error.message
    return error.message


def read_text(path: Path, where: str) -> str:
    """A YAML file's text: at most MAX_RECIPE_BYTES of UTF-8, else InvalidInput."""
    if not path.is_file():
        raise InvalidInput(where, "file not found")
    if path.stat().st_size > MAX_RECIPE_BYTES:
        raise InvalidInput(where, f"{path.stat().st_size} bytes; at most {MAX_RECIPE_BYTES}")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(where, f"not UTF-8 text (byte {error.start})") from None


def parse_yaml(text: str, where: str) -> tuple[Any, _Lines]:
    """(data, lines) of a YAML document read with the safe loader, within the bounds of
    `_Lines` (size of the expanded document, nesting, no recursive alias); InvalidInput
    naming the line otherwise."""
    lines = _Lines(text, where)
    try:
        return yaml.safe_load(text), lines
    except yaml.YAMLError as error:
        raise _yaml_problem(error, where) from None


def read_recipe(source: str | Path, text: str | None = None) -> RecipeText:
    """Parse a recipe file (or `text`, reported as `source`) into data with line numbers."""
    where = str(source)
    if text is None:
        if not Path(source).is_file():
            raise InvalidInput(where, "recipe file not found")
        text = read_text(Path(source), where)
    data, lines = parse_yaml(text, where)
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}:1", "a recipe is a YAML mapping (recipe: 1, source, outputs)")
    return RecipeText(data=data, text=text, where=where, lines=lines)
