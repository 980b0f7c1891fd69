"""tests/conftest.py's helpers, reached through pytest's plugin manager.

Not `from conftest import …`: pytest imports every conftest.py of a folder that is not a package
(such as tests/reliability/) under the module name `conftest`, so that import gives whichever
conftest.py was loaded last."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

ROOT_CONFTEST = Path(__file__).parent / "conftest.py"


def root_conftest(config: pytest.Config) -> ModuleType:
    """tests/conftest.py as pytest loaded it (its `write_tiny_truth`, `noisy_copy`, …)."""
    return config.pluginmanager.get_plugin(str(ROOT_CONFTEST))
