"""Library errors name parameters (`fractions`, `truth_url`); the CLI shows its users the flags
they typed (`--fractions`, `--truth`) and exits 3."""

from __future__ import annotations

import argparse

import pytest
from conftest import TINY_LAYOUT_YAML, smooth_wavefield

from seisctf import storage
from seisctf.cli import EXIT_INVALID_INPUT, main
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
    ("what", "problem", "shown"),
    [
        ("rate", "must be > 0", "--rate: must be > 0"),
        ("rate_hz", "must be > 0", "--rate: must be > 0"),  # PARAMETER_DESTS
        ("truth_url", "must differ from `public_url`", "--truth: must differ from --public"),
        ("truth/public", "both missing", "--truth/--public: both missing"),
        (
            "`storage_options` 'x'",
            "expected KEY=VALUE",
            "`storage_options` 'x': expected KEY=VALUE",
        ),
        ("submitter_code_url", "expected http(s)", "--code-url: expected http(s)"),
        # Names the verb has no option for stay as the library wrote them.
        ("layout", "unknown", "layout: unknown"),
        ("rate/layout", "x", "rate/layout: x"),
        ("in.zarr", "needs `seed`", "in.zarr: needs `seed`"),
    ],
)
def test_flag_error_names_the_verbs_flags(what, problem, shown):
    flags = {"rate": "--rate", "truth": "--truth", "public": "--public"}
    flags["submitter_code_url"] = "--code-url"
    error = flag_error(InvalidInput(what, problem), flags)
    assert isinstance(error, InvalidInput) and str(error) == shown


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
