"""Ingests: raw archives (miniSEED, SAC, DAS vendor files, SeisBench/STEAD HDF5, QuakeML) into
stores."""
