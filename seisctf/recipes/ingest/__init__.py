"""Ingests: raw archives (miniSEED, SAC, DAS vendor files, SeisBench/STEAD HDF5, QuakeML) into
stores. Each registers its recipe source in `seisctf.registry.INGESTS` (name, options schema,
`ingest=True`, the `seisctf ingest` command `cli`); importing this package registers them all."""

from seisctf.recipes.ingest import das_files, quakeml_windows, seisbench, stead, waveforms
from seisctf.recipes.ingest.source import source_store_url

__all__ = ["das_files", "quakeml_windows", "seisbench", "source_store_url", "stead", "waveforms"]
