"""The documented paths keep the truth hidden (issue 36): two people typing the README's
step-by-step commands (sizes shrunk, each in a folder and processes of their own) get two
different truths, and a store made from an explicit `--seed` is refused as a challenge's
source. Everything runs through the real command line (`benchmarks/red_team/paths.py`) and the
real referee; goes red if a default seed ever returns."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import zarr

from benchmarks.red_team import harness, paths


def test_readme_commands_are_extracted_from_the_readme() -> None:
    commands = paths.readme_commands(paths.README.read_text())
    verbs = [command[0] for command in commands]
    assert verbs[:2] == ["synth", "tasks"] and "score" in verbs
    assert not any("--secret" in command for command in commands)  # typed as written: none
    small = paths.readme_path(small=True).commands[0]
    assert small[small.index("--sensors") + 1] == paths.SMALL_SIZES["--sensors"]


def through_truth(path: paths.DocumentedPath) -> paths.DocumentedPath:
    """`path`'s commands up to the one that writes its truth (`tasks`): those after it
    (baseline, score, leaderboard) read the bundle and never write the truth."""
    last = next(i for i, command in enumerate(path.commands) if path.truth in command)
    assert path.commands[last][0] == "tasks"
    return dataclasses.replace(path, commands=path.commands[: last + 1])


def test_a_second_person_typing_the_readme_does_not_regenerate_the_truth(tmp_path: Path) -> None:
    """Each types the block's commands up to their truth (the whole block runs as written in
    tests/test_readme_first_sections.py), at the same time: much of a small synthesis is its
    client's own serial work."""
    path = through_truth(paths.readme_path(small=True))
    people = {person: tmp_path / person for person in ("organiser", "participant")}

    def typed(folder: Path) -> paths.PersonRun:
        return paths.run_person(path, folder, secret=None)

    with ThreadPoolExecutor(max_workers=len(people)) as typing:
        runs = dict(zip(people, typing.map(typed, people.values()), strict=True))
    for person, run in runs.items():
        assert run.refused is None, f"{person}: {run.refused}"
    _, manifest = harness.load_public(str(people["organiser"] / path.public))
    first = paths.regenerated_truth(str(people["organiser"] / path.truth), manifest)
    second = paths.regenerated_truth(str(people["participant"] / path.truth), manifest)
    assert all(not np.array_equal(first[name], second[name]) for name in first)
    result = harness.score(
        str(people["organiser"] / path.truth), second, "regenerated", tmp_path / "scores"
    )
    assert result["avg_score"] < paths.GOAL_REGENERATED_MAX, result["scores"]
    # The participant's own truth, as a submission, is the truth of their own bundle.
    own = harness.score(str(people["participant"] / path.truth), second, "own", tmp_path / "own")
    assert own["avg_score"] == 100.0


def test_tasks_refuses_a_store_made_from_an_explicit_seed(tmp_path: Path) -> None:
    (seeded_path,) = [p for p in paths.synth_paths(small=True) if p.refusal_expected]
    synth, tasks = seeded_path.commands
    assert "--seed" in synth and tasks[0] == "tasks"
    run = paths.run_person(seeded_path, tmp_path, secret=None)
    assert run.refused is not None, "tasks cut a bundle from a store made with --seed"
    assert "seed" in run.refused.lower() or "public" in run.refused.lower(), run.refused
    store = zarr.open_group(str(tmp_path / synth[synth.index("--out") + 1]), mode="r")
    assert "u" in store  # the synthesis ran; tasks refused it
    assert not (tmp_path / seeded_path.public).exists()
    assert not (tmp_path / seeded_path.truth).exists()


def test_every_shipped_recipe_is_a_documented_path() -> None:
    """The attack runs each recipe seisctf ships: a moved folder must not drop them."""
    names = {path.name for path in paths.recipe_paths(small=True)}
    assert names == {"recipe demo-crustal", "recipe demo-das", "recipe demo-global"}
