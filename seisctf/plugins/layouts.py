"""CTF bundle layouts as data: the sizes of a bundle's windows (`Layout`), the named ones and
layout YAML files, parsed once per build.

A recipe names its layout (`splits.ctf.layout`); the engine parses it here and hands the
`Layout` to what needs its sizes (a synthetic source's duration or slots, the bundle output).

What each array of a bundle takes from a layout (`Window`, the pair specs below): which
realisation, time window and noise level each array comes from.

A layout fixes shapes only; the sensors (space axis) are whatever the wavefield store holds.
`seismo` follows the published global dataset (1 s steps): training matrices 2000 steps,
few-snapshot and burn-in matrices 500 steps starting at 1500, forecasts 1000 steps from 2000,
reconstructions over the 2000 training steps. `das` is the same with the fibre's channels: a
DAS store reaches it through `das_wavefield.das_wavefield` (ten guarded slots, each decimated
5 Hz → 1 Hz with the causal anti-alias filter; sensors in fibre order). `crustal` follows the
published crustal dataset (surface grid, 0.01 s steps at the default 100 Hz): training matrices 500
steps, few-snapshot and burn-in matrices 200 steps from 300, forecasts 100 steps from 500,
reconstructions over the 500 training steps.

Extended pairs (any layout; built when the wavefield holds realisations with
`conventions.EXTENDED_ROLES`): pair 10 trains on the `sweep_train` simulations' training windows
(X11train …, by parameter value) with the `sweep_test` simulation's few-snapshot window as burn-in
and forecasts its forecast window (X10test); pair 11 likewise with `initial_train` and
`initial_test` (X11test). Each is its own normalisation group, its burn-in normalised with its
training constants, as pairs 8 and 9.

Noise levels are white Gaussian noise whose standard deviation is a fraction of each trace's RMS
over the same window of the clean field: medium 0.2 (SNR 14 dB), high 0.5 (SNR 6 dB). Few-snapshot
noisy data (X5train) uses the medium level.

Validation: every pair also gets a public target `X{id}val`, the last `validation_fraction` (0.2)
of the rows of its most recent input (at least k_short and k_long rows), for local tuning.

Normalisation: each array is divided, per sensor, by the RMS of its group's public arrays (one
group per independent realisation; the parametric group shares one set), floored at
`normalisation_floor` (0.1) × the median sensor RMS, so traces a wavefront reaches only in the
withheld window are not amplified without bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TypeVar

from seisctf.conventions import SEGMENT_ROLES, extended_names
from seisctf.errors import InvalidInput
from seisctf.plugins.schema import parse_yaml, read_text
from seisctf.signal.filter_design import guard_steps
from seisctf.wording import counted


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
    known = {
        field.name: field.type if isinstance(field.type, str) else field.type.__name__
        for field in fields(Layout)
    }
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
        valid = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        )
        expected = "a finite number >= 0"
    if not valid:
        raise InvalidInput(what, f"{key}: expected {expected}, got {value!r}")


T = TypeVar("T")


@dataclass(frozen=True)
class Window:
    """Where one bundle array comes from: realisation role (and index among equal roles),
    first time step, number of steps, and the noise level name (None for clean)."""

    role: str
    start: int
    steps: int
    noise: str | None = None
    role_index: int = 0

    @property
    def stop(self) -> int:
        return self.start + self.steps


# Roles whose arrays are burn-ins: normalised with their group's training constants, not part of
# them.
BURN_IN_ROLES = ("param_interp", "param_extrap", "sweep_test", "initial_test")


def array_windows(layout: Layout, n_sweep: int = 0, n_initial: int = 0) -> dict[str, Window]:
    """The window of every public (X*train) and truth (X*test) array of the bundle; with the
    extended pairs' arrays when `n_sweep` / `n_initial` (their training simulations) are given."""
    train = (0, layout.train_steps)
    few = (layout.few_start, layout.few_steps)
    forecast = (layout.forecast_start, layout.forecast_steps)
    extended: dict[str, Window] = {}
    if n_sweep or n_initial:
        names = extended_names(n_sweep, n_initial)
        for group, training, burn_in, test in (
            ("sweep", names.sweep_train, names.sweep_burn_in, "X10test"),
            ("initial", names.initial_train, names.initial_burn_in, "X11test"),
        ):
            for index, name in enumerate(training):
                extended[name] = Window(f"{group}_train", *train, role_index=index)
            extended[burn_in] = Window(f"{group}_test", *few)
            extended[test] = Window(f"{group}_test", *forecast)
    core = {
        "X1train": Window("forecast", *train),
        "X2train": Window("noise_medium", *train, noise="noise_medium"),
        "X3train": Window("noise_high", *train, noise="noise_high"),
        "X4train": Window("few_clean", *few),
        "X5train": Window("few_noisy", *few, noise="noise_medium"),
        "X6train": Window("param_train", *train, role_index=0),
        "X7train": Window("param_train", *train, role_index=1),
        "X8train": Window("param_train", *train, role_index=2),
        "X9train": Window("param_interp", *few),
        "X10train": Window("param_extrap", *few),
        "X1test": Window("forecast", *forecast),
        "X2test": Window("noise_medium", *train),
        "X3test": Window("noise_medium", *forecast),
        "X4test": Window("noise_high", *train),
        "X5test": Window("noise_high", *forecast),
        "X6test": Window("few_clean", *forecast),
        "X7test": Window("few_noisy", *forecast),
        "X8test": Window("param_interp", *forecast),
        "X9test": Window("param_extrap", *forecast),
    }
    return core | extended


def normalisation_group(role: str) -> str:
    """Arrays of one group share per-sensor normalisation constants (all parametric roles share;
    so do the sweep's and the initial conditions' roles)."""
    for group in ("param", "sweep", "initial"):
        if role.startswith(group + "_"):
            return group
    return role


def check_layout(layout: Layout, n_time: int, n_space: int, what: str) -> None:
    """Refuse a layout the wavefield cannot fill or whose scores cannot be computed."""
    if layout.required_steps > n_time:
        raise InvalidInput(
            what,
            f"has {n_time} time steps; layout {layout.name!r} needs {layout.required_steps}"
            + time_steps_note(n_time, n_space),
        )
    if (
        not 0 < layout.k_short <= layout.forecast_steps
        or not 0 < layout.k_long <= layout.forecast_steps
    ):
        raise InvalidInput(
            f"layout {layout.name!r}", f"k_short and k_long must be in 1..{layout.forecast_steps}"
        )
    max_modes = n_space - n_space // 2
    if not 0 < layout.modes <= max_modes:
        raise InvalidInput(
            f"layout {layout.name!r}",
            f"modes={layout.modes} but {n_space} sensors "
            f"give only {max_modes} bins from zero frequency upward"
            + time_steps_note(n_time, n_space),
        )


# --- what a layout needs of a record, and which shipped layout a record supports ----------------

# Phrases of the errors that say a record does not fit a layout (too short, too few stations or
# sensors): `--layout auto` then tries the next smaller shipped layout.
MISFIT_PHRASES = ("too short for layout", "needs at least", "time steps; layout", "bins from zero")


@dataclass(frozen=True)
class Needs:
    """What `layout` needs of a continuous record (archive or DAS store) to become a bundle:
    `traces` gap-free stations or channels (2 · modes − 1, the long-time score's), and ten
    slots of `guard` + `steps` CTF samples (the guard: the causal filter's warm-up from the
    record's rate to the CTF rate)."""

    layout: Layout
    traces: int
    steps: int
    guard: int

    @property
    def samples(self) -> int:
        """CTF samples of the whole record: ten guarded slots."""
        return len(SEGMENT_ROLES) * (self.guard + self.steps)


def needs(layout: Layout, source_rate_hz: float, sampling_rate_hz: float = 1.0) -> Needs:
    """What `layout` needs of a record sampled at `source_rate_hz`, made into a CTF at
    `sampling_rate_hz`."""
    steps = layout.required_steps
    guard = guard_steps(source_rate_hz, sampling_rate_hz, steps)
    return Needs(layout, traces_needed(layout), steps, guard)


def traces_needed(layout: Layout) -> int:
    """Gap-free stations (or DAS channels) `layout` needs: 2 · modes − 1, so that the long-time
    score has `modes` wavenumbers from zero upward."""
    return max(1, 2 * layout.modes - 1)


# Where a user learns to write a layout for a network smaller than the shipped layouts need.
SMALL_NETWORK_HELP = 'README: "A benchmark from a small network"'


def small_network_note(n_traces: int, trace_noun: str) -> str:
    """For a record with too few stations for a layout: the `modes` of a layout file that
    `n_traces` of them support (none for 0)."""
    if n_traces < 1:
        return ""
    return (
        f"; for {counted(n_traces, trace_noun)}, write a layout file with `modes: "
        f"{(n_traces + 1) // 2}` or less (a layout needs 2 · modes − 1 {trace_noun}s) and give "
        f"--layout FILE.yaml ({SMALL_NETWORK_HELP})"
    )


def check_trace_count(layout: Layout, n_traces: int, trace_noun: str, what: str) -> None:
    """Refuse a record with fewer stations (DAS channels) than `layout` needs, from its
    metadata alone: before any gap check reads its data."""
    needed = traces_needed(layout)
    if n_traces < needed:
        raise InvalidInput(
            what,
            f"has {counted(n_traces, trace_noun)}, and layout {layout.name!r} (modes="
            f"{layout.modes}) needs at least {needed} gap-free ones"
            + small_network_note(n_traces, trace_noun),
        )


def shipped_by_size() -> list[Layout]:
    """The shipped layouts, largest first (by the steps they need; equal sizes by name)."""
    return sorted(LAYOUTS.values(), key=lambda layout: (-layout.required_steps, layout.name))


def describe_needs(need: Needs, sampling_rate_hz: float) -> str:
    """'seismo: 199 gap-free stations, 10 x (39 + 3000) = 30390 samples at 1 Hz (8.44 h)'."""
    hours = need.samples / sampling_rate_hz / 3600
    return (
        f"{need.layout.name}: {need.traces} gap-free stations, {len(SEGMENT_ROLES)} x "
        f"({need.guard} + {need.steps}) = {need.samples} samples at {sampling_rate_hz:g} Hz "
        f"({hours:.3g} h)"
    )


def length_note(n_samples: int, source_rate_hz: float, sampling_rate_hz: float) -> str:
    """For a record too short: the largest shipped layout `n_samples` CTF samples hold, or what
    the smallest needs."""
    fitting = [
        need
        for layout in shipped_by_size()
        if (need := needs(layout, source_rate_hz, sampling_rate_hz)).samples <= n_samples
    ]
    if fitting:
        return (
            f"; the largest shipped layout it is long enough for is {fitting[0].layout.name!r} "
            f"(--layout {fitting[0].layout.name}, or --layout auto)"
        )
    smallest = needs(shipped_by_size()[-1], source_rate_hz, sampling_rate_hz)
    return f"; no shipped layout fits: the smallest, {describe_needs(smallest, sampling_rate_hz)}"


def stations_note(layout: Layout, source_rate_hz: float, sampling_rate_hz: float) -> str:
    """For a record with too few gap-free traces: the shipped layouts with shorter slots (where
    more traces may be gap-free throughout), or that none is shorter."""
    shorter = [
        other.name
        for other in shipped_by_size()
        if other.required_steps < layout.required_steps and other.modes <= layout.modes
    ]
    if shorter:
        return (
            f"; shorter slots may keep more of them: shipped layout(s) {shorter} "
            "(--layout auto tries each, largest first)"
        )
    return "; no shipped layout needs as few stations over shorter slots"


def time_steps_note(n_time: int, n_space: int) -> str:
    """For a wavefield store that does not fit: the largest shipped layout it does fit."""
    for other in shipped_by_size():
        if other.required_steps <= n_time and 0 < other.modes <= n_space - n_space // 2:
            return f"; the largest shipped layout it fits is {other.name!r} (or --layout auto)"
    return "; no shipped layout fits it"


def does_not_fit(error: InvalidInput, layout: Layout) -> bool:
    """Whether `error` says that the record does not fit `layout` (rather than anything else)."""
    text = str(error)
    return f"layout {layout.name!r}" in text and any(p in text for p in MISFIT_PHRASES)


def largest_supported(
    build: Callable[[Layout], T], candidates: list[Layout], what: str
) -> tuple[Layout, T]:
    """`--layout auto`: the first of `candidates` (largest first) for which `build(layout)`
    succeeds, with its result. A candidate the record does not fit (`does_not_fit`) is passed
    over; any other error is raised. None fitting: InvalidInput listing why each did not."""
    reasons, advice = [], []
    for layout in candidates:
        try:
            return layout, build(layout)
        except InvalidInput as error:
            if not does_not_fit(error, layout):
                raise
            first, *notes = error.problem.split("; ")
            reasons.append(f"{layout.name!r}: {first}")
            advice = [note for note in notes if SMALL_NETWORK_HELP in note]
    # The last (smallest) layout's advice for a small network, if its stations were too few.
    problem = "no shipped layout fits (--layout auto): " + "; ".join(reasons + advice)
    raise InvalidInput(what, problem)


def auto_candidates(is_das: bool) -> list[Layout]:
    """The shipped layouts `--layout auto` tries, largest first; of layouts of equal sizes the
    one made for the store's kind (`das` for a DAS store, else `seismo`)."""
    unwanted = "seismo" if is_das else "das"
    return [layout for layout in shipped_by_size() if layout.name != unwanted]
