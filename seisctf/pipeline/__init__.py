"""Dask transforms on xarray objects and stored arrays: noise, normalisation, CTF task bundles."""
