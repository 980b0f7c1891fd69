"""Red team of the documented paths: does a participant who types the organiser's public
commands regenerate the organiser's truth?

Per documented path (`documented_paths`): an organiser runs the documented commands in a folder
of their own, then a participant, in another folder and another process, runs the same public
commands without the organiser's secret (as the docs say: they do not have it), and the truth
the participant's commands wrote is submitted to the real referee (`seisctf score ctf`,
reference convention) against the organiser's truth. The paths:

- `readme`: the README's "The commands, step by step" block, extracted from README.md itself
  (so the attack follows the README when it changes) and typed as written: no secret.
- `recipe NAME`: every shipped recipe (`seisctf/build/shipped/*.yaml`) run with the
  `seisctf build` line of docs/recipes.md, the organiser with a fresh random secret where that
  line passes one (handed over as $SEISCTF_SECRET, which the docs give as equivalent to
  `--secret`, so no other user's `ps` shows it) and once as typed without it.
- `demo DATASET`: `seisctf demo --workdir seisctf-demo` (README, "What `make demo` does"):
  its truth comes from a published secret on purpose, so the goal is that it says so: the
  bundle's manifest states `truth: public` and every leaderboard page the truth-public note.
- `synth DATASET`: `seisctf synth das|crustal` then `seisctf tasks` (docs/contract.md, "Options of
  each verb"; docs/crustal.md), no secret; and `synth global --seed 1`: a generator seed anyone
  can type again, which `tasks` must refuse.

An outcome is `scored` (the regenerated truth's AvgScore; the goal is below
GOAL_REGENERATED_MAX), `refused` (a command exited 3 by design; its message is the reason) or
`marked public` (the regenerated truth scores what it scores, and the bundle says so). Sizes:
`small=True` shrinks every path to what its layout allows (SMALL_SIZES); otherwise the sizes
are the documented ones, except crustal's 94 x 94 grid (CRUSTAL_SYNTH: the red team's grid).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
import zarr

from benchmarks.red_team import harness
from seisctf import conventions as cv
from seisctf import keys

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_SECTION = "## The commands, step by step"
RECIPES_DOC = ROOT / "docs" / "recipes.md"
SHIPPED_RECIPES = ROOT / "seisctf" / "build" / "shipped"
GOAL_REGENERATED_MAX = 20.0
INVALID_INPUT_EXIT = 3
SECRET_ENV = "SEISCTF_SECRET"
# The smallest sizes the shipped layouts allow: 199 sensors or channels (2 · modes − 1) and
# 600 steps (the crustal layout, which `--layout auto` picks for a 600 s global record).
SMALL_SIZES = {"--sensors": "200", "--duration": "600", "--channels": "200"}
SMALL_RECIPE_SOURCES = {
    "synthetic_global": {"sensors": 200},
    "synthetic_das": {"channels": 200},
    "synthetic_crustal": {"sensors": 256, "parametric": 0, "initial_conditions": 0},
}
SMALL_DEMO_SENSORS = {"global": "200", "das": "200", "crustal": "256"}
CRUSTAL_SYNTH = ("--grid", "16", "--sensor-spacing", "300", "--depth", "5000")
CRUSTAL_SMALL = ("--parametric", "0", "--initial-conditions", "0")


@dataclass(frozen=True)
class DocumentedPath:
    """Commands a person types, in their own folder: each one `seisctf`'s arguments (a
    `--secret` among them stands for the organiser's secret), the files they read (name → text:
    a recipe), and where they leave the bundle and, when they write them, leaderboard pages."""

    name: str
    documented_in: str
    commands: tuple[tuple[str, ...], ...]
    public: str
    truth: str
    pages: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    refusal_expected: bool = False
    public_expected: bool = False


@dataclass(frozen=True)
class PersonRun:
    """What one person's commands did: the message of the command that exited 3 (None: all
    ran), and how long they took (s)."""

    refused: str | None
    seconds: float


def readme_commands(text: str) -> tuple[tuple[str, ...], ...]:
    """The `seisctf` commands of the first fenced block under README_SECTION, as argument
    tuples without the leading `seisctf` (shell comments dropped)."""
    section = text[text.index(README_SECTION) :]
    block = re.search(r"^```[a-z]*\n(.*?)^```", section, flags=re.M | re.S)
    if block is None:
        raise ValueError(f"README: no code block under {README_SECTION!r}")
    lines = (shlex.split(line, comments=True) for line in block[1].splitlines())
    return tuple(tuple(words[1:]) for words in lines if words[:1] == ["seisctf"])


def recipes_doc_build_line(text: str) -> tuple[str, ...]:
    """The `seisctf build` line docs/recipes.md shows, without `seisctf`."""
    match = re.search(r"^seisctf build .*$", text, flags=re.M)
    if match is None:
        raise ValueError(f"{RECIPES_DOC}: no `seisctf build` line")
    return tuple(shlex.split(match[0])[1:])


def with_sizes(arguments: tuple[str, ...], sizes: dict[str, str]) -> tuple[str, ...]:
    """`arguments` with the value after each option of `sizes` replaced (options absent stay
    absent)."""
    words = list(arguments)
    for index, word in enumerate(words[:-1]):
        if word in sizes:
            words[index + 1] = sizes[word]
    return tuple(words)


def without_secret(arguments: tuple[str, ...]) -> tuple[str, ...]:
    """`arguments` without `--secret VALUE` (or `--secret=VALUE`)."""
    words, skip = [], False
    for word in arguments:
        if skip:
            skip = False
        elif word == "--secret":
            skip = True
        elif not word.startswith("--secret="):
            words.append(word)
    return tuple(words)


def small_recipe(text: str) -> str:
    """A recipe's YAML with its synthetic source shrunk to SMALL_RECIPE_SOURCES."""
    recipe = yaml.safe_load(text)
    for source, values in recipe["source"].items():
        values.update(SMALL_RECIPE_SOURCES.get(source, {}))
    return yaml.safe_dump(recipe, sort_keys=False)


def readme_path(small: bool) -> DocumentedPath:
    commands = readme_commands(README.read_text())
    if small:
        commands = tuple(with_sizes(command, SMALL_SIZES) for command in commands)
    return DocumentedPath(
        "readme", "README.md, " + README_SECTION[3:], commands, "public.zarr", "truth.zarr", "site"
    )


def recipe_paths(small: bool) -> list[DocumentedPath]:
    """Every shipped recipe through docs/recipes.md's `seisctf build` line, its outputs'
    URLs under the line's --workdir."""
    line = recipes_doc_build_line(RECIPES_DOC.read_text())
    workdir = line[line.index("--workdir") + 1]
    paths = []
    shipped = sorted(SHIPPED_RECIPES.glob("*.yaml"))
    if not shipped:  # a move of the folder must not drop these paths from the attack silently
        raise FileNotFoundError(f"no shipped recipe in {SHIPPED_RECIPES}")
    for recipe in shipped:
        text = recipe.read_text()
        outputs = yaml.safe_load(text)["outputs"]["ctf_bundle"]
        command = tuple("recipe.yaml" if word.endswith(".yaml") else word for word in line)
        paths.append(
            DocumentedPath(
                f"recipe {recipe.stem}",
                f"docs/recipes.md; seisctf/build/shipped/{recipe.name}",
                (command,),
                f"{workdir}/{outputs['public']}",
                f"{workdir}/{outputs['truth']}",
                files={"recipe.yaml": small_recipe(text) if small else text},
            )
        )
    return paths


def demo_paths(small: bool) -> list[DocumentedPath]:
    """`seisctf demo --workdir seisctf-demo` for each dataset (the truth is public by design)."""
    paths = []
    for dataset in ("global", "das", "crustal"):
        command = ("demo", "--workdir", "seisctf-demo", "--dataset", dataset)
        if small or dataset == "crustal":
            command += ("--sensors", SMALL_DEMO_SENSORS[dataset])
        paths.append(
            DocumentedPath(
                f"demo {dataset}",
                "README.md, What `make demo` does",
                (command,),
                f"seisctf-demo/public/bundle-{dataset}.zarr",
                f"seisctf-demo/private/truth-{dataset}.zarr",
                "seisctf-demo/leaderboard",
                public_expected=True,
            )
        )
    return paths


def synth_paths(small: bool) -> list[DocumentedPath]:
    """`synth das|crustal` + `tasks`, and `synth global --seed 1` + `tasks` (refused)."""
    das = ("synth", "das", "--out", "das.zarr", "--channels", "256")
    crustal = ("synth", "crustal", "--out", "crustal.zarr", *CRUSTAL_SYNTH)
    seeded = (*readme_commands(README.read_text())[0], "--seed", "1")
    if small:
        das, seeded = with_sizes(das, SMALL_SIZES), with_sizes(seeded, SMALL_SIZES)
        crustal += CRUSTAL_SMALL
    contract = "docs/contract.md, Options of each verb"
    paths = []
    for name, synth, layout, documented_in in (
        ("synth das", das, "das", contract),
        ("synth crustal", crustal, "crustal", "docs/crustal.md"),
        ("synth global --seed", seeded, "auto", contract),
    ):
        store = synth[synth.index("--out") + 1]
        tasks = ("tasks", store, "--public", "public.zarr", "--truth", "truth.zarr")
        paths.append(
            DocumentedPath(
                name,
                documented_in,
                (synth, (*tasks, "--layout", layout)),
                "public.zarr",
                "truth.zarr",
                refusal_expected="--seed" in synth,
            )
        )
    return paths


def documented_paths(small: bool = False) -> list[DocumentedPath]:
    """Every documented path (module docstring), at small sizes or the documented ones."""
    return [readme_path(small), *recipe_paths(small), *demo_paths(small), *synth_paths(small)]


def run_person(path: DocumentedPath, folder: Path, secret: str | None) -> PersonRun:
    """Run `path`'s commands in `folder` as one person: with `secret` as $SEISCTF_SECRET in
    place of the commands' `--secret` (the organiser), or with none at all (a participant:
    $SEISCTF_SECRET unset). Stops at the first command that exits 3."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in path.files.items():
        (folder / name).write_text(text)
    environment = {key: value for key, value in os.environ.items() if key != SECRET_ENV}
    if secret is not None:
        environment[SECRET_ENV] = secret
    started = time.perf_counter()
    for arguments in path.commands:
        completed = subprocess.run(
            [sys.executable, "-m", "seisctf.cli", *without_secret(arguments)],
            cwd=folder,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode == INVALID_INPUT_EXIT:
            message = completed.stderr.strip().splitlines() or ["(no message)"]
            return PersonRun(message[-1], time.perf_counter() - started)
        if completed.returncode != 0:
            raise RuntimeError(
                f"{path.name}: `seisctf {' '.join(without_secret(arguments))}` exited "
                f"{completed.returncode}:\n{completed.stderr.strip()}"
            )
    return PersonRun(None, time.perf_counter() - started)


def regenerated_truth(truth_url: str, manifest: dict) -> dict[str, np.ndarray]:
    """The test arrays of `manifest`'s pairs read from `truth_url` (float64)."""
    group = zarr.open_group(truth_url, mode="r")
    return {p["test"]: np.asarray(group[p["test"]][...], np.float64) for p in manifest["pairs"]}


def public_truth_stamps(folder: Path, path: DocumentedPath) -> dict[str, bool | None]:
    """Whether the bundle's manifest says `truth: public`, and whether every leaderboard page
    the path wrote carries `conventions.PUBLIC_TRUTH_NOTE` (None: it writes none)."""
    manifest = dict(zarr.open_group(str(folder / path.public), mode="r").attrs["ctf"])
    pages = sorted((folder / path.pages).rglob("*.html")) if path.pages else []
    return {
        "manifest": manifest.get(cv.PROVENANCE_TRUTH) == keys.TRUTH_PUBLIC,
        "pages": all(cv.PUBLIC_TRUTH_NOTE in p.read_text() for p in pages) if pages else None,
    }


def attack_path(path: DocumentedPath, workdir: Path, organiser_secret: bool) -> dict:
    """Organiser (with a fresh random secret if `organiser_secret`, else as typed), then a
    participant without one; the participant's truth scored against the organiser's. Returns
    {path, organiser, documented_in, outcome, seconds, goal_met} and `reason` (refused) or
    `avg_score` and `stamps` (scored, marked public)."""
    row = {
        "path": path.name,
        "organiser": "with its secret" if organiser_secret else "as typed",
        "documented_in": path.documented_in,
        "seconds": {},
    }
    people = {
        "organiser": secrets.token_urlsafe(harness.SECRET_BYTES) if organiser_secret else None,
        "participant": None,
    }
    for person, secret in people.items():
        harness.log(f"paths: {path.name} ({row['organiser']}): {person}")
        run = run_person(path, workdir / person, secret)
        row["seconds"][person] = run.seconds
        if run.refused:
            return row | {"outcome": "refused", "reason": run.refused,
                          "goal_met": path.refusal_expected}  # fmt: skip
    people.clear()
    _, manifest = harness.load_public(str(workdir / "organiser" / path.public))
    predictions = regenerated_truth(str(workdir / "participant" / path.truth), manifest)
    truth = str(workdir / "organiser" / path.truth)
    result = harness.score(truth, predictions, "regenerated", workdir / "scores")
    stamps = public_truth_stamps(workdir / "organiser", path)
    if path.public_expected:
        goal_met = stamps["manifest"] and stamps["pages"] is not False
    else:
        hidden = not path.refusal_expected and not stamps["manifest"]
        goal_met = hidden and result["avg_score"] < GOAL_REGENERATED_MAX
    return row | {
        "outcome": "marked public" if stamps["manifest"] else "scored",
        "avg_score": result["avg_score"],
        "stamps": stamps,
        "goal_met": goal_met,
    }


def organiser_variants(path: DocumentedPath) -> tuple[bool, ...]:
    """(True,) and (False,): with the organiser's secret where the documented commands pass one,
    and as typed without it; the others as typed only."""
    passes_secret = any("--secret" in command for command in path.commands)
    return (True, False) if passes_secret else (False,)


def attack_paths(workdir: Path, small: bool = False, names: list[str] | None = None) -> list[dict]:
    """`attack_path` for every documented path (or those whose name starts with one of `names`)
    and organiser variant, each in its own folder under `workdir`."""
    rows = []
    for path in documented_paths(small):
        if names and not any(path.name.startswith(name) for name in names):
            continue
        for with_secret in organiser_variants(path):
            folder = workdir / re.sub(r"\W+", "-", f"{path.name} {with_secret}")
            rows.append(attack_path(path, folder, with_secret))
    return rows


def print_rows(rows: list[dict]) -> None:
    """One line per path and organiser: outcome, AvgScore or reason, seconds, goal."""
    print(f"\n{'path':<24} {'organiser':<16} {'outcome':<14} {'AvgScore':>8} {'goal':>5}  detail")
    for row in rows:
        score = f"{row['avg_score']:.2f}" if "avg_score" in row else "—"
        detail = row.get("reason") or (
            f"manifest truth-public {row['stamps']['manifest']}, pages {row['stamps']['pages']}"
        )
        seconds = " + ".join(f"{s:.0f} s" for s in row["seconds"].values())
        print(
            f"{row['path']:<24} {row['organiser']:<16} {row['outcome']:<14} {score:>8} "
            f"{'yes' if row['goal_met'] else 'NO':>5}  {detail} ({seconds})"
        )
