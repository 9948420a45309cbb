"""Every lesson notebook follows the course's rhythm, and its stored outputs are trustworthy.

Checked on the committed file (nbval then re-executes it): each claim of the lesson has a code
cell that names it and asserts; the explorer is shown; at least three exercises, each a solution
cell and a locked, graded check cell (nbgrader metadata); executed top to bottom on a fresh
kernel; no error output except in cells tagged ``raises-exception``; ``nbval-ignore-output``
only on cells that show a live widget or say why their output varies.
"""

import json
import re
from pathlib import Path

import pytest

from helpers.course import LESSONS

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SECTIONS = ("What you will learn", "Build", "Check", "Explore", "Exercise", "Recap")


def _cells(lesson):
    path = NOTEBOOKS / lesson.notebook
    assert path.exists(), f"{lesson.notebook} is listed in helpers.course.LESSONS but missing"
    return json.loads(path.read_text())["cells"]


def _source(cell) -> str:
    return "".join(cell["source"])


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


params = pytest.mark.parametrize("lesson", LESSONS, ids=[f"lesson{l.number}" for l in LESSONS])


@params
def test_rhythm_sections_present(lesson):
    headings = [
        line
        for c in _cells(lesson)
        if c["cell_type"] == "markdown"
        for line in _source(c).splitlines()
        if line.startswith("#")
    ]
    text = "\n".join(headings)
    missing = [s for s in SECTIONS if s.lower() not in text.lower()]
    assert not missing, f"{lesson.notebook}: no heading for {missing}"


@params
def test_every_claim_has_an_asserting_cell(lesson):
    code = [_source(c) for c in _cells(lesson) if c["cell_type"] == "code"]
    for claim in lesson.claims:
        asserting = [
            s
            for s in code
            if re.search(rf"\b{re.escape(claim)}\b", s)
            and re.search(r"\bassert\b|assert_close|assert_", s)
        ]
        assert asserting, f"{lesson.notebook}: no code cell names {claim} and asserts it"


@params
def test_explorer_is_shown_and_marked(lesson):
    if lesson.explorer is None:
        pytest.skip(f"lesson {lesson.number} has no explorer")
    cells = [
        c
        for c in _cells(lesson)
        if c["cell_type"] == "code" and f"{lesson.explorer}(" in _source(c)
    ]
    assert cells, f"{lesson.notebook}: never calls widgets.{lesson.explorer}()"
    assert all("nbval-ignore-output" in _tags(c) for c in cells), (
        "explorer cells must be tagged nbval-ignore-output"
    )


@params
def test_at_least_three_graded_exercises(lesson):
    meta = [c.get("metadata", {}).get("nbgrader", {}) for c in _cells(lesson)]
    solutions = [m for m in meta if m.get("solution")]
    graded = [m for m in meta if m.get("grade") and not m.get("solution")]
    assert len(solutions) >= 3 and len(graded) >= 3, (
        f"{lesson.notebook}: {len(solutions)} solution / {len(graded)} graded cells"
    )
    assert all(m.get("locked") and m.get("points", 0) > 0 for m in graded)
    ids = [m["grade_id"] for m in meta if m]
    assert len(ids) == len(set(ids)), f"duplicate nbgrader grade_id in {lesson.notebook}"
    for c in _cells(lesson):
        m = c.get("metadata", {}).get("nbgrader", {})
        if m.get("solution"):
            assert "### BEGIN SOLUTION" in _source(c) and "### END SOLUTION" in _source(c)


@params
def test_executed_top_to_bottom_without_unexpected_errors(lesson):
    code = [c for c in _cells(lesson) if c["cell_type"] == "code" and _source(c).strip()]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{lesson.notebook}: re-run it on a fresh kernel (tools/run_notebooks.py)"
    )
    for i, c in enumerate(code):
        errors = [o for o in c.get("outputs", []) if o["output_type"] == "error"]
        assert not errors or "raises-exception" in _tags(c), (
            f"{lesson.notebook}: unexpected error in code cell {i + 1}"
        )
        if "raises-exception" in _tags(c):
            assert errors, (
                f"{lesson.notebook}: code cell {i + 1} is tagged raises-exception but raised nothing"
            )


@params
def test_ignore_output_only_where_output_varies(lesson):
    for c in _cells(lesson):
        if "nbval-ignore-output" in _tags(c):
            src = _source(c)
            assert "explorer(" in src or "# output varies:" in src, (
                f"{lesson.notebook}: a cell is tagged nbval-ignore-output without a live widget "
                f"or a '# output varies: <why>' comment:\n{src[:200]}"
            )


# Stored outputs must not show where the course happens to be installed: a traceback through
# site-packages or an absolute path differs on every machine (and tells a student nothing).
MACHINE_TRACES = re.compile(r"site-packages|/work/|/home/|/root/|/tmp/|/usr/lib/python|\.venv/")


@params
def test_stored_outputs_show_no_machine_paths(lesson):
    root = str(NOTEBOOKS.parent)
    for i, c in enumerate(c for c in _cells(lesson) if c["cell_type"] == "code"):
        for o in c.get("outputs", []):
            text = json.dumps(
                {k: v for k, v in o.items() if k != "data"}
                | {"data": {k: v for k, v in o.get("data", {}).items() if k.startswith("text/")}}
            )
            found = MACHINE_TRACES.search(text)
            assert not found and root not in text, (
                f"{lesson.notebook}: code cell {i + 1} stores a path of this machine ({found.group(0) if found else root}); "
                f"show the error message alone (e.g. print it from an except clause, or give the exception _render_traceback_)"
            )
