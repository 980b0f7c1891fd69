"""Waveform archives obspy reads (miniSEED, SAC, ...) and their StationXML: `ingest waveforms`."""
