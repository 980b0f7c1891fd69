"""STEAD HDF5: `seisctf ingest stead`."""
