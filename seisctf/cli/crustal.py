"""`seisctf synth crustal`: parametric 3D elastic simulations recorded on a surface grid."""

from __future__ import annotations

import argparse

from seisctf.cli._numbers import COUNT, COUNT_OR_ZERO, NON_NEGATIVE, POSITIVE
from seisctf.cli._output_size import override_option, refuse_oversize
from seisctf.cli._parse import generator_seed_options
from seisctf.cli.datasets import _run_synthesis
from seisctf.synth.output_sizes import crustal_size


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add the `crustal` kind to `synth` (registered by cli/datasets.py)."""
    groups["synth"].defer(lambda kinds: _add_crustal(kinds, common))


def _add_crustal(kinds, common: argparse.ArgumentParser) -> None:
    """`synth crustal` and its options (added when `synth` is chosen)."""
    crustal = kinds.add_parser("crustal", parents=[common], help=None)  # help: the registry's
    crustal.add_argument("--out", required=True, help="store URL or path")
    crustal.add_argument(
        "--grid", type=COUNT, default=94, help="sensors per side of the square surface grid (94)"
    )
    crustal.add_argument(
        "--sensor-spacing", type=POSITIVE, default=100.0, help="sensor spacing, m (100)"
    )
    crustal.add_argument(
        "--rate",
        dest="sampling_rate_hz",
        type=POSITIVE,
        default=100.0,
        help="output sampling rate, Hz",
    )
    crustal.add_argument(
        "--duration", dest="duration_s", type=POSITIVE, default=6.0, help="record length, s (6)"
    )
    crustal.add_argument(
        "--spacing",
        dest="spacing_m",
        type=POSITIVE,
        default=200.0,
        help="finite-difference grid spacing, m (200)",
    )
    crustal.add_argument("--depth", type=POSITIVE, default=6000.0, help="modelled depth, m (6000)")
    crustal.add_argument(
        "--time-step",
        type=POSITIVE,
        help="internal time step, s; must divide the sample interval and satisfy the CFL "
        "condition (default: the largest stable divisor)",
    )
    crustal.add_argument(
        "--parametric",
        type=COUNT_OR_ZERO,
        default=4,
        help="simulations of the extended parametric sweep (E13, E14; default 4; the announced "
        "round: 100); 0 with --initial-conditions 0 leaves the extended pairs out",
    )
    crustal.add_argument(
        "--initial-conditions",
        type=COUNT_OR_ZERO,
        default=4,
        help="simulations of the extended new-initial-conditions group (E15, E16; default 4; "
        "the announced round: 10)",
    )
    crustal.add_argument(
        "--perturbation", type=NON_NEGATIVE, default=0.05, help="velocity perturbation std (0.05)"
    )
    crustal.add_argument(
        "--correlation-length", type=POSITIVE, default=500.0, help="of the perturbations, m (500)"
    )
    crustal.add_argument(
        "--medium",
        choices=["von_karman", "gaussian"],
        default="von_karman",
        help="autocorrelation of the perturbations",
    )
    crustal.add_argument(
        "--events",
        type=NON_NEGATIVE,
        default=6.0,
        help="mean number of further events (aftershocks, background) per catalogue, besides "
        "the main event (6; 0: the main event alone)",
    )
    crustal.add_argument(
        "--ambient",
        type=NON_NEGATIVE,
        default=1.0e-5,
        help="RMS of the ambient wavefield's vertical velocity, m/s (1e-5; 0: none)",
    )
    generator_seed_options(crustal)
    override_option(crustal)
    crustal.set_defaults(run=_run_synth_crustal, check=_check_crustal)


def _crustal_options(args: argparse.Namespace) -> dict:
    return {
        "sensors": args.grid * args.grid,
        "sensor_spacing_m": args.sensor_spacing,
        "sampling_rate_hz": args.sampling_rate_hz,
        "duration_s": args.duration_s,
        "spacing_m": args.spacing_m,
        "depth_m": args.depth,
        "time_step_s": args.time_step,
        "parametric": args.parametric,
        "initial_conditions": args.initial_conditions,
        "perturbation_std": args.perturbation,
        "correlation_length_m": args.correlation_length,
        "medium": args.medium,
        "mean_other_events": args.events,
        "ambient_rms_m_s": args.ambient,
    }


def _check_crustal(args: argparse.Namespace) -> None:
    refuse_oversize([crustal_size(**_crustal_options(args))], args.out, args)


def _run_synth_crustal(args: argparse.Namespace) -> None:
    _run_synthesis(args, "crustal", **_crustal_options(args))
