"""DAS vendor files (dascore): `seisctf ingest das`."""
