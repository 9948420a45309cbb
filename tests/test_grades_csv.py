"""The CSV for the LMS (``coursework.py scores ... --csv``): what a spreadsheet or Canvas reads
from it is what the gradebook says. Its columns add up (each exercise, then the late penalty,
make the total), no cell is computed by a spreadsheet (ids and names that start like a formula,
``-2-3``, ``=1+1``, ``@SUM(A1)``, are neutralised as OWASP's CSV-injection guidance says, and
every cell is quoted), a roster fills the LMS's id columns, and the export says which column to
import. The gradebook is filled by hand here (no grading run): the CSV is what is tested."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import nbformat
import pytest
from _grading_notebooks import code_cell, python_notebook, run_coursework

from helpers.course import Lesson
from tools import coursework as cw

ROOT = Path(__file__).resolve().parent.parent
LESSON = Lesson(96, "csv", "csvlesson.ipynb", (), None, "csv")
AID, NID = LESSON.assignment, "csvlesson"


# id, first name, last name, (exercise 1, exercise 2), late penalty
STUDENTS = [
    ("alice", "Alice", "Doe", (2.0, 3.0), 1.5),
    ("-2-3", "=1+1", "@SUM(A1)", (2.0, 0.0), 0.0),
    ("bob", "Bob", "+Roe", (0.0, 0.0), 0.0),
]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("csv")
    notebooks, course = base / "notebooks", base / "course"
    notebooks.mkdir()
    cells = []
    for n, points in ((1, 2), (2, 3)):
        cells.append(code_cell(f"def f{n}():\n    return {n}", solution=True, grade=False,
                               locked=False, grade_id=f"c_ex{n}"))  # fmt: skip
        cells.append(code_cell("print('checked')", solution=False, grade=True, locked=True,
                               points=points, grade_id=f"c_ex{n}_check"))  # fmt: skip
    nbformat.write(python_notebook(cells), notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    with cw._gradebook(course) as gb:
        for sid, first, last, got, late in STUDENTS:
            gb.add_student(sid, first_name=first, last_name=last)
            gb.add_submission(AID, sid)
            for n, score in enumerate(got, start=1):
                gb.find_grade(f"c_ex{n}_check", NID, AID, sid).auto_score = score
            gb.find_submission_notebook(NID, AID, sid).late_submission_penalty = late
        gb.db.commit()
    return course


def _rows(course, roster=None):
    out = io.StringIO()
    args = (roster,) if roster is not None else ()
    assert cw.write_csv([LESSON], course, out, *args) == len(STUDENTS)
    return out.getvalue(), list(csv.reader(io.StringIO(out.getvalue())))


def test_the_exercise_columns_and_the_penalty_add_up_to_the_total(course):
    _, rows = _rows(course)
    header, possible = rows[0], rows[1]
    parts = [i for i, h in enumerate(header) if h.startswith(AID) and not h.endswith("total")]
    total = header.index(f"{AID} total")
    assert f"{AID} late penalty" in header
    assert float(possible[total]) == sum(float(possible[i]) for i in parts) == 5
    for row in rows[2:]:
        assert float(row[total]) == pytest.approx(sum(float(row[i] or 0) for i in parts)), row
    alice = next(r for r in rows[2:] if r[3] == "alice")
    assert alice[total] == "3.5" and alice[header.index(f"{AID} late penalty")] == "-1.5"


def test_no_cell_starts_like_a_formula_and_every_cell_is_quoted(course):
    text, rows = _rows(course)
    for row in rows:
        for cell in row[:5]:  # the text columns: names and ids
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), row
    ids = {r[3] for r in rows[2:]}
    assert "'-2-3" in ids  # shown as the text it is, not computed (-5)
    names = {r[0] for r in rows[2:]}
    assert "'@SUM(A1), =1+1" in names and "'+Roe, Bob" in names
    for line in text.splitlines():
        assert line.startswith('"') and line.endswith('"'), line


def test_a_roster_fills_the_lms_ids(course, tmp_path):
    roster_file = tmp_path / "roster.csv"
    roster_file.write_text(
        "student,lms_id,sis_id,name\nalice,12345,S-001,Alice Doe\n", encoding="utf-8"
    )
    roster = cw.read_roster(roster_file)
    _, rows = _rows(course, roster)
    alice = next(r for r in rows[2:] if r[3] == "alice")
    assert alice[:4] == ["Alice Doe", "12345", "S-001", "alice"]
    bob = next(r for r in rows[2:] if r[3] == "bob")
    assert bob[1] == "" and bob[2] == "bob"  # not in the roster: the course's id, said below


def test_the_export_says_which_column_to_import_and_how_rows_are_matched(course, tmp_path):
    out = tmp_path / "grades.csv"
    result = run_coursework(cw, LESSON, course, "scores", AID, "--csv", str(out))
    assert result.returncode == 0, result.stderr
    assert f"import the column '{AID} total'" in result.stdout
    assert "no --roster" in result.stdout and "SIS" in result.stdout
    roster_file = tmp_path / "roster.csv"
    roster_file.write_text("student,lms_id,sis_id\nalice,12345,S-001\n", encoding="utf-8")
    result = run_coursework(
        cw, LESSON, course, "scores", AID, "--csv", str(out), "--roster", str(roster_file)
    )
    assert "come from the roster (1 of 1 students" in result.stdout
