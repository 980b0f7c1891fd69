"""seisctf: seismic benchmark datasets and a hidden-truth referee."""

__version__ = "0.1.0"
