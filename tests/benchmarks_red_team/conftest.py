"""The red team's code lives in `benchmarks/`, beside the package: make the repository root
importable however pytest is started."""

import sys
from pathlib import Path

REPOSITORY_ROOT = str(Path(__file__).resolve().parents[2])
if REPOSITORY_ROOT not in sys.path:
    sys.path.insert(0, REPOSITORY_ROOT)
