"""Library errors name parameters (`fractions`, `truth_url`); the CLI shows its users the flags
they typed (`--fractions`, `--truth`) and exits 3."""

from __future__ import annotations

import argparse
import ast
import pickle
import re
from pathlib import Path

import pytest
from conftest import TINY_LAYOUT_YAML, smooth_wavefield

from seisctf import storage
from seisctf.cli import EXIT_INVALID_INPUT, _parse, build_parser, main
from seisctf.cli._parse import attach_option_flags, flag_error, option_flags
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation
from seisctf.pipeline.splits import SplitOptions


def verb_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    verbs = parser.add_subparsers(dest="verb")
    verb = verbs.add_parser("tasks")
    verb.add_argument("--rate", type=float)
    verb.add_argument("--truth")
    verb.add_argument("--public")
    verb.add_argument("--code-url", dest="submitter_code_url")
    verb.add_argument("store")
    return parser


def test_option_flags_are_attached_to_every_verb():
    parser = verb_parser()
    attach_option_flags(parser)
    args = parser.parse_args(["tasks", "in.zarr"])
    assert args.option_flags == option_flags(parser._actions[-1].choices["tasks"])
    assert args.option_flags["submitter_code_url"] == "--code-url"
    assert "store" not in args.option_flags  # a positional has no flag


@pytest.mark.parametrize(
    ("what", "problem", "parameters", "shown"),
    [
        ("rate", "must be > 0", (), "--rate: must be > 0"),
        # An option's dest is the library parameter it sets: no rename table.
        ("sampling_rate_hz", "must be > 0", (), "--rate: must be > 0"),
        (
            "{truth}",
            "must differ from {public}",
            ("truth", "public"),
            "--truth: must differ from --public",
        ),
        ("{truth}/{public}", "both missing", ("truth", "public"), "--truth/--public: both missing"),
        (
            "`storage_options` 'x'",
            "expected KEY=VALUE",
            (),
            "`storage_options` 'x': expected KEY=VALUE",
        ),
        (
            "{storage_options} 'x'",
            "expected KEY=VALUE",
            ("storage_options",),
            "--storage-option 'x': expected KEY=VALUE",
        ),
        ("submitter_code_url", "expected http(s)", (), "--code-url: expected http(s)"),
        # Names the verb has no option for stay as the library wrote them.
        ("layout", "unknown", (), "layout: unknown"),
        ("{rate}/{layout}", "x", ("rate", "layout"), "--rate/layout: x"),
        ("in.zarr", "needs {seed}", ("seed",), "in.zarr: needs `seed`"),
        # Only the parameters an error declares are spelt: other braces and backticks are text.
        (
            "in.zarr",
            "{rate} is not `rate` in {'rate': 1}",
            (),
            "in.zarr: {rate} is not `rate` in {'rate': 1}",
        ),
    ],
)
def test_flag_error_names_the_verbs_flags(what, problem, parameters, shown):
    flags = {"rate": "--rate", "truth": "--truth", "public": "--public"}
    flags["submitter_code_url"] = "--code-url"
    flags["sampling_rate_hz"] = "--rate"
    flags["storage_options"] = "--storage-option"
    error = flag_error(InvalidInput(what, problem, parameters=parameters), flags)
    assert isinstance(error, InvalidInput) and str(error) == shown


def test_errors_spell_their_parameters_as_the_library_names_them():
    error = InvalidInput("{truth}", "must differ from {public}", parameters=("truth", "public"))
    assert str(error) == "truth: must differ from `public`"
    assert (error.what, error.problem) == ("truth", "must differ from `public`")
    copied = pickle.loads(pickle.dumps(error))  # raised on a worker, shown by the command
    assert str(flag_error(copied, {"public": "--public"})) == "truth: must differ from --public"


def test_every_option_is_named_as_its_parameter():
    """An option whose flag differs from the library's name of what it sets carries that name
    as its dest, which is how an error naming it reaches the user as the flag."""
    synth_das = build_parser().parse_args(["synth", "das", "--out", "x.zarr"]).option_flags
    assert synth_das["sampling_rate_hz"] == "--rate" and synth_das["ctf_rate_hz"] == "--ctf-rate"
    assert synth_das["channel_spacing_m"] == "--spacing"
    assert synth_das["gauge_length_m"] == "--gauge-length"
    tasks = build_parser().parse_args(["tasks", "w.zarr", "--public", "p", "--truth", "t"])
    assert tasks.option_flags["sampling_rate_hz"] == "--rate"
    quakeml = build_parser().parse_args(
        ["ingest", "quakeml", "c.xml", "--archive", "a", "--out", "o"]
    )
    assert quakeml.option_flags["window_s"] == "--window"
    assert not hasattr(_parse, "PARAMETER_DESTS") and not hasattr(_parse, "BACKTICKED")


def test_library_errors_name_parameters():
    with pytest.raises(InvalidInput, match="fractions: expected TRAIN,DEV,TEST") as error:
        SplitOptions.from_text("event", fractions="a,b", budgets="1")
    assert error.value.what == "fractions"
    with pytest.raises(InvalidInput, match="n_clusters: 8 clusters"):
        SplitOptions("source-clusters", n_clusters=8).checked()
    with pytest.raises(InvalidInput, match="`storage_options` 'no-equals'"):
        storage.parse_storage_options(["no-equals"])


def test_cli_shows_the_flags_and_exits_3(tmp_path, dask_cluster, capsys):
    common = ["--scheduler", dask_cluster.address, "--quiet"]
    missing = str(tmp_path / "nothing.zarr")
    code = main(["split", missing, "--strategy", "event", "--fractions", "a,b", *common])
    err = capsys.readouterr().err
    assert code == EXIT_INVALID_INPUT
    assert "seisctf: invalid input: --fractions: expected TRAIN,DEV,TEST, got 'a,b'" in err

    wavefield = str(tmp_path / "wavefield.zarr")
    storage.write_dataset(smooth_wavefield(), StoreLocation(wavefield))
    layout = tmp_path / "tiny.yaml"
    layout.write_text(TINY_LAYOUT_YAML)
    same = str(tmp_path / "same.zarr")
    task = ["tasks", wavefield, "--layout", str(layout), "--public", same, "--truth", same]
    code = main([*task, "--secret", "a-secret-of-twenty-characters", *common])
    err = capsys.readouterr().err
    assert code == EXIT_INVALID_INPUT and "Traceback" not in err
    assert "--truth: must differ from --public: truth is written only to its own URL" in err
    bundle = ["--public", str(tmp_path / "p.zarr"), "--truth", str(tmp_path / "t.zarr")]
    code = main(["tasks", wavefield, "--layout", str(layout), "--rate", "1", *bundle, *common])
    err = capsys.readouterr().err
    assert code == EXIT_INVALID_INPUT
    assert "--rate is only for a continuous waveform store" in err


def _every_dest() -> set[str]:
    """The dest of every option of every verb (the commands added on demand too)."""
    dests: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                if hasattr(action, "run_added"):
                    action.run_added(on_demand=False)
                    action.run_added(on_demand=True)
                for child in set(action.choices.values()):
                    walk(child)
            elif action.option_strings:
                dests.add(action.dest)

    walk(build_parser())
    return dests


def test_no_error_names_an_option_in_backticks():
    """An error naming an option writes it `{name}` with `parameters=`, so the command line
    shows the flag: one written in backticks would reach the user as the library's name."""
    dests, found = _every_dest(), []
    package = Path(_parse.__file__).parents[1]
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "InvalidInput"):
                continue
            for argument in node.args:
                for text in ast.walk(argument):
                    if isinstance(text, ast.Constant) and isinstance(text.value, str):
                        named = set(re.findall(r"`(\w+)`", text.value)) & dests
                        found += [
                            f"{path.relative_to(package)}:{node.lineno} `{name}`" for name in named
                        ]
    assert found == []
