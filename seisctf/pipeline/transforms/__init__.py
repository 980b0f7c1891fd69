"""Dask transforms on stores: filters, noise, DAS channel transforms, each registered in
`TRANSFORMS` by its module (found through its entry point)."""
