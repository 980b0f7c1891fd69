"""`python -m seisctf.cli`."""

from seisctf.cli import entry_point

entry_point()
