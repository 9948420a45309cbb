"""The course's table of contents: one entry per lesson notebook, used by the README, the tests
(every claim of a lesson must have a cell that asserts it) and the benchmark."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lesson", "LESSONS", "lesson"]


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str
    notebook: str  # file name under notebooks/
    claims: tuple[str, ...]  # claim IDs of the course specification, each asserted in the notebook
    explorer: str | None  # function name in helpers.widgets
    topic: str  # module name used under helpers.widgets / helpers.checks / helpers.plots


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        4,
        "Position: why attention needs it, sinusoidal and learned encodings",
        "04_positional_encoding.ipynb",
        ("C4.1", "C4.2", "C4.3", "C4.4", "C4.5", "C4.6"),
        "positional_explorer",
        "position",
    ),
)


def lesson(number: int) -> Lesson:
    for entry in LESSONS:
        if entry.number == number:
            return entry
    raise ValueError(f"no lesson {number}; lessons: {[e.number for e in LESSONS]}")
