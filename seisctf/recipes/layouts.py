"""CTF bundle layouts as data: the sizes of a bundle's windows (`Layout`), the named ones and
layout YAML files, parsed once per build.

A recipe names its layout (`splits.ctf.layout`); the engine parses it here and hands the
`Layout` to what needs its sizes (a synthetic source's duration or slots, the bundle output).
What each array of a bundle takes from a layout is `pipeline.bundles.layouts`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from seisctf.errors import InvalidInput
from seisctf.recipes.schema import parse_yaml, read_text


@dataclass(frozen=True)
class Layout:
    name: str = "seismo"
    train_steps: int = 2000
    few_start: int = 1500
    few_steps: int = 500
    forecast_start: int = 2000
    forecast_steps: int = 1000
    k_short: int = 20
    k_long: int = 20
    modes: int = 100
    noise_medium: float = 0.2
    noise_high: float = 0.5
    normalisation_floor: float = 0.1
    validation_fraction: float = 0.2

    @property
    def required_steps(self) -> int:
        return max(
            self.forecast_start + self.forecast_steps,
            self.train_steps,
            self.few_start + self.few_steps,
        )

    def as_dict(self) -> dict:
        return asdict(self)


LAYOUTS = {
    "seismo": Layout("seismo"),
    "das": Layout("das"),
    "crustal": Layout(
        "crustal",
        train_steps=500,
        few_start=300,
        few_steps=200,
        forecast_start=500,
        forecast_steps=100,
    ),
}


def load_layout(name_or_path: str | None) -> Layout:
    """A named layout or a YAML file with Layout fields (unknown keys are an error)."""
    if not name_or_path:
        return LAYOUTS["seismo"]
    if name_or_path in LAYOUTS:
        return LAYOUTS[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise InvalidInput(
            f"layout {name_or_path!r}", f"not one of {sorted(LAYOUTS)} nor a YAML file"
        )
    values = parse_yaml(read_text(path, str(path)), str(path))[0] or {}
    known = {field.name: field.type for field in fields(Layout)}
    if not isinstance(values, dict):
        raise InvalidInput(str(path), f"a layout is a YAML mapping of some of {sorted(known)}")
    unknown = sorted(str(key) for key in set(values) - set(known))
    if unknown:
        raise InvalidInput(
            str(path), f"unknown layout keys {unknown}; expected some of {sorted(known)}"
        )
    for key, value in values.items():
        _check_layout_value(str(path), key, known[key], value)
    return Layout(**{"name": path.stem, **values})


def _check_layout_value(what: str, key: str, kind: str, value: object) -> None:
    """A layout file's value: text for `name`, whole numbers (at least 1 for counts of steps,
    rows and modes; starts from 0) and finite non-negative fractions."""
    if kind == "str":
        valid, expected = isinstance(value, str) and bool(value), "a name"
    elif kind == "int":
        least = 0 if key.endswith("_start") else 1
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= least
        expected = f"a whole number >= {least}"
    else:
        valid = isinstance(value, int | float) and not isinstance(value, bool)
        valid = valid and math.isfinite(value) and value >= 0
        expected = "a finite number >= 0"
    if not valid:
        raise InvalidInput(what, f"{key}: expected {expected}, got {value!r}")
