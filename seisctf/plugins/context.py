"""What a recipe build carries besides the recipe: `BuildContext`, its inputs (frozen), and the
`BuildReport` the engine fills in and returns. Recipe sources (ingests and synthetic
generators, `seisctf.registry`) are `function(context, **options) -> xr.Dataset`; outputs
record what they wrote or skipped in `context.report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from seisctf import keys, s3, storage
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation, is_remote
from seisctf.plugins.layouts import Layout


@dataclass
class BuildReport:
    """What a build did: the outputs' URLs it wrote and those it skipped as up to date, the
    checkpoint stores it made (removed when it ends), and where its `store` output is (the
    other outputs read it rather than recompute the chain)."""

    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    store_output: str | None = None


@dataclass(frozen=True)
class BuildContext:
    """What a build needs besides the recipe: where relative URLs live, storage options, the
    organiser's secret (`keys.resolve_secret`), whether the organiser accepts a truth anyone can
    regenerate (`public_truth`: `--public-truth`) and output verbosity; then what the engine
    derives from the recipe before it runs a plugin (`dataclasses.replace`): the layout, the
    store an ingest source writes, the checkpoints' folder. `report`: filled in as it runs."""

    workdir: Path = Path(".")
    storage_options: storage.StorageOptions | None = None
    secret: keys.Secret | None = None
    quiet: bool = False
    public_truth: bool = False
    # The recipe's `splits.ctf.layout`, parsed once (sizes synthetic sources and the bundle).
    layout: Layout | None = None
    source_url: str | None = None  # the store an ingest source writes (`source_store_url`)
    scratch: str | None = None  # where checkpoints go (private: next to the outputs)
    report: BuildReport = field(default_factory=BuildReport)

    def __post_init__(self) -> None:
        # A caller's plain dict too: its credentials stay out of every graph the build runs.
        object.__setattr__(self, "storage_options", s3.held_apart(self.storage_options))

    @property
    def written(self) -> list[str]:
        """`report.written`."""
        return self.report.written

    @property
    def skipped(self) -> list[str]:
        """`report.skipped`."""
        return self.report.skipped

    def resolve(self, url: str) -> str:
        if is_remote(url) or Path(url).is_absolute():
            return url
        return str(self.workdir / url)

    def location(self, url: str) -> StoreLocation:
        """`url` (a resolved one: `resolve`) with the build's storage options."""
        return StoreLocation(url, self.storage_options)

    def require_secret(self, what: str) -> str:
        """The secret's value (a build resolves one before any work; a bare context has none)."""
        if self.secret is None:
            raise InvalidInput(
                what,
                f"needs a secret to derive its seed from: --secret or ${keys.SECRET_ENV}",
            )
        return self.secret.value

    def require_source_url(self) -> str:
        """`source_url`: the store an ingest source writes, which the engine sets before it
        calls one."""
        if self.source_url is None:
            raise RuntimeError("an ingest source runs with `source_url` set (source_store_url)")
        return self.source_url
