"""Formats: one folder a format, each with its ingest from raw files into a store.

A format's folder holds its reading, planning and writing, and registers its recipe source in
`seisctf.registry.INGESTS` (an `Ingest`: name, options, the `seisctf ingest` command); the
entry point naming it (`seisctf.ingests` in pyproject.toml) is how seisctf finds it. `shared`
holds what the resumable ingests share (listing, manifest, cache, block writes, progress).
"""
