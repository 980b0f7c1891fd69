"""Dask transforms on stores: filters, noise, DAS channel transforms, halos, the counter
generator."""
