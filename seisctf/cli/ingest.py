"""`seisctf ingest …`: raw archives -> zarr stores. One sub-command per ingest registered in
`seisctf.registry.INGESTS` (its `command`, `help` and plain ingest function `cli`); this module
adds each command's flags, checks its paths before the cluster and prints its report. The
commands of `COMMANDS` are parsed without loading the registry (it imports every ingest
module): it loads when another command is named, for `ingest --help`, and when one runs. An
ingest without flags here (`COMMANDS`) gets them from its options schema (`--name-with-dashes`
per option, `--out` for the store) and runs as its recipe source does: so a new ingest is one
module, its tests and its docs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from seisctf import conventions as cv
from seisctf.cli import _checks
from seisctf.cli._numbers import COUNT_OR_ZERO, NON_NEGATIVE, POSITIVE
from seisctf.cli._parse import Commands, store_location
from seisctf.cli._parse import storage_options as _options
from seisctf.errors import InvalidInput
from seisctf.plugins.schema import check_options
from seisctf.registry import INGESTS, Ingest
from seisctf.wording import counted


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add `ingest waveforms|das|quakeml|seisbench|stead` (every registered ingest) to `verbs`."""
    ingest = verbs.add_parser("ingest", help="raw archives -> zarr stores")
    ingest_kinds = ingest.add_subparsers(dest="kind", required=True)
    # The commands with flags here are added when `ingest` is chosen; the registry (loading it
    # imports every ingest module) only when another is chosen, the help is shown, or one runs.
    ingest_kinds.defer(lambda kinds: _add_commands(kinds, common))
    ingest_kinds.on_demand(lambda kinds: _add_registered(kinds, common))
    groups["ingest"] = ingest_kinds


def _add_commands(ingest_kinds: Commands, common: argparse.ArgumentParser) -> None:
    """The ingest commands of `COMMANDS`, in its order (their help comes with the registry)."""
    for command, (add_arguments, run, check) in COMMANDS.items():
        # help=None lists it in `ingest --help`, whose text the registry then gives.
        parser = ingest_kinds.add_parser(command, parents=[common], help=None)
        add_arguments(parser)
        parser.set_defaults(run=run, check=check)
    # Workers import h5py and TensorStore while they start, not on their first task; SeisBench
    # (and torch, ~4 s) only if a trace needs its reader (formats.seisbench.seisbench_blocks).
    ingest_kinds.choices["seisbench"].set_defaults(
        worker_modules=("h5py", "tensorstore", "seisctf.formats.seisbench.seisbench_format")
    )


def _add_registered(ingest_kinds: Commands, common: argparse.ArgumentParser) -> None:
    """Every registered ingest: the help of those in `COMMANDS`, and a command with flags from
    its options schema for each other one (by name)."""
    help_of = {choice.dest: choice for choice in ingest_kinds._choices_actions}
    others = []
    for entry in INGESTS.entries():
        command = entry.command or entry.name
        if command in ingest_kinds.choices:
            if command in help_of:
                help_of[command].help = entry.help or entry.summary
        else:
            others.append((command, entry))
    for command, entry in sorted(others, key=lambda item: item[0]):
        parser = ingest_kinds.add_parser(
            command, parents=[common], help=entry.help or entry.summary
        )
        schema_arguments(entry)(parser)
        parser.set_defaults(run=_run_from_schema, check=_check_from_schema, ingest_entry=entry)


def _registered(command: str) -> Callable:
    """The plain ingest function (`cli`) of the registered ingest whose command is `command`:
    for a command of `COMMANDS`, seisctf's own entry point (`BUILT_IN`), imported alone (the
    others' modules cost the client's start: `ingest das` imports xarray, 0.3 s); else the
    first, by name, of every ingest."""
    name = BUILT_IN.get(command)
    if name is not None and name in INGESTS:
        entry = INGESTS[name]
        if entry.command == command and entry.cli is not None:
            return entry.cli
    for entry in INGESTS.entries():
        if (entry.command or entry.name) == command and entry.cli is not None:
            return entry.cli
    raise InvalidInput(f"ingest {command}", "no registered ingest has this command")


def _sources_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sources",
        nargs="+",
        metavar="SRC",
        help="files, globs, folders, or fsspec URLs (s3://bucket/prefix/, with --storage-option)",
    )
    parser.add_argument("--out", required=True, help="store URL or path")


def _append_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--append",
        action="store_true",
        help="add new files to the complete store at --out (time axis grows; old chunks kept)",
    )


def _waveforms_arguments(parser: argparse.ArgumentParser) -> None:
    _sources_arguments(parser)
    parser.add_argument(
        "--inventory", nargs="+", action="extend", default=[], metavar="XML", help="StationXML"
    )
    parser.add_argument("--rate", type=POSITIVE, help="resample to this rate, Hz")
    parser.add_argument(
        "--strict", action="store_true", help="any bad input file is fatal (exit 3)"
    )
    _append_argument(parser)
    parser.add_argument(
        "--remove-response",
        nargs="?",
        const="VEL",
        type=str.upper,
        choices=("VEL", "DISP", "ACC"),
        metavar="VEL|DISP|ACC",
        help="remove the instrument response (obspy; needs --inventory); output quantity "
        "(default VEL)",
    )
    parser.add_argument(
        "--pre-filt",
        default="auto",
        metavar="F1,F2,F3,F4",
        help="with --remove-response: cosine band corners, Hz, or 'none' (default: 0.005, "
        "0.01 Hz, 0.8 and 0.9 x the Nyquist frequency of the store's rate)",
    )
    parser.add_argument(
        "--water-level",
        default="60",
        metavar="DB",
        help="with --remove-response: water level, dB, or 'none' (default 60, obspy's)",
    )


def _das_arguments(parser: argparse.ArgumentParser) -> None:
    _sources_arguments(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="any bad input file or differing time step / distance axis is fatal (exit 3)",
    )
    _append_argument(parser)


def _quakeml_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("catalog", metavar="CATALOG", help="event catalogue file")
    parser.add_argument(
        "--archive",
        required=True,
        nargs="+",
        metavar="SRC",
        help="a continuous waveform store (ingest waveforms), or waveform files / folders / "
        "globs ingested first",
    )
    parser.add_argument("--out", required=True, help="event-window store URL or path")
    parser.add_argument(
        "--window", dest="window_s", type=POSITIVE, default=60.0, help="window length, s"
    )
    parser.add_argument(
        "--pre-arrival",
        dest="pre_arrival_s",
        type=NON_NEGATIVE,
        default=10.0,
        help="window start before the first pick, s",
    )
    parser.add_argument(
        "--noise-windows",
        type=COUNT_OR_ZERO,
        default=1,
        help="noise windows per station (pick-free)",
    )
    parser.add_argument(
        "--inventory", nargs="+", action="extend", default=[], metavar="XML",
        help="StationXML for a raw archive (station coordinates)",
    )  # fmt: skip
    parser.add_argument(
        "--scratch",
        help="continuous store a raw archive is ingested into (default: a temporary folder)",
    )


def _seisbench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="DIR", help="the dataset's folder")
    parser.add_argument("--out", required=True, help="event-window store URL or path")
    parser.add_argument(
        "--rate",
        type=POSITIVE,
        help="store rate, Hz (default: the rate most traces have; others are resampled)",
    )
    _event_window_layout_options(parser)


def _stead_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hdf5", metavar="HDF5", help="STEAD's waveform file")
    parser.add_argument("csv", metavar="CSV", help="STEAD's metadata file")
    parser.add_argument("--out", required=True, help="event-window store URL or path")
    _event_window_layout_options(parser)


def _event_window_layout_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard-traces",
        type=COUNT_OR_ZERO,
        metavar="N",
        help="windows per shard file (0: no sharding, one file per window; default: the "
        "largest power of two within 32 MiB, 256 for 3 x 6000 samples)",
    )
    parser.add_argument(
        "--uncompressed",
        action="store_true",
        help="store raw float32 windows (default: Blosc LZ4 with bit shuffle, the data codec)",
    )


def _print_problems(report: Any) -> int:
    """Print a report's problem lines (`problems`: the first of `n_problems`, if it says) and
    how many more the store holds; their number."""
    found = getattr(report, "n_problems", len(report.problems))
    for problem in report.problems:
        print(f"problem: {problem}")
    if found > len(report.problems):
        print(
            f"problem: and {found - len(report.problems)} more, every one in the store's "
            f"`{cv.PROBLEMS_GROUP}` group (`problem_lines.read_problems`)"
        )
    return int(found)


def _run_ingest_waveforms(args: argparse.Namespace) -> None:
    report = _registered(args.kind)(
        args.sources,
        store_location(args, args.out),
        inventories=args.inventory,
        rate=args.rate,
        strict=args.strict,
        quiet=args.quiet,
        append=args.append,
        remove_response=args.remove_response,
        pre_filt=args.pre_filt,
        water_level=args.water_level,
    )
    found = _print_problems(report)
    plan = report.plan
    verb = "up to date:" if report.up_to_date else "wrote"
    print(
        f"{verb} {args.out}: {counted(len(plan.stations), 'station')} x "
        f"{counted(len(plan.channels), 'channel')} x "
        f"{plan.n_time} samples at {plan.sampling_rate} Hz, {found} problem(s)"
    )


def _run_ingest_das(args: argparse.Namespace) -> None:
    report = _registered(args.kind)(
        args.sources,
        store_location(args, args.out),
        strict=args.strict,
        append=args.append,
        quiet=args.quiet,
    )
    problems = _print_problems(report)
    for kind, spans, found in (
        ("gap", report.gaps, report.n_gaps),
        ("overlap", report.overlaps, report.n_overlaps),
    ):
        for span in spans:
            print(f"{kind}: {span['samples']} samples from {span['start_time']}")
        if found > len(spans):
            print(
                f"{kind}: and {found - len(spans)} more, every one in the store's `{kind}s` "
                "group (`das_spans.read_spans`)"
            )
    plan = report.plan
    verb = "up to date:" if report.up_to_date else "wrote"
    print(
        f"{verb} {args.out}: {plan.axis.quantity} {counted(plan.n_time, 'sample')} x "
        f"{counted(plan.axis.n_distance, 'channel')} at {plan.axis.sampling_rate} Hz, "
        f"{report.n_gaps} gap(s), {report.n_overlaps} overlap(s), "
        f"{problems} problem(s)"
    )


def _run_ingest_quakeml(args: argparse.Namespace) -> None:
    report = _registered(args.kind)(
        args.catalog,
        args.archive,
        store_location(args, args.out),
        window_s=args.window_s,
        pre_arrival_s=args.pre_arrival_s,
        noise_windows=args.noise_windows,
        inventories=args.inventory,
        scratch=args.scratch,
        quiet=args.quiet,
    )
    for problem in report.problems:
        print(f"problem: {problem}")
    print(
        f"wrote {args.out}: {report.n_earthquake} earthquake and {report.n_noise} noise "
        f"windows, {len(report.problems)} problem(s)"
    )
    print(f"catalogue: {report.catalog}")


def _run_ingest_seisbench(args: argparse.Namespace) -> None:
    report = _registered(args.kind)(
        args.folder,
        store_location(args, args.out),
        rate=args.rate,
        shard_traces=args.shard_traces,
        compress=not args.uncompressed,
        quiet=args.quiet,
    )
    print(
        f"wrote {args.out}: {counted(report.n_traces, 'window')} x "
        f"{counted(report.n_channels, 'channel')} x "
        f"{report.n_samples} samples at {report.sampling_rate_hz:g} Hz, "
        f"{report.n_resampled} resampled"
    )
    print(f"catalogue: {report.catalog}")


def _run_ingest_stead(args: argparse.Namespace) -> None:
    report = _registered(args.kind)(
        args.hdf5,
        args.csv,
        store_location(args, args.out),
        shard_traces=args.shard_traces,
        compress=not args.uncompressed,
        quiet=args.quiet,
    )
    windows = counted(report.n_traces, "window")
    print(f"wrote {args.out}: {windows} x 3 channels x {report.n_samples} samples")
    print(f"catalogue: {report.catalog}")


_JSON_TYPES = {"integer": int, "number": float, "string": str}


def schema_arguments(entry: Ingest) -> Callable[[argparse.ArgumentParser], None]:
    """Flags from an ingest's options schema: `--name-with-dashes` per option (a boolean a
    switch, an array several values), the schema's required ones required, and `--out`."""

    def add(parser: argparse.ArgumentParser) -> None:
        required = set(entry.options.get("required", ()))
        for name, schema in entry.options.get("properties", {}).items():
            if name == "store":  # the store is --out
                continue
            flag, kind = _flag(name), schema.get("type")
            meaning = schema.get("description") or f"the ingest's option {name!r} ({kind})"
            if kind == "boolean":
                parser.add_argument(
                    flag, dest=name, action="store_true", default=None, help=meaning
                )
                continue
            values = schema.get("items", {}) if kind == "array" else schema
            parser.add_argument(
                flag,
                dest=name,
                required=name in required,
                nargs="+" if kind == "array" else None,
                type=_JSON_TYPES.get(values.get("type"), str),
                help=meaning,
            )
        parser.add_argument("--out", required=True, help="store URL or path")

    return add


def _schema_options(args: argparse.Namespace) -> dict:
    """The options given as flags of an ingest whose flags come from its options."""
    entry: Ingest = args.ingest_entry
    return {
        name: getattr(args, name)
        for name in entry.options.get("properties", {})
        if name != "store" and getattr(args, name, None) is not None
    }


def _check_from_schema(args: argparse.Namespace) -> None:
    """The flags' values against the ingest's options (bounds, types), before the cluster."""
    check_options(args.ingest_entry.options, _schema_options(args), _flag)


def _flag(option: str) -> str:
    """The flag `schema_arguments` makes of an option."""
    return "--" + option.replace("_", "-")


def _run_from_schema(args: argparse.Namespace) -> None:
    """Run an ingest from its schema's flags as its recipe source: into the store at --out."""
    from seisctf.plugins.context import BuildContext

    entry: Ingest = args.ingest_entry
    options = _schema_options(args)
    context = BuildContext(storage_options=_options(args), quiet=args.quiet, source_url=args.out)
    dataset = entry.function(context, **options)
    sizes = " x ".join(f"{size} {dim}" for dim, size in dataset.sizes.items())
    print(f"wrote {args.out}: {', '.join(dataset.data_vars)} ({sizes})")


def _check_sources(args: argparse.Namespace) -> None:
    """Local sources exist (a glob matches something); so do local inventories."""
    _checks.sources(args.sources)
    for inventory in getattr(args, "inventory", ()):
        _checks.existing(inventory, kind="file")


def _check_quakeml(args: argparse.Namespace) -> None:
    _checks.existing(args.catalog, kind="file")
    _checks.sources(args.archive)
    for inventory in args.inventory:
        _checks.existing(inventory, kind="file")


def _check_seisbench(args: argparse.Namespace) -> None:
    _checks.existing(args.folder, kind="folder")


def _check_stead(args: argparse.Namespace) -> None:
    _checks.existing(args.hdf5, kind="file")
    _checks.existing(args.csv, kind="file")


# The entry point (`seisctf.ingests`, pyproject.toml) of each command of COMMANDS.
BUILT_IN = {"waveforms": "waveform_archive", "das": "das_files", "quakeml": "quakeml",
            "seisbench": "seisbench", "stead": "stead"}  # fmt: skip
# Each ingest command (INGESTS' `command`): its flags, how it runs and its check before the
# cluster, in `seisctf ingest`'s order.
COMMANDS: dict[str, tuple[Callable, Callable, Callable]] = {
    "waveforms": (_waveforms_arguments, _run_ingest_waveforms, _check_sources),
    "das": (_das_arguments, _run_ingest_das, _check_sources),
    "quakeml": (_quakeml_arguments, _run_ingest_quakeml, _check_quakeml),
    "seisbench": (_seisbench_arguments, _run_ingest_seisbench, _check_seisbench),
    "stead": (_stead_arguments, _run_ingest_stead, _check_stead),
}
