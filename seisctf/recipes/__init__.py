"""Raw archives and offline generators -> zarr stores."""
