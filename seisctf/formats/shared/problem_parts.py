"""An ingest's problem lines kept where they were found: the client holds their counts and a few
first and last lines, never every line (a partition of many bad files has a line for each).

`LineCount` is what a partition's summary says of its lines; `ProblemLines` the lines of a
whole plan in order, in parts: a tuple of lines held here (merged lines, few: one per station or
channel at most) or a handle of a partition's lines kept on a worker (`partition_tasks.Each`
with `keep`). Tasks take the parts as arguments (`joined` gives the lines in order), so the lines
go from worker to worker; `ProblemLines.lines` brings them here, for the few uses that need them
all (strict mode's error, tests).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from seisctf.cluster import compute
from seisctf.formats.shared.input_listing import SHOWN

HEAD_LINES = SHOWN  # lines a summary keeps of a partition's (the first few an error names)


@dataclass(frozen=True)
class LineCount:
    """A partition's problem lines as the client sees them: how many, the first HEAD_LINES
    and the last ("" without any)."""

    count: int
    head: tuple[str, ...]
    last: str = ""


def line_count(lines: Sequence[str]) -> LineCount:
    """The `LineCount` of `lines`."""
    return LineCount(len(lines), tuple(lines[:HEAD_LINES]), lines[-1] if len(lines) else "")


def first_lines(counts: Sequence[LineCount], limit: int = HEAD_LINES) -> list[str]:
    """The first `limit` lines of the partitions of `counts`, in order (each keeps HEAD_LINES:
    `limit` at most HEAD_LINES)."""
    head: list[str] = []
    for part in counts:
        head += part.head[: limit - len(head)]
    return head


def last_line(counts: Sequence[LineCount]) -> str:
    """The last line of the partitions of `counts` ("" without any)."""
    return next((part.last for part in reversed(counts) if part.count), "")


def joined(parts: Sequence[Sequence[str]]) -> list[str]:
    """The lines of `parts` in order (a task's arguments, handles resolved)."""
    return [line for part in parts for line in part]


def _is_here(part: Any) -> bool:
    return isinstance(part, (tuple, list))


@dataclass(frozen=True, eq=False)
class ProblemLines:
    """Problem lines in order, in `parts` (tuples of lines here, or handles of those kept on
    workers) of `counts` lines each. Its length is their number; iterating or comparing it
    brings every line here (`lines`)."""

    parts: tuple[Any, ...] = ()
    counts: tuple[int, ...] = ()

    @classmethod
    def of(cls, lines: Sequence[str]) -> ProblemLines:
        """Lines held here."""
        return cls((tuple(lines),), (len(lines),))

    @classmethod
    def kept(cls, handles: Sequence[Any], counts: Sequence[LineCount]) -> ProblemLines:
        """The lines of partitions kept where they are (`handles`, in order), `counts` theirs."""
        return cls(tuple(handles), tuple(part.count for part in counts))

    def __add__(self, other: ProblemLines | Sequence[str]) -> ProblemLines:
        more = other if isinstance(other, ProblemLines) else ProblemLines.of(other)
        return ProblemLines(self.parts + more.parts, self.counts + more.counts)

    def __len__(self) -> int:
        return sum(self.counts)

    def nonempty_parts(self) -> list[Any]:
        """The parts holding lines (tasks' arguments)."""
        return [part for part, count in zip(self.parts, self.counts, strict=True) if count]

    def lines(self) -> list[str]:
        """Every line, in order, here (computed from the workers' parts, if any)."""
        parts = self.nonempty_parts()
        if all(_is_here(part) for part in parts):
            return joined(parts)
        import dask

        return list(compute(dask.delayed(joined)(parts), quiet=True)[0])

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ProblemLines, tuple, list)):
            return self.lines() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
