"""Dask transforms on stores: filters, noise, DAS channel transforms, halos, the counter
generator. Importing the package registers the recipe transforms in `TRANSFORMS`."""

from seisctf.pipeline.transforms import das_channels, filters, noise, noise_real

__all__ = ["das_channels", "filters", "noise", "noise_real"]
