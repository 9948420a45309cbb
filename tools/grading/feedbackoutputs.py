"""The feedback shows no output of the grading run that could carry the hidden tests' inputs.

The hidden tests run in the student's kernel (``execute.py`` runs each as its own request after
the visible part of its check cell, and keeps that request's outputs out of the notebook). The
student's code receives the hidden inputs there, and can keep them: a global read by a later
cell, a thread that prints after the request ended, a course cell that calls the student's
function again. So every output that arrived after the first hidden tests ran may show a hidden
input, or what the student's code printed while it held one. :class:`HideOutputsAfterHiddenTests`
runs in ``generate_feedback`` (the course's configuration) and empties the outputs of every code
cell after the first autograded check cell (whose own visible part ran before any hidden test);
a note in a markdown cell says so. The scores and the grader's comments (the verdicts) are shown
as before. The autograded notebook the instructor sees keeps every output. Lesson: the
coursework (docs/INSTRUCTORS.md), lessons 4 to 10.
"""

from __future__ import annotations

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

#: The markdown cell put after the first check cell when outputs were removed.
NOTE = (
    "*The feedback shows no output of the cells below: they ran after the hidden tests, and "
    "could show their inputs. Your scores and the grader's comments are shown; your own "
    "notebook has your outputs.*"
)


def _is_check(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def hide_outputs_after_hidden_tests(nb):
    """``nb`` with the outputs of every code cell after its first check cell removed, and a note
    after that cell when any were (coursework feedback, lessons 4 to 10). Returns ``nb``."""
    if not hasattr(nb, "cells"):
        raise TypeError(f"nb must be an nbformat notebook, got {type(nb).__name__}")
    first = next((i for i, cell in enumerate(nb.cells) if _is_check(cell)), None)
    if first is None:
        return nb
    removed = False
    for cell in nb.cells[first + 1 :]:
        if cell.cell_type == "code" and cell.get("outputs"):
            cell.outputs = []
            removed = True
        if cell.cell_type == "code":
            cell.execution_count = None
    if removed:
        nb.cells.insert(first + 1, nbformat.v4.new_markdown_cell(NOTE))
    return nb


class HideOutputsAfterHiddenTests(Preprocessor):
    """The feedback's outputs limited to what ran before any hidden test (module docstring)."""

    # nbgrader registers its pipelines' preprocessors without enabling them: on unless turned off
    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        return hide_outputs_after_hidden_tests(nb), resources
