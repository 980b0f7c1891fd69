"""The recipe source `waveform_archive`: `seisctf ingest waveforms` (`waveforms.ingest_waveforms`)
as a recipe's source, its options declared once (`WaveformArchiveOptions`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from seisctf.formats.obspy_archive.response import OUTPUTS as RESPONSE_OUTPUTS
from seisctf.formats.obspy_archive.waveforms import ingest_waveforms
from seisctf.formats.shared.source import (
    BlockSamples,
    InputPaths,
    Inventories,
    Strict,
    opened_source,
)
from seisctf.options import option
from seisctf.plugins.context import BuildContext
from seisctf.registry import INGESTS

if TYPE_CHECKING:  # an annotation only: the ingest's client need not import xarray
    import xarray as xr

# `pre_filt` of a recipe: "auto", null or four positive corners, Hz (`response.requested_removal`).
PRE_FILT_SCHEMA = {
    "anyOf": [
        {"const": "auto"},
        {"type": "null"},
        {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0},
            "minItems": 4,
            "maxItems": 4,
        },
    ]
}


@dataclass(frozen=True, kw_only=True)
class WaveformArchiveOptions:
    """A recipe's options of `waveform_archive`, passed on to `ingest_waveforms` as given (one
    left out, None here, takes its default there)."""

    sources: InputPaths
    inventory: Inventories = option(None)
    rate: float = option(None, "resample every trace to this rate, Hz", exclusive_minimum=0)
    strict: Strict = option(None)
    remove_response: str = option(
        None,
        "remove the instrument response, to this output (needs `inventory`)",
        schema={"enum": list(RESPONSE_OUTPUTS)},
    )
    pre_filt: Literal["auto"] | tuple[float, float, float, float] | None = option(
        None,
        'corners of the response removal\'s filter, Hz ("auto": from the rate; null: none)',
        schema=PRE_FILT_SCHEMA,
    )
    water_level: float | None = option(None, "of the response removal, dB (null: none)")
    block_samples: BlockSamples = option(None)


@INGESTS.register(
    "waveform_archive",
    options=WaveformArchiveOptions,
    command="waveforms",
    cli=ingest_waveforms,
    help="seismogram files (any obspy format) -> continuous store",
)
def waveform_archive(
    context: BuildContext, *, sources: list[str], inventory: Sequence[str] = (), **options: Any
) -> xr.Dataset:
    """`seisctf ingest waveforms` of `sources` (paths, globs, folders, fsspec URLs) into the
    continuous waveform store at `context.source_url`, opened lazily."""
    report = ingest_waveforms(
        [context.resolve(item) for item in sources],
        context.location(context.require_source_url()),
        inventories=[context.resolve(item) for item in inventory],
        quiet=context.quiet,
        **options,
    )
    return opened_source(context, report.problems)
