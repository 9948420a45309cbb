"""One exercise of a lesson notebook, run in this process as the student's kernel would run it:
the check cell's visible check and, on their own, its hidden tests, judged by tools/grading
against the instructor's solution (tests/test_check_agrees_with_grade.py).

The namespace is the notebook's first code cell (its imports; IPython magics left out) plus the
few names a lesson's exercise cells take from later cells (``EXTRA``). The hidden tests write
their records to an unsigned developer log (``HELPERS_GRADING_LOG``), the way the lessons' tests
read them; without a secret they draw their public default inputs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import random
from dataclasses import dataclass
from pathlib import Path

import nbformat
import torch

import helpers.grading
from helpers.checks import ExerciseFailed
from tools.grading.verdicts import Verdict, judge, read_records

ROOT = Path(__file__).resolve().parent.parent

#: Names a lesson's exercise cells read from cells other than the first (source run after it).
EXTRA = {
    "10_trust_but_verify.ipynb": (
        "def zero(module, args, output):\n"
        "    return torch.zeros_like(output)\n"
        "mystery = zoo.mystery_model()\n"
    ),
}


#: Code cells of a lesson that its exercise cells build on (a class the solution subclasses), run
#: after the first cell: each named by how its source begins.
EXTRA_CELLS = {
    "07_stacking_blocks.ipynb": ("class ColleagueBlock",),
}


def cells(notebook: str) -> dict[str, str]:
    """{grade_id: source} of the notebook's nbgrader cells."""
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    return {
        c.metadata.nbgrader["grade_id"]: c.source
        for c in nb.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    }


def _namespace(notebook: str) -> dict:
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    # the lesson's imports: its first code cell after the Colab set-up cell (tools/colab_cell.py)
    first = next(
        c
        for c in nb.cells
        if c.cell_type == "code" and "course-setup" not in c.metadata.get("tags", [])
    )
    source = "\n".join(line for line in first.source.splitlines() if not line.startswith("%"))
    source += "".join(
        "\n" + c.source
        for c in nb.cells
        if c.cell_type == "code" and c.source.startswith(EXTRA_CELLS.get(notebook, ()))
    )
    namespace: dict = {"__name__": "__main__"}
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(source + "\n" + EXTRA.get(notebook, ""), namespace)
    finally:  # a lesson's first cell may set these for its own kernel: not for this process
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
    return namespace


def _hidden(check_source: str) -> str:
    return check_source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]


def _visible(check_source: str) -> str:
    return check_source.split("### BEGIN HIDDEN TESTS")[0]


@dataclass
class Run:
    """What the student would see: the check cell's verdict (``check`` True for ✓, ``said`` its
    line), and the grade's verdict on the hidden tests run on their own."""

    check: bool
    said: str
    grade: Verdict


@contextlib.contextmanager
def _secret(secret: str | None):
    """With ``secret``, ``helpers.grading.hidden_seed`` and ``hidden_cases`` answer as under a
    grader holding an instructor's secret (a seed and a stream per exercise derived from it),
    for the hidden tests run here; without, their public defaults."""
    if secret is None:
        yield
        return
    seed, cases = helpers.grading.hidden_seed, helpers.grading.hidden_cases

    def derived(exercise: str) -> int:
        return int.from_bytes(hashlib.sha256(f"{secret}/{exercise}".encode()).digest()[:6], "big")

    helpers.grading.hidden_seed = lambda exercise, default: derived(exercise)
    helpers.grading.hidden_cases = lambda exercise, default, draw: draw(
        random.Random(derived(exercise))
    )
    try:
        yield
    finally:
        helpers.grading.hidden_seed, helpers.grading.hidden_cases = seed, cases


def _record(notebook: str, source: str, hidden: str, log: Path, secret: str | None) -> None:
    namespace = _namespace(notebook)
    exec(source, namespace)
    helpers.grading._cases.clear()  # case numbers count from 0 in each run, as in a kernel
    before = os.environ.get("HELPERS_GRADING_LOG")
    os.environ["HELPERS_GRADING_LOG"] = str(log)
    try:
        with (
            _secret(secret),
            torch.random.fork_rng(),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            exec(hidden, namespace)
    finally:
        if before is None:
            del os.environ["HELPERS_GRADING_LOG"]
        else:
            os.environ["HELPERS_GRADING_LOG"] = before


def hidden_records(
    notebook: str, exercise: str, answer: str, tmp_path: Path, secret: str | None = None
) -> dict[int, list[dict]]:
    """{case: [entry]} of the exercise's hidden tests run on ``answer`` (with ``secret``, as a
    grader holding it would run them)."""
    log = tmp_path / f"{exercise}-{secret}.jsonl"
    log.unlink(missing_ok=True)
    _record(notebook, answer, _hidden(cells(notebook)[f"{exercise}_check"]), log, secret)
    return read_records(log)[0].get(exercise, {})


def run(
    notebook: str, exercise: str, answer: str, tmp_path: Path, secret: str | None = None
) -> Run:
    """The visible check's verdict on ``answer`` (the source of the exercise's solution cell, as
    a student wrote it) and the grade's verdict from the hidden tests run on their own (with
    ``secret``, the hidden inputs a grader holding it draws)."""
    sources = cells(notebook)
    check = sources[f"{exercise}_check"]
    reference_log, student_log = tmp_path / "reference.jsonl", tmp_path / "student.jsonl"
    for log in (reference_log, student_log):
        log.unlink(missing_ok=True)
    _record(notebook, sources[exercise], _hidden(check), reference_log, secret)
    _record(notebook, answer, _hidden(check), student_log, secret)
    reference, _ = read_records(reference_log)
    student, _ = read_records(student_log)
    grade = judge(exercise, reference.get(exercise, {}), student.get(exercise, {}))
    namespace = _namespace(notebook)
    exec(answer, namespace)
    out = io.StringIO()
    try:
        with torch.random.fork_rng(), contextlib.redirect_stdout(out):
            exec(_visible(check), namespace)
    except ExerciseFailed as e:
        return Run(False, e._render_traceback_()[0], grade)
    return Run(True, out.getvalue().strip(), grade)
