"""Synthetic sources: the global, DAS and crustal generators, registered in `SYNTHS`
(`sources`)."""

from seisctf.synth import sources as sources  # registers the synthetic sources
