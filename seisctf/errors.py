"""The one error type for bad input; `cli.py` turns it into exit code 3.

An error may name the library parameters it is about (`parameters`), written `{name}` in its
text. The library spells them as their names (`` `name` `` inside the problem); the command
line spells each as the running verb's flag (`InvalidInput.spelt`), so the user reads the
option they typed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

# How a parameter is shown: its flag (`--rate`), or None to keep the library's spelling.
Spelling = Callable[[str], "str | None"]


def _named(name: str) -> str | None:
    return None


@dataclass(frozen=True)
class Message:
    """Text naming library parameters as `{name}` placeholders (those in `parameters` only:
    any other brace is text)."""

    template: str
    parameters: tuple[str, ...] = ()

    def spelt(self, spelling: Spelling = _named, *, quoted: bool = True) -> str:
        """The text with each parameter as `spelling` gives it, else as its name (in backticks
        when `quoted`)."""
        text = self.template
        for name in self.parameters:
            shown = spelling(name) or (f"`{name}`" if quoted else name)
            text = text.replace("{" + name + "}", shown)
        return text

    def __str__(self) -> str:
        return self.spelt()


class InvalidInput(Exception):
    """Input that cannot be used, naming what is at fault and what was expected.

    `what` names the file, array, trace, task or parameter; `problem` says what is wrong with
    it. `parameters`: the library parameters written `{name}` in either (module doc); a `what`
    that is a parameter's name alone needs no placeholder.
    """

    def __init__(self, what: str, problem: str, *, parameters: Iterable[str] = ()) -> None:
        named = tuple(parameters)
        self.what_message = Message(what, named)
        self.problem_message = Message(problem, named)
        self.what = self.what_message.spelt(quoted=not self._what_is_parameters())
        self.problem = self.problem_message.spelt()
        super().__init__(f"{self.what}: {self.problem}")

    def _what_is_parameters(self) -> bool:
        """Whether `what` is parameters alone (`{truth}`, `{pre_filt}/{water_level}`): shown as
        their bare names; a parameter with a value (`{participant} 'x'`) in backticks."""
        rest = self.what_message.template
        for name in self.parameters:
            rest = rest.replace("{" + name + "}", "")
        return bool(self.parameters) and not rest.replace("/", "").strip()

    @property
    def parameters(self) -> tuple[str, ...]:
        return self.what_message.parameters

    def spelt(self, spelling: Spelling) -> InvalidInput:
        """This error with its parameters spelt by `spelling` (a verb's flags): those written
        `{name}`, and `what` itself when `spelling` knows it as a parameter."""
        what = self.what_message.spelt(spelling, quoted=not self._what_is_parameters())
        if not any("{" + name + "}" in self.what_message.template for name in self.parameters):
            what = spelling(what) or what
        return InvalidInput(what, self.problem_message.spelt(spelling))

    def __reduce__(self):
        # Raised inside Dask workers too: pickle by its parts so it crosses processes intact.
        return (
            _rebuilt,
            (
                type(self),
                self.what_message.template,
                self.problem_message.template,
                self.parameters,
            ),
        )


def _rebuilt(
    kind: type[InvalidInput], what: str, problem: str, parameters: tuple[str, ...]
) -> InvalidInput:
    return kind(what, problem, parameters=parameters)
