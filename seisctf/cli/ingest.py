"""`seisctf ingest …`: raw archives -> zarr stores."""

from __future__ import annotations

import argparse

from seisctf.cli._parse import storage_options as _options


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add `ingest waveforms|das|quakeml|seisbench|stead` to `verbs`."""
    ingest = verbs.add_parser("ingest", help="raw archives -> zarr stores")
    ingest_kinds = ingest.add_subparsers(dest="kind", required=True)
    ingest_waveforms = ingest_kinds.add_parser(
        "waveforms",
        parents=[common],
        help="seismogram files (any obspy format) -> continuous store",
    )
    ingest_waveforms.add_argument(
        "sources",
        nargs="+",
        metavar="SRC",
        help="files, globs, folders, or fsspec URLs (s3://bucket/prefix/, with --storage-option)",
    )
    ingest_waveforms.add_argument("--out", required=True, help="store URL or path")
    ingest_waveforms.add_argument(
        "--inventory", nargs="+", action="extend", default=[], metavar="XML", help="StationXML"
    )
    ingest_waveforms.add_argument("--rate", type=float, help="resample to this rate, Hz")
    ingest_waveforms.add_argument(
        "--strict", action="store_true", help="any bad input file is fatal (exit 3)"
    )
    ingest_waveforms.add_argument(
        "--append",
        action="store_true",
        help="add new files to the complete store at --out (time axis grows; old chunks kept)",
    )
    ingest_waveforms.add_argument(
        "--remove-response",
        nargs="?",
        const="VEL",
        type=str.upper,
        choices=("VEL", "DISP", "ACC"),
        metavar="VEL|DISP|ACC",
        help="remove the instrument response (obspy; needs --inventory); output quantity "
        "(default VEL)",
    )
    ingest_waveforms.add_argument(
        "--pre-filt",
        default="auto",
        metavar="F1,F2,F3,F4",
        help="with --remove-response: cosine band corners, Hz, or 'none' (default: 0.005, "
        "0.01 Hz, 0.8 and 0.9 x the Nyquist frequency of the store's rate)",
    )
    ingest_waveforms.add_argument(
        "--water-level",
        default="60",
        metavar="DB",
        help="with --remove-response: water level, dB, or 'none' (default 60, obspy's)",
    )
    ingest_waveforms.set_defaults(run=_run_ingest_waveforms)
    ingest_das = ingest_kinds.add_parser(
        "das",
        parents=[common],
        help="DAS files (any format DASCore reads: PRODML, Silixa, Febus, OptoDAS, Terra15, "
        "DASDAE, ...) -> DAS store",
    )
    ingest_das.add_argument(
        "sources",
        nargs="+",
        metavar="SRC",
        help="files, globs, folders, or fsspec URLs (s3://bucket/prefix/, with --storage-option)",
    )
    ingest_das.add_argument("--out", required=True, help="store URL or path")
    ingest_das.add_argument(
        "--strict",
        action="store_true",
        help="any bad input file or differing time step / distance axis is fatal (exit 3)",
    )
    ingest_das.add_argument(
        "--append",
        action="store_true",
        help="add new files to the complete store at --out (time axis grows; old chunks kept)",
    )
    ingest_das.set_defaults(run=_run_ingest_das)
    ingest_quakeml = ingest_kinds.add_parser(
        "quakeml",
        parents=[common],
        help="event catalogue with picks (QuakeML or any obspy format) + continuous store or "
        "raw archive -> event-window store",
    )
    ingest_quakeml.add_argument("catalog", metavar="CATALOG", help="event catalogue file")
    ingest_quakeml.add_argument(
        "--archive",
        required=True,
        nargs="+",
        metavar="SRC",
        help="a continuous waveform store (ingest waveforms), or waveform files / folders / "
        "globs ingested first",
    )
    ingest_quakeml.add_argument("--out", required=True, help="event-window store URL or path")
    ingest_quakeml.add_argument("--window", type=float, default=60.0, help="window length, s")
    ingest_quakeml.add_argument(
        "--pre-arrival", type=float, default=10.0, help="window start before the first pick, s"
    )
    ingest_quakeml.add_argument(
        "--noise-windows", type=int, default=1, help="noise windows per station (pick-free)"
    )
    ingest_quakeml.add_argument(
        "--inventory", nargs="+", action="extend", default=[], metavar="XML",
        help="StationXML for a raw archive (station coordinates)",
    )  # fmt: skip
    ingest_quakeml.add_argument(
        "--scratch",
        help="continuous store a raw archive is ingested into (default: a temporary folder)",
    )
    ingest_quakeml.set_defaults(run=_run_ingest_quakeml)
    ingest_seisbench = ingest_kinds.add_parser(
        "seisbench",
        parents=[common],
        help="SeisBench-format dataset (metadata CSV + waveforms HDF5, chunked or not) -> "
        "event-window store",
    )
    ingest_seisbench.add_argument("folder", metavar="DIR", help="the dataset's folder")
    ingest_seisbench.add_argument("--out", required=True, help="event-window store URL or path")
    ingest_seisbench.add_argument(
        "--rate",
        type=float,
        help="store rate, Hz (default: the rate most traces have; others are resampled)",
    )
    _event_window_layout_options(ingest_seisbench)
    # Workers import SeisBench (and torch, ~4 s) while they start, not on their first task.
    ingest_seisbench.set_defaults(
        run=_run_ingest_seisbench,
        worker_modules=("seisbench.data", "seisctf.catalogs.seisbench_format"),
    )
    ingest_stead = ingest_kinds.add_parser(
        "stead",
        parents=[common],
        help="original STEAD files (merged.hdf5 + merged.csv) -> event-window store",
    )
    ingest_stead.add_argument("hdf5", metavar="HDF5", help="STEAD's waveform file")
    ingest_stead.add_argument("csv", metavar="CSV", help="STEAD's metadata file")
    ingest_stead.add_argument("--out", required=True, help="event-window store URL or path")
    _event_window_layout_options(ingest_stead)
    ingest_stead.set_defaults(run=_run_ingest_stead)
    groups["ingest"] = ingest_kinds


def _event_window_layout_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard-traces",
        type=int,
        metavar="N",
        help="windows per shard file (0: no sharding, one file per window; default: the "
        "largest power of two within 32 MiB, 256 for 3 x 6000 samples)",
    )
    parser.add_argument(
        "--uncompressed",
        action="store_true",
        help="store raw float32 windows (default: Blosc LZ4 with bit shuffle, the data codec)",
    )


def _run_ingest_waveforms(args: argparse.Namespace) -> None:
    from seisctf.recipes.ingest.waveforms import ingest_waveforms

    report = ingest_waveforms(
        args.sources,
        args.out,
        inventories=args.inventory,
        rate=args.rate,
        strict=args.strict,
        storage_options=_options(args),
        quiet=args.quiet,
        append=args.append,
        remove_response=args.remove_response,
        pre_filt=args.pre_filt,
        water_level=args.water_level,
    )
    for problem in report.problems:
        print(f"problem: {problem}")
    plan = report.plan
    verb = "up to date:" if report.up_to_date else "wrote"
    print(
        f"{verb} {args.out}: {len(plan.stations)} stations x {len(plan.channels)} channels x "
        f"{plan.n_time} samples at {plan.sampling_rate} Hz, {len(report.problems)} problem(s)"
    )


def _run_ingest_das(args: argparse.Namespace) -> None:
    from seisctf.recipes.ingest.das_files import ingest_das

    report = ingest_das(
        args.sources,
        args.out,
        strict=args.strict,
        storage_options=_options(args),
        append=args.append,
        quiet=args.quiet,
    )
    for problem in report.problems:
        print(f"problem: {problem}")
    for kind, spans in (("gap", report.gaps), ("overlap", report.overlaps)):
        for span in spans:
            print(f"{kind}: {span['samples']} samples from {span['start_time']}")
    plan = report.plan
    verb = "up to date:" if report.up_to_date else "wrote"
    print(
        f"{verb} {args.out}: {plan.axis.quantity} {plan.n_time} samples x "
        f"{plan.axis.n_distance} channels at {plan.axis.sampling_rate} Hz, {len(report.gaps)} "
        f"gap(s), {len(report.overlaps)} overlap(s), {len(report.problems)} problem(s)"
    )


def _run_ingest_quakeml(args: argparse.Namespace) -> None:
    from seisctf.recipes.ingest.quakeml_windows import ingest_quakeml

    report = ingest_quakeml(
        args.catalog,
        args.archive,
        args.out,
        window_s=args.window,
        pre_arrival_s=args.pre_arrival,
        noise_windows=args.noise_windows,
        inventories=args.inventory,
        scratch=args.scratch,
        storage_options=_options(args),
        quiet=args.quiet,
    )
    for problem in report.problems:
        print(f"problem: {problem}")
    print(
        f"wrote {args.out}: {report.n_earthquake} earthquake and {report.n_noise} noise "
        f"windows, {len(report.problems)} problem(s)"
    )


def _run_ingest_seisbench(args: argparse.Namespace) -> None:
    from seisctf.catalogs.seisbench_format import ingest_seisbench

    report = ingest_seisbench(
        args.folder,
        args.out,
        rate=args.rate,
        shard_traces=args.shard_traces,
        compress=not args.uncompressed,
        storage_options=_options(args),
        quiet=args.quiet,
    )
    print(
        f"wrote {args.out}: {report.n_traces} windows x {report.n_channels} channels x "
        f"{report.n_samples} samples at {report.sampling_rate_hz:g} Hz, "
        f"{report.n_resampled} resampled"
    )


def _run_ingest_stead(args: argparse.Namespace) -> None:
    from seisctf.recipes.ingest.stead import ingest_stead

    report = ingest_stead(
        args.hdf5,
        args.csv,
        args.out,
        shard_traces=args.shard_traces,
        compress=not args.uncompressed,
        storage_options=_options(args),
        quiet=args.quiet,
    )
    print(f"wrote {args.out}: {report.n_traces} windows x 3 channels x {report.n_samples} samples")
