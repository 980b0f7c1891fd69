"""The output size `seisctf synth` and `seisctf demo` check before any work equals the bytes of
the data variables each generator returns (its lazy dataset, built, not computed), for several
sizes of each source; the estimates' defaults are the generators'."""

from __future__ import annotations

import inspect

import pytest

from seisctf.plugins.context import BuildContext
from seisctf.plugins.layouts import LAYOUTS
from seisctf.registry import SYNTHS
from seisctf.synth.crustal.sweep import crustal_store
from seisctf.synth.das_record import synthetic_das_record
from seisctf.synth.output_sizes import SIZES, human_bytes, source_size

CASES = [
    ("synthetic_global", {"sensors": 7, "duration_s": 13.0, "sampling_rate_hz": 1.0}, None),
    ("synthetic_das", {"channels": 3}, None),
    ("synthetic_das", {"channels": 4, "sampling_rate_hz": 10.0, "ctf_rate_hz": 2.0}, "crustal"),
    ("synthetic_crustal", {"sensors": 4}, None),
    (
        "synthetic_crustal",
        {"sensors": 9, "parametric": 0, "initial_conditions": 0, "duration_s": 0.37},
        None,
    ),
    ("synthetic_crustal", {"sensors": 4, "parametric": 3, "initial_conditions": 2}, "seismo"),
]


@pytest.mark.parametrize(("source", "options", "layout"), CASES)
def test_the_estimate_is_the_bytes_the_generator_returns(source, options, layout):
    layout = LAYOUTS[layout] if layout else None
    dataset = SYNTHS[source].function(BuildContext(layout=layout), seed=1, **options)
    written = sum(variable.nbytes for variable in dataset.data_vars.values())
    assert source_size(source, options, layout).bytes == written


# Where each generator's defaults live: its registered function, then what it passes the other
# options to (the first that declares an option gives its default).
DEFAULTS_OF = {
    "synthetic_global": [SYNTHS["synthetic_global"].function],
    "synthetic_das": [synthetic_das_record],
    "synthetic_crustal": [SYNTHS["synthetic_crustal"].function, crustal_store],
}


@pytest.mark.parametrize("source", sorted(SIZES))
def test_the_estimates_defaults_are_the_generators(source):
    estimate = inspect.signature(SIZES[source]).parameters
    defaults: dict = {}
    for function in DEFAULTS_OF[source]:
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.default is not parameter.empty:
                defaults.setdefault(name, parameter.default)
    compared = [name for name in estimate if name in defaults and name != "layout"]
    assert len(compared) >= 2
    for name in compared:
        assert estimate[name].default == defaults[name], name


def test_sizes_read_in_decimal_units():
    assert human_bytes(12 * 10**12) == "12.0 TB"
    assert human_bytes(245_760_000) == "245.8 MB"
    assert human_bytes(999) == "999 bytes"
