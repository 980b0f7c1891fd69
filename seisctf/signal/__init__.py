"""Signal helpers the formats, the build and the pipeline share: filter design, trace levels,
rechunking, halos."""
