"""Issue "lessons a student can finish in a sitting": the instructors' guide lists every notebook
with its part, estimated minutes and points, and that table is the one the notebooks give today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from helpers.course import NOTEBOOKS

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("lesson_table", ROOT / "tools" / "lesson_table.py")
lesson_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lesson_table)


def test_guide_lists_every_notebook_with_the_minutes_and_points_the_notebooks_give():
    guide = lesson_table.guide_table(lesson_table.GUIDE.read_text())
    assert guide == lesson_table.table(), "run: python tools/lesson_table.py --write"
    for entry in NOTEBOOKS:
        assert f"`{entry.notebook}`" in guide


def _cell(kind, source, **nbgrader):
    return {"cell_type": kind, "source": source, "metadata": {"nbgrader": nbgrader}}


def test_points_split_autograded_checks_from_answers_graded_by_hand():
    nb = {
        "cells": [
            _cell("code", "def f(): ...", solution=True, grade=False, grade_id="ex1"),
            _cell("code", "check(f)", solution=False, grade=True, points=2, grade_id="ex1_check"),
            _cell("code", "check(g)", solution=False, grade=True, points=1.5, grade_id="ex2_check"),
            _cell("markdown", "Explain.", solution=True, grade=True, points=3, grade_id="why"),
            _cell("markdown", "prose", grade=False),
        ]
    }
    assert lesson_table.points(nb) == (3.5, 3.0)
