"""The command line: `seisctf <verb> …`, thin over the library (parse, get a client, call, print).

Exit codes: 0 success, 2 usage error (argparse), 3 invalid input (InvalidInput, one line, no
traceback), 1 anything else.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
from pathlib import Path

from seisctf.errors import InvalidInput

EXIT_INVALID_INPUT = 3
# What scoring tasks import on a worker: imported while the embedded workers start.
SCORING_WORKER_MODULES = ("seisctf.scoring.ctf", "seisctf.commitment", "scipy.sparse.linalg")


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--scheduler",
        help="address of a running Dask scheduler "
        "(default: $SEISCTF_SCHEDULER, else an embedded LocalCluster)",
    )
    common.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option, repeatable (e.g. endpoint_url=http://…)",
    )
    common.add_argument("--quiet", action="store_true", help="no progress output")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="seisctf", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)

    demo = verbs.add_parser("demo", parents=[common], help="the main job on the embedded default")
    demo.add_argument("--workdir", default="seisctf-demo")
    demo.add_argument("--dataset", default="global", choices=["global", "das", "crustal", "all"])
    demo.add_argument(
        "--secret",
        help="organiser secret (default: $SEISCTF_SECRET, else the published demo secret)",
    )
    demo.add_argument(
        "--sensors",
        type=int,
        help="number of sensors (default: 2048 for global, 256 DAS channels for das)",
    )
    demo.add_argument(
        "--duration", type=float, default=3000.0, help="seconds of wavefield (global only)"
    )
    demo.add_argument("--layout", help="layout name or YAML file (default seismo)")
    demo.set_defaults(run=_run_demo)

    synth = verbs.add_parser("synth", help="offline synthetic wavefields")
    synth_kinds = synth.add_subparsers(dest="kind", required=True)
    synth_global = synth_kinds.add_parser(
        "global", parents=[common], help="global wavefield on a Fibonacci sphere"
    )
    synth_global.add_argument("--out", required=True, help="store URL or path")
    synth_global.add_argument("--sensors", type=int, default=2048)
    synth_global.add_argument("--duration", type=float, default=3000.0, help="seconds")
    synth_global.add_argument("--rate", type=float, default=1.0, help="sampling rate, Hz")
    synth_global.add_argument(
        "--seed",
        type=int,
        help="generator seed (default: derived from --secret/$SEISCTF_SECRET, else 0)",
    )
    synth_global.add_argument("--secret", help="organiser secret to derive the seed from")
    synth_global.set_defaults(run=_run_synth_global)
    synth_das = synth_kinds.add_parser(
        "das",
        parents=[common],
        help="ocean-bottom DAS record: swell on a shoaling cable, earthquakes, noise (5 Hz)",
    )
    synth_das.add_argument("--out", required=True, help="DAS store URL or path")
    synth_das.add_argument("--channels", type=int, default=3000)
    synth_das.add_argument("--spacing", type=float, default=10.0, help="channel spacing, m")
    synth_das.add_argument("--gauge-length", type=float, default=20.0, help="m")
    synth_das.add_argument("--rate", type=float, default=5.0, help="sampling rate, Hz")
    synth_das.add_argument(
        "--layout",
        default="das",
        help="CTF layout (name or YAML) whose guarded slots the ten realisations fill",
    )
    synth_das.add_argument("--ctf-rate", type=float, default=1.0, help="the CTF's rate, Hz")
    synth_das.add_argument("--no-earthquakes", action="store_true", help="swell and noise only")
    synth_das.add_argument(
        "--noise-rms", type=float, default=3e-9, help="instrument noise, strain rate 1/s"
    )
    synth_das.add_argument(
        "--seed",
        type=int,
        help="generator seed (default: derived from --secret/$SEISCTF_SECRET, else 0)",
    )
    synth_das.add_argument("--secret", help="organiser secret to derive the seed from")
    synth_das.set_defaults(run=_run_synth_das)

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
        worker_modules=("seisbench.data", "seisctf.recipes.seisbench_format"),
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

    build = verbs.add_parser(
        "build", parents=[common], help="run a dataset recipe (YAML; see docs/recipes.md)"
    )
    build.add_argument("recipe", help="recipe YAML file")
    build.add_argument("--workdir", default=".", help="where relative output URLs live")
    build.add_argument(
        "--secret", help="organiser secret (default: the recipe's, else $SEISCTF_SECRET)"
    )
    build.set_defaults(run=_run_build)

    tasks = verbs.add_parser("tasks", parents=[common], help="build a CTF task bundle")
    tasks.add_argument(
        "wavefield", help="wavefield store URL, or a continuous waveform store (ingest waveforms)"
    )
    tasks.add_argument("--public", required=True, help="URL of the public bundle")
    tasks.add_argument("--truth", required=True, help="URL of the withheld truth")
    tasks.add_argument("--layout", default="seismo", help="layout name or YAML file")
    tasks.add_argument(
        "--secret",
        help="organiser secret (default $SEISCTF_SECRET; else a random one, kept with the truth)",
    )
    tasks.add_argument(
        "--channel",
        help="waveform store only: channel code (BHZ) or component letter (Z); "
        "default: the store's only channel",
    )
    tasks.add_argument(
        "--rate", type=float, help="waveform store only: CTF sampling rate, Hz (default 1)"
    )
    tasks.set_defaults(run=_run_tasks)

    baseline = verbs.add_parser("baseline", parents=[common], help="write a baseline submission")
    baseline.add_argument("model", choices=["zeros", "persistence", "mean"])
    baseline.add_argument("--public", required=True, help="URL of the public bundle")
    baseline.add_argument("--out", required=True, help="URL of the submission zarr group")
    baseline.set_defaults(run=_run_baseline)

    split = verbs.add_parser(
        "split",
        parents=[common],
        help="station-aware train/dev/test split of an event-window store, with leakage audit",
    )
    split.add_argument("store", metavar="STORE", help="event-window store URL (written in place)")
    split.add_argument(
        "--strategy",
        required=True,
        choices=["source-clusters", "station-disjoint", "event", "time"],
    )
    split.add_argument("--clusters", type=int, default=20, help="k-means clusters (default 20)")
    split.add_argument(
        "--test-clusters",
        type=int,
        default=4,
        help="northernmost and southernmost clusters each for test (default 4 + 4)",
    )
    split.add_argument(
        "--dev-fraction",
        type=float,
        default=0.1,
        help="dev share of the training part (source-clusters), default 0.1",
    )
    split.add_argument(
        "--fractions",
        default="0.7,0.1,0.2",
        metavar="TRAIN,DEV,TEST",
        help="shares for station-disjoint, event and time splits (default 0.7,0.1,0.2)",
    )
    split.add_argument(
        "--buffer-km",
        type=float,
        default=0.0,
        help="station-disjoint: stations closer than this go to the same split",
    )
    split.add_argument(
        "--budgets",
        default="1,3,6,9,12",
        help="training-cluster budgets to draw (source-clusters), default 1,3,6,9,12",
    )
    split.add_argument("--draws", type=int, default=12, help="random draws per budget (12)")
    split.add_argument("--seed", type=int, default=0, help="seed of every random choice (0)")
    split.add_argument("--audit", metavar="OUT.json", help="write the leakage audit here")
    split.add_argument("--map", metavar="OUT.png", help="map of sources and stations by split")
    split.set_defaults(run=_run_split)

    export = verbs.add_parser("export", help="stores -> other formats")
    export_kinds = export.add_subparsers(dest="kind", required=True)
    export_seisbench = export_kinds.add_parser(
        "seisbench",
        parents=[common],
        help="event windows + split -> SeisBench dataset (metadata.csv, waveforms.hdf5)",
    )
    export_seisbench.add_argument("store", metavar="STORE", help="event-window store URL")
    export_seisbench.add_argument("directory", metavar="DIR", help="SeisBench dataset folder")
    export_seisbench.add_argument(
        "--metadata-only",
        action="store_true",
        help="write only metadata.csv with the store's split (into an existing dataset: its "
        "rows matched by trace_name)",
    )
    export_seisbench.set_defaults(run=_run_export_seisbench)

    score = verbs.add_parser("score", help="score submissions")
    score_kinds = score.add_subparsers(dest="kind", required=True)
    score_ctf = score_kinds.add_parser("ctf", parents=[common], help="CTF scores E1..E12")
    score_ctf.add_argument("--truth", help="truth group URL (the referee's)")
    score_ctf.add_argument(
        "--submission",
        required=True,
        nargs="+",
        action="extend",
        help="submission(s): zarr group, .zip of one, .npz or folder of .npy; repeatable",
    )
    score_ctf.add_argument("--name", action="append", help="name per submission (repeatable)")
    score_ctf.add_argument("--convention", default="reference", choices=["reference", "paper"])
    score_ctf.add_argument(
        "--validation",
        action="store_true",
        help="score X1val..X9val against the public bundle's validation targets (with --public)",
    )
    score_ctf.add_argument("--public", help="public bundle URL (with --validation)")
    score_ctf.add_argument(
        "--max-submission-bytes",
        type=int,
        help="refuse submissions holding more bytes than this (default 64 GiB)",
    )
    score_ctf.add_argument("--json", help="write results JSON here")
    score_ctf.add_argument("--db", help="add the results to this SQLite leaderboard")
    score_ctf.add_argument("--plot", help="radar profile PNG of the scores")
    score_ctf.set_defaults(run=_run_score_ctf, worker_modules=SCORING_WORKER_MODULES)

    board = verbs.add_parser("leaderboard", parents=[common], help="show the leaderboard")
    board.add_argument("--db", default="seisctf-demo/leaderboard.sqlite")
    board.add_argument("--html", help="also write a static HTML leaderboard to this folder")
    board.set_defaults(run=_run_leaderboard, needs_cluster=False)
    return parser


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


def _options(args: argparse.Namespace) -> dict:
    from seisctf.storage import parse_storage_options

    return parse_storage_options(args.storage_option)


def _run_demo(args: argparse.Namespace) -> None:
    from seisctf.demo import run_demo

    run_demo(
        args.workdir,
        dataset=args.dataset,
        secret=args.secret,
        n_sensors=args.sensors,
        duration_s=args.duration,
        layout=args.layout,
        quiet=args.quiet,
    )
    print(
        f"wrote {Path(args.workdir) / 'leaderboard.json'} and {Path(args.workdir) / 'leaderboard'}/"
    )


def _run_synth_global(args: argparse.Namespace) -> None:
    from seisctf import keys, storage
    from seisctf.recipes.global_wavefield import synthesize_global

    secret = args.secret or os.environ.get(keys.SECRET_ENV)
    seed = (
        args.seed
        if args.seed is not None
        else (keys.derive_seed(secret, "synth/global") if secret else 0)
    )
    dataset = synthesize_global(
        n_sensors=args.sensors, duration_s=args.duration, sampling_rate_hz=args.rate, seed=seed
    )
    storage.write_dataset(dataset, args.out, _options(args), label="synth global", quiet=args.quiet)
    print(f"wrote {args.out}")


def _run_synth_das(args: argparse.Namespace) -> None:
    from seisctf import keys, storage
    from seisctf.pipeline.das_wavefield import synthetic_das_record

    secret = args.secret or os.environ.get(keys.SECRET_ENV)
    seed = (
        args.seed
        if args.seed is not None
        else (keys.derive_seed(secret, "synth/das") if secret else 0)
    )
    dataset = synthetic_das_record(
        channels=args.channels,
        channel_spacing_m=args.spacing,
        gauge_length_m=args.gauge_length,
        sampling_rate_hz=args.rate,
        ctf_rate_hz=args.ctf_rate,
        layout=args.layout,
        seed=seed,
        earthquakes=not args.no_earthquakes,
        noise_rms=args.noise_rms,
    )
    storage.write_dataset(dataset, args.out, _options(args), label="synth das", quiet=args.quiet)
    print(f"wrote {args.out}")


def _run_ingest_waveforms(args: argparse.Namespace) -> None:
    from seisctf.recipes.waveforms import ingest_waveforms

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
    from seisctf.recipes.das import ingest_das

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
    from seisctf.recipes.quakeml import ingest_quakeml

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


def _run_split(args: argparse.Namespace) -> None:
    from seisctf.pipeline.split_audit import split_map
    from seisctf.pipeline.splits import SplitOptions, split_store

    options = SplitOptions.from_text(
        args.strategy,
        n_clusters=args.clusters,
        test_clusters=args.test_clusters,
        dev_fraction=args.dev_fraction,
        fractions=args.fractions,
        buffer_km=args.buffer_km,
        budgets=args.budgets,
        draws=args.draws,
        seed=args.seed,
    )
    result = split_store(args.store, options, _options(args), quiet=args.quiet)
    if args.audit:
        Path(args.audit).write_text(json.dumps(result.audit, indent=2))
    if args.map:
        split_map(result.table, args.map, title=f"{args.store}: {args.strategy}")
    print(json.dumps(result.audit, indent=2))


def _run_export_seisbench(args: argparse.Namespace) -> None:
    from seisctf.pipeline.seisbench_export import export_seisbench

    written = export_seisbench(
        args.store,
        args.directory,
        metadata_only=args.metadata_only,
        storage_options=_options(args),
        quiet=args.quiet,
    )
    print(f"wrote {', '.join(str(path) for path in written)}")


def _run_ingest_seisbench(args: argparse.Namespace) -> None:
    from seisctf.recipes.seisbench_format import ingest_seisbench

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
    from seisctf.recipes.stead import ingest_stead

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


def _run_build(args: argparse.Namespace) -> None:
    from seisctf import keys
    from seisctf.pipeline.recipe import build_file

    context = build_file(
        args.recipe,
        workdir=args.workdir,
        storage_options=_options(args),
        secret=args.secret or os.environ.get(keys.SECRET_ENV),
        quiet=args.quiet,
    )
    for url in context.written:
        print(f"wrote {url}")
    for url in context.skipped:
        print(f"up to date: {url}")


def _run_tasks(args: argparse.Namespace) -> None:
    from seisctf import keys, storage
    from seisctf.pipeline.archive_wavefield import wavefield_for_tasks
    from seisctf.pipeline.layouts import load_layout
    from seisctf.pipeline.tasks import build_bundle, write_bundle

    options = _options(args)
    secret, generated = keys.resolve_secret(args.secret)
    layout = load_layout(args.layout)
    wavefield, attrs, truth_attrs = wavefield_for_tasks(
        storage.open_dataset(args.wavefield, options),
        layout,
        channel=args.channel,
        rate_hz=args.rate,
        what=args.wavefield,
        quiet=args.quiet,
    )
    bundle = build_bundle(wavefield, layout, secret, what=args.wavefield)
    write_bundle(
        bundle,
        args.public,
        args.truth,
        secret,
        keep_secret=generated,
        storage_options=options,
        quiet=args.quiet,
        attrs=attrs,
        truth_attrs=truth_attrs,
    )
    print(f"wrote public bundle {args.public} and truth {args.truth}")


def _run_baseline(args: argparse.Namespace) -> None:
    from seisctf.pipeline.baselines import write_baseline

    write_baseline(args.model, args.public, args.out, _options(args), quiet=args.quiet)
    print(f"wrote {args.out}")


def _run_score_ctf(args: argparse.Namespace) -> None:
    from seisctf.scoring import leaderboard
    from seisctf.scoring.ctf import open_truth, score_ctf, score_validation
    from seisctf.scoring.plots import radar_profile

    if args.validation != bool(args.public) or bool(args.truth) == args.validation:
        raise InvalidInput("score ctf", "give --truth URL, or --validation with --public URL")
    if args.db and args.validation:
        raise InvalidInput(
            "--db", "validation scores stay local; the leaderboard takes referee scores"
        )
    names = args.name or [Path(s.rstrip("/")).stem for s in args.submission]
    if len(names) != len(args.submission) or len(set(names)) != len(names):
        raise InvalidInput("--name", "give one distinct name per submission")
    options = _options(args)
    submissions = dict(zip(names, args.submission, strict=True))
    limits = None
    if args.max_submission_bytes:
        from seisctf.scoring.submission import SubmissionLimits

        limits = SubmissionLimits(
            max_total_bytes=args.max_submission_bytes, max_array_bytes=args.max_submission_bytes
        )
    score = score_validation if args.validation else score_ctf
    results = score(
        args.public if args.validation else args.truth,
        submissions,
        convention=args.convention,
        storage_options=options,
        limits=limits,
        quiet=args.quiet,
    )
    output = results[0] if len(results) == 1 else results
    if args.json:
        Path(args.json).write_text(json.dumps(output, indent=2))
    if args.db:
        commitment = leaderboard.truth_commitment_of(open_truth(args.truth, options)[0])
        for result in results:
            leaderboard.record(args.db, result, truth_commitment=commitment)
    if args.plot:
        radar_profile({r["name"]: r["scores"] for r in results}, args.plot)
    print(json.dumps(output, indent=2))


def _run_leaderboard(args: argparse.Namespace) -> None:
    from seisctf.scoring import leaderboard

    if not Path(args.db).exists():
        raise InvalidInput(args.db, "leaderboard database not found")
    rows = leaderboard.entries(args.db)
    leaderboard.print_table(rows)
    if args.html:
        print(f"wrote {leaderboard.write_html(rows, args.html)}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "needs_cluster", True):
            from seisctf.cluster import dask_client

            # The cluster starts in the background while the verb imports and builds its graph.
            with dask_client(
                args.scheduler,
                quiet=args.quiet,
                preload=getattr(args, "worker_modules", ()),
                background=True,
            ):
                args.run(args)
        else:
            args.run(args)
    except InvalidInput as error:
        print(f"seisctf: invalid input: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    return 0


def fast_exit(code: int) -> None:
    """Exit without tearing the interpreter down: flush, run the exit handlers (temporary
    folders, multiprocessing's fork server), then `os._exit`. Tearing down the modules of Dask,
    pandas and xarray object by object only costs time (about 0.3 s of a 3 s scoring command)."""
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(code)


def entry_point() -> None:
    """The `seisctf` console script: `main()`, then `fast_exit` (every result is written,
    flushed and closed by then). An unexpected exception leaves the normal way, with its
    traceback."""
    fast_exit(main())


if __name__ == "__main__":
    entry_point()
