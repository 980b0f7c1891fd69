"""What a plugin (ingest, synthetic source, transform, output) is given: the build context,
option schemas, layouts."""
