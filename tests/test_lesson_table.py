"""Issue "lessons a student can finish in a sitting": the instructors' guide lists every notebook
with its part, estimated minutes and points, and that table is the one the notebooks give today."""

from __future__ import annotations

from pathlib import Path

from helpers.course import NOTEBOOKS
from tools import lesson_table

ROOT = Path(__file__).resolve().parent.parent


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


def test_readme_has_a_binder_and_a_colab_link_for_every_notebook():
    """Issue "a lesson a student can take alone": an "Open in Colab" link on every lesson's row,
    to the repository the Binder links use."""
    assert lesson_table.readme_link_problems(lesson_table.README.read_text()) == []


def test_readme_link_check_finds_a_missing_or_foreign_colab_link():
    text = lesson_table.README.read_text()
    first = NOTEBOOKS[0].notebook
    url = lesson_table.colab_url(first)
    assert url in text
    assert any(
        "no Colab link" in p for p in lesson_table.readme_link_problems(text.replace(url, "x"))
    )
    fork = text.replace(url, lesson_table.colab_url(first, "someone/fork"))
    assert [p for p in lesson_table.readme_link_problems(fork)] == [f"{first}: no Colab link {url}"]
