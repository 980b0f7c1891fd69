"""The one error type for bad input; `cli.py` turns it into exit code 3."""

from __future__ import annotations


class InvalidInput(Exception):
    """Input that cannot be used, naming what is at fault and what was expected.

    `what` names the file, array, trace or task; `problem` says what is wrong with it.
    """

    def __init__(self, what: str, problem: str) -> None:
        self.what = what
        self.problem = problem
        super().__init__(f"{what}: {problem}")

    def __reduce__(self):
        # Raised inside Dask workers too: pickle by (what, problem) so it crosses processes intact.
        return (type(self), (self.what, self.problem))
