"""An answer the instructor grades by hand (nbgrader's "manually graded answer"), through the
real pipeline: release, submit, autograde, scores, grade, autograde again.

A tiny lesson (Lesson 98): one autograded exercise (code solution + locked check with a hidden
record) and one written answer (a markdown cell with solution=true, grade=true, points, no check;
its model answer between the solution markers, as lesson 10's exercise 4 explanation). Three
submissions: the instructor's notebook, an honest written answer, the blank release. Autograde
gives the written answer no points (0 for the blank one, nbgrader's checksum rule); scores say
"pending", not 0, until the instructor grades it; that grade survives a second autograde.
Proposed by the lesson 10 owner; measured before: scores were (0.0, 3.0) for pending and zero.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent

from helpers.course import Lesson  # noqa: E402
from tools import coursework as cw  # noqa: E402

LESSON = Lesson(98, "manual grading", "manual.ipynb", (), None, "manual")
PROMPT = "**Explain.** Why does the answer double its input? (write it in this cell)"
MODEL_ANSWER = "Because it returns x + x.\n"


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}

    def meta(cell, **m):
        cell.metadata.nbgrader = {"schema_version": 3, **m}
        return cell

    nb.cells = [
        nbformat.v4.new_code_cell("import torch\nfrom helpers.grading import record"),
        meta(
            nbformat.v4.new_code_cell(
                "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
            ),
            solution=True,
            grade=False,
            locked=False,
            grade_id="m_ex1",
        ),
        meta(
            nbformat.v4.new_code_cell(
                "print('✓ passed')\n### BEGIN HIDDEN TESTS\n"
                "record('m_ex1', double, torch.tensor([1.5, -2.0]))\n### END HIDDEN TESTS"
            ),
            solution=False,
            grade=True,
            locked=True,
            points=2,
            grade_id="m_ex1_check",
        ),
        meta(
            nbformat.v4.new_markdown_cell(
                f"{PROMPT}\n\n### BEGIN SOLUTION\n{MODEL_ANSWER}### END SOLUTION"
            ),
            solution=True,
            grade=True,
            locked=False,
            points=3,
            grade_id="m_ex1_explain",
        ),
    ]
    return nb


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is needed for the confined kernel")
    base = tmp_path_factory.mktemp("manual")
    notebooks, course = base / "notebooks", base / "course"
    notebooks.mkdir()
    nbformat.write(_notebook(), notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    release = nbformat.read(cw.student_notebook(LESSON, course), as_version=4)

    def answered(text):
        nb = nbformat.reads(nbformat.writes(release), as_version=4)
        for cell in nb.cells:
            g = cell.metadata.get("nbgrader", {})
            if g.get("grade_id") == "m_ex1":
                cell.source = "def double(x):\n    return x + x"
            if g.get("grade_id") == "m_ex1_explain":
                cell.source = text
        return nb

    subs = {
        "instructor": nbformat.read(notebooks / LESSON.notebook, as_version=4),
        "honest": answered(PROMPT + "\n\nIt adds x to itself."),
        "blank": release,
    }
    for sid, nb in subs.items():
        cw.submit(LESSON, sid, nb, course)
    known = cw._lesson
    cw._lesson = lambda arg: LESSON if str(arg) in ("98", "lesson98") else known(arg)
    try:
        result = cw.autograde(LESSON, course)
    finally:
        cw._lesson = known
    return course, result, release


def _grade(course, sid, name):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db", "transformer-block") as gb:
        nb = gb.find_submission_notebook(cw.notebook_id(LESSON), cw.assignment_id(LESSON), sid)
        g = next(g for g in nb.grades if g.name == name)
        return g.auto_score, g.manual_score, g.needs_manual_grade


def test_release_keeps_the_prompt_and_stubs_the_model_answer(graded):
    _, _, release = graded
    (cell,) = [
        c
        for c in release.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "m_ex1_explain"
    ]
    assert cell.cell_type == "markdown" and cell.source.startswith(PROMPT)
    assert "YOUR ANSWER HERE" in cell.source and MODEL_ANSWER.strip() not in cell.source


def test_exercises_lists_the_manual_cell_apart_from_the_autograded_ones(graded):
    course, _, _ = graded
    source = course / "source" / cw.assignment_id(LESSON) / LESSON.notebook
    assert [e.check_id for e in cw.exercises(source)] == ["m_ex1_check"]
    assert [m.grade_id for m in cw.manual_answers(source)] == ["m_ex1_explain"]


def test_autograde_neither_zeroes_nor_fills_a_written_answer(graded):
    course, result, _ = graded
    assert not result.failed
    for sid in ("instructor", "honest"):
        auto, manual, pending = _grade(course, sid, "m_ex1_explain")
        assert auto is None and manual is None and pending  # nbgrader's rule
    assert _grade(course, "blank", "m_ex1_explain")[0] == 0.0  # no answer written: 0, fair


def test_scores_say_pending_not_zero(graded):
    course, _, _ = graded
    got = cw.scores(LESSON, course)
    assert got["honest"]["m_ex1_explain"] == (None, 3.0)
    assert got["honest"]["m_ex1_check"] == (2.0, 2.0)
    assert got["blank"]["m_ex1_explain"] == (0.0, 3.0)


def test_a_manual_score_survives_a_second_autograde(graded):
    course, _, _ = graded
    with pytest.raises(ValueError, match="score must be a number from 0 to 3"):
        cw.grade_by_hand(LESSON, "honest", "m_ex1_explain", 4, course_dir=course)
    with pytest.raises(ValueError, match="grade_id must name an answer graded by hand"):
        cw.grade_by_hand(LESSON, "honest", "m_ex1_check", 1, course_dir=course)
    cw.grade_by_hand(LESSON, "honest", "m_ex1_explain", 2.5, "clear", course_dir=course)
    assert _grade(course, "honest", "m_ex1_explain")[1] == 2.5
    known = cw._lesson
    cw._lesson = lambda arg: LESSON if str(arg) in ("98", "lesson98") else known(arg)
    try:
        cw.autograde(LESSON, course, student="honest")
    finally:
        cw._lesson = known
    assert _grade(course, "honest", "m_ex1_explain")[1] == 2.5
    got = cw.scores(LESSON, course)
    assert got["honest"]["m_ex1_explain"] == (2.5, 3.0)
    assert got["honest"]["m_ex1_check"] == (2.0, 2.0)  # graded again, still right
    assert got["instructor"]["m_ex1_explain"] == (None, 3.0)  # still waiting


def test_the_csv_leaves_a_pending_answer_empty(graded):
    import csv

    course, _, _ = graded
    out = io.StringIO()
    assert cw.write_csv([LESSON], course, out) == 3
    rows = {r[2]: r for r in csv.reader(io.StringIO(out.getvalue()))}
    header = next(csv.reader(io.StringIO(out.getvalue())))
    col = header.index("lesson98 m_ex1_explain (3)")
    assert rows["instructor"][col] == "" and rows["blank"][col] == "0"
    assert rows["instructor"][header.index("lesson98 total")] == "2"


def test_an_interrupted_run_resumes_without_grading_anyone_twice(graded):
    """Ctrl-C right after the first student is graded (the progress line raises it), then the
    same command again: the first student is not graded twice, the others are graded, and every
    grade (the manual one too) is what it was."""
    course, _, _ = graded

    class CtrlC(io.StringIO):
        def write(self, text):
            super().write(text)
            if " graded, " in text:
                raise KeyboardInterrupt

    before = cw.scores(LESSON, course)
    shutil.rmtree(course / ".grading" / "state" / cw.assignment_id(LESSON))  # as never graded
    known = cw._lesson
    cw._lesson = lambda arg: LESSON if str(arg) in ("98", "lesson98") else known(arg)
    try:
        with pytest.raises(KeyboardInterrupt):
            cw.autograde(LESSON, course, progress=CtrlC())
        again = cw.autograde(LESSON, course, progress=io.StringIO())
    finally:
        cw._lesson = known
    assert len(again.up_to_date) == 1 and not again.failed
    assert sorted([*again.up_to_date, *again.verdicts]) == ["blank", "honest", "instructor"]
    assert cw.scores(LESSON, course) == before
