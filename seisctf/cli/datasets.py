"""Verbs that make datasets: demo, synth, build, tasks, split, subset, export (and `baseline`,
added from `cli.baseline` in its place)."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from seisctf.cli import _checks
from seisctf.cli._numbers import COUNT, NON_NEGATIVE, POSITIVE, SEED, Number
from seisctf.cli._output_size import override_option, refuse_oversize
from seisctf.cli._parse import (
    Commands,
    generator_seed_options,
    public_truth_option,
    secret_argument,
    store_location,
    write_json,
)
from seisctf.cli._parse import storage_options as _options
from seisctf.cli._recipe_checks import check_recipe
from seisctf.cli.baseline import add_baseline
from seisctf.cli.demo_plan import DEFAULT_LAYOUTS, demo_datasets, demo_source
from seisctf.plugins.layouts import LAYOUTS, load_layout
from seisctf.registry import SYNTHS  # its summaries are the `synth` kinds' help
from seisctf.synth.output_sizes import das_size, global_size, source_size
from seisctf.wording import counted

AUTO_LAYOUT = "auto"
LAYOUT_NAMES = ", ".join(LAYOUTS)


def register(verbs, groups: dict, common: argparse.ArgumentParser) -> None:
    """Add demo, synth, build, tasks, baseline, split, subset and export to `verbs`."""
    demo = verbs.add_parser("demo", parents=[common], help="the main job on the embedded default")
    demo.add_argument(
        "--workdir", default="seisctf-demo", help="folder for everything the demo writes"
    )
    demo.add_argument(
        "--dataset",
        default="global",
        choices=["global", "das", "crustal", "all"],
        help="global wavefield, ocean-bottom DAS record, 3D crustal simulations, or all three",
    )
    demo.add_argument(
        "--secret",
        help="organiser secret (default: $SEISCTF_SECRET, else the published demo secret, "
        "which makes the demo's truth public: the demo is not a challenge)",
    )
    demo.add_argument(
        "--sensors",
        dest="n_sensors",
        type=COUNT,
        help="number of sensors (default: 2048 for global, 256 DAS channels for das, "
        "94 × 94 = 8836 for crustal, which needs a square number)",
    )
    demo.add_argument(
        "--duration",
        dest="duration_s",
        type=POSITIVE,
        default=3000.0,
        help="seconds of wavefield (global only)",
    )
    demo.add_argument(
        "--layout",
        help=f"CTF layout: a shipped one ({LAYOUT_NAMES}) or a YAML file (default: the "
        "dataset's: seismo, das, crustal)",
    )
    override_option(demo)
    demo.set_defaults(run=_run_demo, check=_check_demo)

    synth = verbs.add_parser("synth", help="offline synthetic wavefields")
    synth_kinds = synth.add_subparsers(dest="kind", required=True)
    # The kinds are added when `synth` is chosen; their help, the registered sources' summaries,
    # only when shown (loading the registry imports every generator: about a second).
    synth_kinds.defer(lambda kinds: _add_synth_kinds(kinds, common))
    synth_kinds.on_demand(_describe_synth_kinds)
    groups["synth"] = synth_kinds

    build = verbs.add_parser(
        "build", parents=[common], help="run a dataset recipe (YAML; see docs/recipes.md)"
    )
    build.add_argument("recipe", help="recipe YAML file (docs/recipes.md)")
    build.add_argument("--workdir", default=".", help="where relative output URLs live")
    secret_argument(build)
    public_truth_option(build)
    override_option(build)
    build.set_defaults(run=_run_build, check=check_recipe)

    tasks = verbs.add_parser(
        "tasks",
        parents=[common],
        help="build a CTF task bundle",
        description="Build a CTF task bundle (public arrays + withheld truth) from a store.",
        epilog=LayoutHelp.PENDING,
        add_help=False,
    )
    tasks.add_argument("-h", "--help", action=LayoutHelp, help="show this help and exit")
    tasks.add_argument(
        "wavefield", help="wavefield store URL, or a continuous waveform store (ingest waveforms)"
    )
    tasks.add_argument("--public", required=True, help="URL of the public bundle")
    tasks.add_argument("--truth", required=True, help="URL of the withheld truth")
    tasks.add_argument(
        "--layout",
        default="seismo",
        help=f"CTF layout: a shipped one ({LAYOUT_NAMES}), {AUTO_LAYOUT} (the largest shipped "
        "layout the store supports, printed), or a YAML file; what each needs: below",
    )
    secret_argument(tasks)
    public_truth_option(tasks)
    tasks.add_argument(
        "--channel",
        help="waveform store only: channel code (BHZ) or component letter (Z); "
        "default: the store's only channel",
    )
    tasks.add_argument(
        "--rate",
        dest="sampling_rate_hz",
        type=POSITIVE,
        help="waveform store only: CTF sampling rate, Hz (default 1)",
    )
    tasks.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing public bundle or truth at --public/--truth (default: refuse)",
    )
    tasks.set_defaults(run=_run_tasks, check=_check_tasks)

    add_baseline(verbs, common)

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
        help="source-clusters: k-means of the source locations, southern and northern clusters "
        "for test; station-disjoint: each station in one split; event: whole events; time: "
        "earliest events to train, latest to test",
    )
    split.add_argument(
        "--clusters",
        dest="n_clusters",
        type=COUNT,
        default=20,
        help="k-means clusters (default 20)",
    )
    split.add_argument(
        "--test-clusters",
        type=COUNT,
        default=4,
        help="northernmost and southernmost clusters each for test (default 4 + 4)",
    )
    split.add_argument(
        "--dev-fraction",
        type=Number(float, at_least=0, below=1),
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
        type=NON_NEGATIVE,
        default=0.0,
        help="station-disjoint: stations closer than this go to the same split",
    )
    split.add_argument(
        "--budgets",
        default="1,3,6,9,12",
        help="training-cluster budgets to draw (source-clusters), default 1,3,6,9,12",
    )
    split.add_argument("--draws", type=COUNT, default=12, help="random draws per budget (12)")
    split.add_argument("--seed", type=SEED, default=0, help="seed of every random choice (0)")
    split.add_argument(
        "--audit",
        metavar="OUT.json",
        help="write the leakage audit here (stdout then gets a summary, nothing with --quiet; "
        "default: the audit JSON to stdout)",
    )
    split.add_argument("--map", metavar="OUT.png", help="map of sources and stations by split")
    # No check: the options are read first, by the splits module (which loads pandas).
    split.set_defaults(run=_run_split)

    subset = verbs.add_parser(
        "subset",
        parents=[common],
        help="a new event-window store of the traces a query on the metadata selects",
        description="Write the traces of an event-window store that a pandas query on its "
        "metadata selects as a new store (their windows copied bit for bit into new shards; "
        "provenance names the parent and the query).",
    )
    subset.add_argument("store", metavar="STORE", help="the parent event-window store URL")
    subset.add_argument(
        "--query",
        required=True,
        help="pandas DataFrame.query on the per-trace metadata, e.g. "
        '\'split == "test" and station_network_code == "CI"\'',
    )
    subset.add_argument("--out", required=True, help="URL of the new store")
    subset.add_argument(
        "--overwrite", action="store_true", help="replace what exists at --out (default: refuse)"
    )
    subset.set_defaults(run=_run_subset, check=_check_export)

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
    export_seisbench.add_argument(
        "--filter",
        metavar="QUERY",
        help="export only the traces this pandas query on the metadata selects, e.g. "
        "'split == \"train\" and source_magnitude >= 2' (default: all)",
    )
    export_seisbench.set_defaults(run=_run_export_seisbench, check=_check_export)
    groups["export"] = export_kinds


def _add_synth_kinds(synth_kinds: Commands, common: argparse.ArgumentParser) -> None:
    """`synth global` and `synth das` (`synth crustal`: cli/crustal.py)."""
    # help=None lists it in `synth --help`, whose text the registry then gives.
    synth_global = synth_kinds.add_parser("global", parents=[common], help=None)
    synth_global.add_argument("--out", required=True, help="store URL or path")
    synth_global.add_argument(
        "--sensors",
        dest="n_sensors",
        type=COUNT,
        default=2048,
        help="number of sensors on the globe",
    )
    synth_global.add_argument(
        "--duration",
        dest="duration_s",
        type=POSITIVE,
        default=3000.0,
        help="seconds of wavefield per realisation",
    )
    synth_global.add_argument(
        "--rate", dest="sampling_rate_hz", type=POSITIVE, default=1.0, help="sampling rate, Hz"
    )
    generator_seed_options(synth_global)
    override_option(synth_global)
    synth_global.set_defaults(run=_run_synth_global, check=_check_synth_global)
    synth_das = synth_kinds.add_parser("das", parents=[common], help=None)
    synth_das.add_argument("--out", required=True, help="DAS store URL or path")
    synth_das.add_argument(
        "--channels", type=Number(int, at_least=2), default=3000, help="channels along the fibre"
    )
    synth_das.add_argument(
        "--spacing",
        dest="channel_spacing_m",
        type=POSITIVE,
        default=10.0,
        help="channel spacing, m",
    )
    synth_das.add_argument(
        "--gauge-length", dest="gauge_length_m", type=POSITIVE, default=20.0, help="gauge length, m"
    )
    synth_das.add_argument(
        "--rate", dest="sampling_rate_hz", type=POSITIVE, default=5.0, help="sampling rate, Hz"
    )
    synth_das.add_argument(
        "--layout",
        default="das",
        help=f"CTF layout whose guarded slots the ten realisations fill: a shipped one "
        f"({LAYOUT_NAMES}) or a YAML file",
    )
    synth_das.add_argument(
        "--ctf-rate", dest="ctf_rate_hz", type=POSITIVE, default=1.0, help="the CTF's rate, Hz"
    )
    synth_das.add_argument("--no-earthquakes", action="store_true", help="swell and noise only")
    synth_das.add_argument(
        "--noise-rms", type=NON_NEGATIVE, default=3e-9, help="instrument noise, strain rate 1/s"
    )
    generator_seed_options(synth_das)
    override_option(synth_das)
    synth_das.set_defaults(run=_run_synth_das, check=_check_synth_das)


def _describe_synth_kinds(synth_kinds: Commands) -> None:
    """Each `synth` kind's help: the summary of its registered source `synthetic_KIND`."""
    for choice in synth_kinds._choices_actions:
        choice.help = SYNTHS[f"synthetic_{choice.dest}"].summary


class LayoutHelp(argparse.Action):
    """`seisctf tasks --help`: the help, with what each shipped layout needs of a store in its
    epilog, computed from the layouts (and the filter design, which loads scipy) only when
    asked for."""

    PENDING = "(what each layout needs)"

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.epilog = _help_layout_needs()
        parser.print_help()
        parser.exit()


def _help_layout_needs() -> str:
    """What each shipped layout needs of a continuous record, as `tasks --help` shows it."""
    from seisctf.plugins.layouts import describe_needs, needs, shipped_by_size

    rate, source_rates = 1.0, (100.0, 40.0, 5.0)
    largest = shipped_by_size()[0]
    guards = ", ".join(
        f"{needs(largest, source, rate).guard} from {source:g} Hz" for source in source_rates
    )
    heading = (
        "What a shipped layout needs of a continuous waveform store (one channel) or DAS store, "
        f"for a CTF at {rate:g} Hz (--rate) from a record at {source_rates[0]:g} Hz: ten "
        "segments, each after a guard where the causal anti-alias filter settles (a guard of "
        f"{guards}); stations or DAS channels gap-free over all ten:"
    )
    rows = [
        f"  {describe_needs(needs(layout, source_rates[0], rate), rate)}"
        for layout in shipped_by_size()
    ]
    footer = (
        "A wavefield store (seisctf synth) needs the layout's steps per realisation and as "
        f"many sensors as it needs stations. --layout {AUTO_LAYOUT} takes the largest shipped "
        "layout the store supports."
    )
    return "\n".join([textwrap.fill(heading, 88), *rows, textwrap.fill(footer, 88)])


def _check_layout_option(args: argparse.Namespace) -> None:
    """A `--layout` that is not `auto` names a shipped layout or a valid layout file."""
    if args.layout and args.layout != AUTO_LAYOUT:
        load_layout(args.layout)


def _check_demo(args: argparse.Namespace) -> None:
    """The layout option, and room in --workdir for the wavefield stores the demo synthesises
    (its bundles and submissions add less than those)."""
    _check_layout_option(args)
    sizes = [
        source_size(source, options, load_layout(args.layout or DEFAULT_LAYOUTS[dataset]))
        for dataset in demo_datasets(args.dataset)
        for source, options in demo_source(dataset, args.n_sensors, args.duration_s).items()
    ]
    refuse_oversize(sizes, args.workdir, args, what="demo (its wavefield stores alone)")


def _check_tasks(args: argparse.Namespace) -> None:
    _checks.zarr_group(args.wavefield)
    _check_layout_option(args)


def _check_export(args: argparse.Namespace) -> None:
    _checks.zarr_group(args.store)


def _run_demo(args: argparse.Namespace) -> None:
    from seisctf.cli.demo import run_demo

    run_demo(
        args.workdir,
        dataset=args.dataset,
        secret=args.secret,
        n_sensors=args.n_sensors,
        duration_s=args.duration_s,
        layout=args.layout,
        quiet=args.quiet,
    )
    workdir = Path(args.workdir)
    print(f"wrote {workdir / 'leaderboard.json'} and {workdir / 'leaderboard.sqlite'}")
    print(f"HTML leaderboard: {(workdir / 'leaderboard' / 'index.html').resolve()}")


def _run_synthesis(args: argparse.Namespace, kind: str, **options) -> None:
    """`seisctf synth KIND`: the `synthetic_KIND` source of `SYNTHS` with these options (its
    seed --seed, else derived from `keys.resolve_secret`'s secret; the layout from --layout
    where given), written to --out with provenance saying whether its truth is public and, when
    the secret was drawn here, that secret (the store is the organiser's: it holds the truth)."""
    from seisctf import conventions as cv
    from seisctf import keys, storage
    from seisctf.build.provenance import truth_keys
    from seisctf.plugins.context import BuildContext

    layout = getattr(args, "layout", None)
    secret = None if args.seed is not None else keys.resolve_secret(args.secret)
    context = BuildContext(
        storage_options=_options(args),
        secret=secret,
        quiet=args.quiet,
        layout=load_layout(layout) if layout else None,
    )
    dataset = SYNTHS[f"synthetic_{kind}"].function(context, seed=args.seed, **options)
    truth = truth_keys(*keys.generator_truth(args.seed is not None, secret))
    dataset.attrs[cv.ATTR_PROVENANCE] = {"command": f"seisctf synth {kind}", **truth}
    if secret is not None and secret.drawn:
        dataset.attrs[cv.ATTR_CTF_SECRET] = secret.value
    storage.write_dataset(
        dataset, context.location(args.out), label=f"synth {kind}", quiet=args.quiet
    )
    print(f"wrote {args.out}")


def _synth_global_options(args: argparse.Namespace) -> dict:
    return {
        "sensors": args.n_sensors,
        "duration_s": args.duration_s,
        "sampling_rate_hz": args.sampling_rate_hz,
    }


def _check_synth_global(args: argparse.Namespace) -> None:
    refuse_oversize([global_size(**_synth_global_options(args))], args.out, args)


def _run_synth_global(args: argparse.Namespace) -> None:
    _run_synthesis(args, "global", **_synth_global_options(args))


def _synth_das_options(args: argparse.Namespace) -> dict:
    return {
        "channels": args.channels,
        "channel_spacing_m": args.channel_spacing_m,
        "gauge_length_m": args.gauge_length_m,
        "sampling_rate_hz": args.sampling_rate_hz,
        "ctf_rate_hz": args.ctf_rate_hz,
        "earthquakes": not args.no_earthquakes,
        "noise_rms": args.noise_rms,
    }


def _check_synth_das(args: argparse.Namespace) -> None:
    _check_layout_option(args)
    layout = load_layout(args.layout)
    refuse_oversize([das_size(**_synth_das_options(args), layout=layout)], args.out, args)


def _run_synth_das(args: argparse.Namespace) -> None:
    _run_synthesis(args, "das", **_synth_das_options(args))


def _run_split(args: argparse.Namespace) -> None:
    from seisctf.pipeline.split_audit import split_map
    from seisctf.pipeline.splits import SplitOptions, split_store

    options = SplitOptions.from_text(
        args.strategy,
        n_clusters=args.n_clusters,
        test_clusters=args.test_clusters,
        dev_fraction=args.dev_fraction,
        fractions=args.fractions,
        buffer_km=args.buffer_km,
        budgets=args.budgets,
        draws=args.draws,
        seed=args.seed,
    )
    result = split_store(store_location(args, args.store), options, quiet=args.quiet)
    if args.audit:
        write_json(args.audit, result.audit)
    if args.map:
        split_map(result.table, args.map, title=f"{args.store}: {args.strategy}")
    if not args.audit:
        print(json.dumps(result.audit, indent=2))
    elif not args.quiet:  # the audit is in its file: a summary
        counts = ", ".join(f"{split} {n}" for split, n in result.audit["counts"].items())
        shared = counted(result.audit["shared_stations"], "station")
        print(f"split {args.store} ({args.strategy}): {counts}; {shared} in train and test")
        print(f"leakage audit: {args.audit}")


def _run_subset(args: argparse.Namespace) -> None:
    from seisctf.catalogs.event_window_subset import subset_event_windows

    written = subset_event_windows(
        store_location(args, args.store),
        args.query,
        store_location(args, args.out),
        overwrite=args.overwrite,
        quiet=args.quiet,
    )
    print(f"wrote {args.out}: {written.sizes['trace']} of the traces of {args.store}")


def _run_export_seisbench(args: argparse.Namespace) -> None:
    from seisctf.formats.seisbench.seisbench_export import export_seisbench

    written = export_seisbench(
        store_location(args, args.store),
        args.directory,
        metadata_only=args.metadata_only,
        query=args.filter,
        quiet=args.quiet,
    )
    print(f"wrote {', '.join(str(path) for path in written)}")


def _run_build(args: argparse.Namespace) -> None:
    from seisctf.build.engine import build_file

    context = build_file(
        args.recipe,
        workdir=args.workdir,
        storage_options=_options(args),
        secret=args.secret,
        quiet=args.quiet,
        public_truth=args.public_truth,
    )
    for url in context.written:
        print(f"wrote {url}")
    for url in context.skipped:
        print(f"up to date: {url}")


def _run_tasks(args: argparse.Namespace) -> None:
    from seisctf import conventions as cv
    from seisctf import keys, storage
    from seisctf.pipeline.bundles.archive_wavefield import wavefield_for_tasks
    from seisctf.pipeline.bundles.public_truth import truth_stamp
    from seisctf.pipeline.bundles.segments import (
        build_bundle,
        refuse_existing_bundle,
        write_bundle,
    )
    from seisctf.plugins import layouts

    public, truth = store_location(args, args.public), store_location(args, args.truth)
    secret = keys.resolve_secret(args.secret)
    refuse_existing_bundle(public, truth, overwrite=args.overwrite)
    store = storage.open_dataset(store_location(args, args.wavefield))
    stamp = truth_stamp(store.attrs, secret, allowed=args.public_truth, what=args.wavefield)

    def bundle_of(layout: layouts.Layout):
        """The wavefield made for `layout`, its attrs, and its bundle (lazy)."""
        wavefield, attrs, truth_attrs = wavefield_for_tasks(
            store,
            layout,
            channel=args.channel,
            sampling_rate_hz=args.sampling_rate_hz,
            what=args.wavefield,
            quiet=args.quiet,
        )
        bundle = build_bundle(wavefield, layout, secret.value, what=args.wavefield)
        return bundle, attrs, truth_attrs

    if args.layout == AUTO_LAYOUT:
        candidates = layouts.auto_candidates(is_das=cv.das_variable(store) is not None)
        layout, (bundle, attrs, truth_attrs) = layouts.largest_supported(
            bundle_of, candidates, args.wavefield
        )
        print(f"layout auto: {layout.name!r}, the largest shipped layout {args.wavefield} supports")
    else:
        bundle, attrs, truth_attrs = bundle_of(layouts.load_layout(args.layout))
    write_bundle(
        bundle,
        public,
        truth,
        secret.value,
        keep_secret=secret.drawn,
        quiet=args.quiet,
        attrs=attrs,
        truth_attrs=truth_attrs,
        manifest_stamp=stamp,
    )
    print(f"wrote public bundle {args.public} and truth {args.truth}")
