"""Event, pick and station tables (grown by the phase-picking issues)."""
