"""What the grader accepts from a submission, in one place: sizes checked before anything parses it.

A submission is the student's file: before the grader (or the review) parses a cell with Python's
``ast`` or runs it, :func:`check_notebook` checks it against these caps, with no parsing at all.
A submission over a cap gets 0 on every exercise, with the reason (``coursework.py autograde``
and the course's nbgrader executor), and grading goes on with the next student. The kernel's
output is capped as it arrives (:class:`grading.execute.CappedClient`): a cell keeps at most
:data:`MAX_OUTPUT_PER_CELL` of output, and its outputs end with a note saying what was left out.

Each cap is far above what the lessons need (measured on the committed notebooks: the largest
file 649 KiB with its outputs, the largest cell 2,676 characters, all cells of a lesson at most
57,493 characters, brackets nested at most 6 deep); what they guard against was measured on
the grader before they existed: a 3 MB cell took 2.0 GB and 3 minutes to parse, a cell that
printed 300 MiB made the grading worker grow to 1.33 GB.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

#: The largest notebook file accepted (bytes; stored outputs and figures included).
MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
#: The largest source of one cell (characters).
MAX_CELL_CHARS = 50_000
#: The largest source of all cells together (characters).
MAX_SOURCE_CHARS = 500_000
#: The deepest nesting of brackets in one cell, counted without parsing (strings included).
MAX_NESTING = 50
#: The most cells in one notebook.
MAX_CELLS = 1000
#: The output one cell keeps (characters of its text and data, each output counted whole);
#: what comes after is left out and the cell's outputs end with a note saying so.
MAX_OUTPUT_PER_CELL = 2 * 1024 * 1024
#: The largest single message the grader means to accept from the kernel (bytes, set as ZeroMQ's
#: ``MAXMSGSIZE`` on the kernel manager's context). Not shown to hold: a single 40,000,000-
#: character write still reached the grader (measured with execute.run, 2026-12-02).
MAX_MESSAGE_BYTES = 32 * 1024 * 1024


class OverLimit(ValueError):
    """A submission over one of the caps: the message says which and by how much."""


def nesting(source: str) -> int:
    """The deepest nesting of ``([{`` in ``source``, by counting characters (no parsing)."""
    depth = deepest = 0
    for ch in source:
        if ch in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in ")]}" and depth:
            depth -= 1
    return deepest


def check_source(source: str, where: str = "a cell") -> None:
    """Raise :class:`OverLimit` if one cell's source is over a cap (size, then nesting)."""
    if not isinstance(source, str):
        raise OverLimit(f"{where} has a source that is not text")
    if len(source) > MAX_CELL_CHARS:
        raise OverLimit(
            f"{where} is {len(source):,} characters long; the grader accepts cells of at most "
            f"{MAX_CELL_CHARS:,}"
        )
    depth = nesting(source)
    if depth > MAX_NESTING:
        raise OverLimit(
            f"{where} nests brackets {depth} deep; the grader accepts at most {MAX_NESTING}"
        )


def check_notebook(nb) -> None:
    """Raise :class:`OverLimit` if a notebook (a NotebookNode or its dict) is over a cap."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise OverLimit("the notebook has no list of cells")
    if len(cells) > MAX_CELLS:
        raise OverLimit(
            f"the notebook has {len(cells):,} cells; the grader accepts at most {MAX_CELLS:,}"
        )
    total = 0
    for index, cell in enumerate(cells):
        source = cell.get("source", "") if isinstance(cell, dict) else None
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        check_source(source, f"cell {index + 1}")
        total += len(source)
    if total > MAX_SOURCE_CHARS:
        raise OverLimit(
            f"the notebook's cells hold {total:,} characters of source; the grader accepts at "
            f"most {MAX_SOURCE_CHARS:,}"
        )


def check_file(path: Path) -> None:
    """Raise :class:`OverLimit` if the notebook file at ``path`` is over a cap: its size first
    (from the file system, nothing read), then its cells (:func:`check_notebook`)."""
    size = os.stat(path, follow_symlinks=False).st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise OverLimit(
            f"the notebook file is {size / 2**20:.1f} MiB; the grader accepts at most "
            f"{MAX_NOTEBOOK_BYTES / 2**20:.0f} MiB"
        )
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise OverLimit(f"the notebook file is not readable JSON ({type(e).__name__})") from None
    check_notebook(nb)


def output_size(output: dict) -> int:
    """How much of :data:`MAX_OUTPUT_PER_CELL` one output uses (characters of text and data)."""
    size = 0
    for value in (output.get("text"), output.get("evalue"), output.get("traceback")):
        size += _chars(value)
    for value in (output.get("data") or {}).values():
        size += _chars(value)
    return size


def _chars(value) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(len(v) for v in value if isinstance(v, str))
    if isinstance(value, dict):
        return len(json.dumps(value))
    return 0
