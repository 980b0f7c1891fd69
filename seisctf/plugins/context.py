"""What a recipe build carries besides the recipe: `BuildContext`. Recipe sources (ingests and
synthetic generators, `seisctf.registry`) are `function(context, **options) -> xr.Dataset`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from seisctf import keys, s3, storage
from seisctf.errors import InvalidInput
from seisctf.location import StoreLocation, is_remote
from seisctf.plugins.layouts import Layout


@dataclass
class BuildContext:
    """What a build needs besides the recipe: where relative URLs live, storage options, the
    organiser's secret (`keys.resolve_secret`), whether the organiser accepts a truth anyone can
    regenerate (`public_truth`: `--public-truth`) and output verbosity."""

    workdir: Path = Path(".")
    storage_options: storage.StorageOptions | None = None
    secret: keys.Secret | None = None
    quiet: bool = False
    public_truth: bool = False
    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    scratch: str | None = None  # where checkpoints go (private: next to the outputs)
    checkpoints: list[str] = field(default_factory=list)
    # The recipe's `splits.ctf.layout`, parsed once (sizes synthetic sources and the bundle).
    layout: Layout | None = None
    source_url: str | None = None  # the store an ingest source writes (`source_store_url`)
    store_output: str | None = None  # where the `store` output was written (outputs read it)

    def __post_init__(self) -> None:
        # A caller's plain dict too: its credentials stay out of every graph the build runs.
        self.storage_options = s3.held_apart(self.storage_options)

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
