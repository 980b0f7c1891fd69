"""Formats: one folder a format, each with its ingest from raw files into a store.

Each format registers its recipe source in `seisctf.registry.INGESTS` (name, options schema,
`ingest=True`, the `seisctf ingest` command `cli`); importing this package registers them all.
`shared` holds what the resumable ingests share (listing, manifest, cache, block writes).
"""

from seisctf.formats.das import das_files
from seisctf.formats.obspy_archive import waveforms
from seisctf.formats.quakeml import quakeml_windows
from seisctf.formats.seisbench import ingest as seisbench_ingest
from seisctf.formats.shared.source import source_store_url
from seisctf.formats.stead import ingest as stead_ingest

__all__ = [
    "das_files",
    "quakeml_windows",
    "seisbench_ingest",
    "source_store_url",
    "stead_ingest",
    "waveforms",
]
