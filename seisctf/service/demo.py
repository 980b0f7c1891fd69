"""The service on the demo's bundles in one command (`seisctf serve --demo WORKDIR`): the
competition `WORKDIR/competition/` is made on the first run from the demo's public bundles and
truths (`public/bundle-NAME.zarr` with `private/truth-NAME.zarr`), with one team, `demo`, whose
token is printed then; later runs serve it as it is."""

from __future__ import annotations

from pathlib import Path

from seisctf.errors import InvalidInput
from seisctf.service import competition, tables, teams

DEMO_TEAM = "demo"


def demo_competition(workdir: Path) -> tuple[competition.Competition, str | None]:
    """The demo's competition and, when made now, the demo team's token."""
    folder = workdir / "competition"
    if (folder / competition.CONFIG).exists():
        return competition.load(folder), None
    datasets = {}
    for public in sorted((workdir / "public").glob("bundle-*.zarr")):
        name = public.name.removeprefix("bundle-").removesuffix(".zarr")
        truth = workdir / "private" / f"truth-{name}.zarr"
        if truth.is_dir():
            datasets[name] = (str(public), str(truth))
    if not datasets:
        raise InvalidInput(
            str(workdir),
            "no demo bundle here (public/bundle-NAME.zarr with "
            "private/truth-NAME.zarr): run `make demo` first",
        )
    made = competition.create(folder, "seisctf demo", datasets)
    token = teams.add_team(tables.engine_of(made.db_url), DEMO_TEAM, "the demo's team")
    return made, token
