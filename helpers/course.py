"""The course's table of contents: one entry per lesson notebook, used by the README, the tests
(every claim of a lesson must have a cell that asserts it), the coursework tools, the site and the
benchmark.

Every lesson has a core notebook (``LESSONS``): the sheet's claims for it, its explorer, its core
exercises and the recap, about 90 minutes for a student (``estimated_minutes``). A lesson may also
have an optional companion notebook, "Going further" (``GOING_FURTHER``): what goes beyond the sheet,
executed and checked like the rest, with exercises of its own, assigned separately
(``lesson04b`` beside ``lesson04``). ``NOTEBOOKS`` lists both kinds in course order."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Lesson",
    "LESSONS",
    "GOING_FURTHER",
    "NOTEBOOKS",
    "lesson",
    "part",
    "estimated_minutes",
    "MINUTES",
]


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str
    notebook: str  # file name under notebooks/
    claims: tuple[str, ...]  # claim IDs of the course specification, each asserted in the notebook
    explorer: str | None  # function name in helpers.widgets
    topic: str  # module name used under helpers.widgets / helpers.checks / helpers.plots
    further: bool = False  # True for a lesson's optional "Going further" companion notebook

    @property
    def key(self) -> str:
        """``"4"`` for lesson 4's core notebook, ``"4b"`` for its "Going further" companion."""
        return f"{self.number}{'b' if self.further else ''}"

    @property
    def assignment(self) -> str:
        """The nbgrader assignment of this notebook: ``lesson04``, ``lesson04b``, ..."""
        return f"lesson{self.number:02d}{'b' if self.further else ''}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        4,
        "Position: why attention needs it, sinusoidal and learned encodings",
        "04_positional_encoding.ipynb",
        ("C4.1", "C4.2", "C4.3", "C4.4", "C4.5", "C4.6", "C4.7"),
        "positional_explorer",
        "position",
    ),
    Lesson(
        5,
        "Residual connections and layer norm: pre-norm versus post-norm",
        "05_residuals_and_layer_norm.ipynb",
        ("C5.1", "C5.2", "C5.3", "C5.4", "C5.5", "C5.6", "C5.7"),
        "norm_explorer",
        "residual",
    ),
    Lesson(
        6,
        "The position-wise feed-forward block",
        "06_feed_forward.ipynb",
        ("C6.1", "C6.2", "C6.3", "C6.4", "C6.5"),
        "feedforward_explorer",
        "feedforward",
    ),
    Lesson(
        7,
        "Stacking blocks into depth",
        "07_stacking_blocks.ipynb",
        ("C7.1", "C7.2", "C7.3"),
        "depth_explorer",
        "depth",
    ),
    Lesson(
        8,
        "Entering and leaving the vector space: embeddings, output projection, weight tying",
        "08_embeddings_and_weight_tying.ipynb",
        ("C8.1", "C8.2", "C8.3", "C8.4", "C8.5", "C8.6"),
        "tying_explorer",
        "tying",
    ),
    Lesson(
        9,
        "The full model at work: training it, making it write, the sheet's choices side by side",
        "09_the_full_model.ipynb",
        ("C9.1", "C9.2", "C9.3"),
        "generation_explorer",
        "generation",
    ),
    Lesson(
        10,
        "Trust but verify: the checklist as an executable audit (capstone)",
        "10_trust_but_verify.ipynb",
        ("K1", "K2", "K3", "K4", "K5"),
        None,
        "audit",
    ),
)


#: Optional "Going further" companions, one at most per lesson (``Lesson.further`` is True).
GOING_FURTHER: tuple[Lesson, ...] = (
    Lesson(
        4,
        "Going further: position inside attention (rotary, ALiBi) and without an encoding",
        "04b_position_inside_attention.ipynb",
        ("C4.8", "C4.9"),
        "positional_explorer",  # lesson 4's explorer, its right panel on rotary and ALiBi
        "position",
        further=True,
    ),
    Lesson(
        5,
        "Going further: RMSNorm, the last layer's gradient across depth, a warm-up run live",
        "05b_rmsnorm_and_depth.ipynb",
        ("C5.8",),  # and the depth half of C5.6, the live run of C5.7 (their claims: lesson 5)
        None,  # lesson 5's explorer has the norm-type control; the companion shows none
        "residual",
        further=True,
    ),
)

#: Every notebook of the course in course order: each core lesson, then its companion.
NOTEBOOKS: tuple[Lesson, ...] = tuple(
    entry
    for core in LESSONS
    for entry in (core, *(f for f in GOING_FURTHER if f.number == core.number))
)


def lesson(number: int) -> Lesson:
    """The core notebook of lesson ``number``."""
    for entry in LESSONS:
        if entry.number == number:
            return entry
    raise ValueError(f"no lesson {number}; lessons: {[e.number for e in LESSONS]}")


def part(key: str | int) -> Lesson:
    """A notebook by its key: ``4`` or ``"4"`` (lesson 4's core), ``"4b"`` (its companion)."""
    for entry in NOTEBOOKS:
        if str(key).strip().lower() == entry.key:
            return entry
    raise ValueError(f"no notebook {key!r}; notebooks: {[e.key for e in NOTEBOOKS]}")


#: The reading-time model of a core lesson (issue "Lessons a student can finish in a sitting"):
#: dense prose at 100 words a minute, a minute per code cell, ten per explorer, and each exercise
#: its own estimate of 5 to 25 minutes (``metadata.course.minutes`` of its solution cell).
MINUTES = {"words_per_minute": 100, "code_cell": 1, "explorer": 10, "exercise": (5, 25)}


def estimated_minutes(notebook) -> dict:
    """The time a student needs for a notebook, by ``MINUTES``: a dict of the parts and ``total``.

    ``notebook`` is a path or a notebook dict (nbformat JSON). Words are whitespace-separated
    tokens of the markdown cells; code cells are the non-empty ones; an explorer is a code cell
    that calls ``…_explorer(``; exercises are nbgrader solution cells, each of which must state
    ``metadata["course"]["minutes"]`` between 5 and 25 (a ``ValueError`` says which does not).
    The cell tagged ``course-setup`` (tools/colab_cell.py: installs the course on Colab) is not
    counted, nor a core notebook's optional part: every cell from a markdown cell opening with the
    heading ``## Going further`` on (counted apart, ``further``: its minutes by the same model).
    """
    import json
    import re
    from pathlib import Path

    nb = notebook if isinstance(notebook, dict) else json.loads(Path(notebook).read_text())
    words = code = explorers = 0
    exercises: list[float] = []
    low, high = MINUTES["exercise"]
    cells = list(nb["cells"])
    start = next(
        (
            i
            for i, c in enumerate(cells)
            if c["cell_type"] == "markdown"
            and "".join(c.get("source", "")).lower().startswith("## going further")
        ),
        len(cells),
    )
    further = 0.0
    if start < len(
        cells
    ):  # the optional part, counted as a notebook of its own (its heading aside)
        rest = [{"cell_type": "markdown", "source": ""}, *cells[start + 1 :]]
        heading = len("".join(cells[start].get("source", "")).split())
        further = (
            estimated_minutes({"cells": rest})["total"] + heading / MINUTES["words_per_minute"]
        )
    for cell in cells[:start]:
        source = "".join(cell.get("source", ""))
        if "course-setup" in cell.get("metadata", {}).get("tags", []):
            continue  # the install cell for Colab and Kaggle (tools/colab_cell.py): no lesson time
        if cell["cell_type"] == "markdown":
            words += len(source.split())
        elif cell["cell_type"] == "code" and source.strip():
            code += 1
            explorers += bool(re.search(r"\w+_explorer\(", source))
            grader = cell.get("metadata", {}).get("nbgrader", {})
            if grader.get("solution"):
                minutes = cell.get("metadata", {}).get("course", {}).get("minutes")
                if not isinstance(minutes, int | float) or not low <= minutes <= high:
                    raise ValueError(
                        f"exercise {grader.get('grade_id')!r}: metadata.course.minutes must be a "
                        f"number from {low} to {high} (the author's estimate); got {minutes!r}"
                    )
                exercises.append(float(minutes))
    parts = {
        "prose": words / MINUTES["words_per_minute"],
        "code": code * MINUTES["code_cell"],
        "explorer": explorers * MINUTES["explorer"],
        "exercises": sum(exercises),
    }
    return {
        **parts,
        "words": words,
        "code_cells": code,
        "n_exercises": len(exercises),
        "total": sum(parts.values()),
        "further": further,
    }
