"""Small notebooks for the grading tests (tests/test_grading.py, tests/test_grading_limits.py)."""

from __future__ import annotations

import contextlib
import io
import subprocess

import nbformat


def code_cell(source: str, **nbgrader) -> nbformat.NotebookNode:
    """A code cell; with keyword arguments, nbgrader metadata (schema version 3) made of them."""
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata.nbgrader = {"schema_version": 3, **nbgrader}
    return cell


def python_notebook(cells) -> nbformat.NotebookNode:
    """A notebook of ``cells`` with the python3 kernelspec the course's notebooks carry."""
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = list(cells)
    return nb


def one_solution(source: str) -> nbformat.NotebookNode:
    """A notebook holding ``source`` as its one solution cell (grade_id ``ex``)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [code_cell(source, solution=True, grade_id="ex")]
    return nb


def run_coursework(cw, lesson, course, *args: str) -> subprocess.CompletedProcess:
    """``python -m tools.coursework`` (the module ``cw``) on ``course`` with ``args``, the documented command
    line, in this process; ``lesson`` (not one of the course's lessons) answers to its own
    assignment name. Its output and exit status as a CompletedProcess."""
    out, err = io.StringIO(), io.StringIO()
    known = cw._lesson
    cw._lesson = lambda arg: lesson if arg == lesson.assignment else known(arg)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cw.main(["--course-dir", str(course), *args])
    finally:
        cw._lesson = known
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
