"""Coursework with nbgrader, for every lesson whose notebook exists (issue 8).

For each lesson, in a temporary nbgrader course folder (tools/coursework.py):

* the release builds with nbgrader's own ``generate_assignment``: solutions stubbed, hidden tests
  removed, outputs cleared, check cells locked, every other cell as committed;
* the student version runs top to bottom (nbclient, allow_errors=True): the only errors are the
  expected "not implemented yet" verdicts, and only in exercise cells; every check cell fails
  on the stub (a check that passes a stub cannot fail);
* nbgrader's ``autograde`` gives the instructor version full marks, and a submission with one
  wrong answer (one solution body edited) loses exactly that exercise's points;
* in the student's kernel, each check is fed its right answer (it passes) and a table of wrong
  ones (None, a function that raises NotImplementedError or another error, NaN, wrong shape,
  wrong dtype): each verdict is ExerciseFailed, one line, naming the problem.

Each test class is one lesson; its tests that autograde (the ``graded`` fixture) and its other
tests are two pytest-xdist groups (conftest.py), which may run on both workers at once:
the course folder and its release are made once per run and shared, and every other fixture runs
once per lesson.
"""

from __future__ import annotations

import ast
import copy
import fcntl
import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parent.parent

from helpers.course import NOTEBOOKS as COURSE_NOTEBOOKS  # noqa: E402
from tools import coursework as cw  # noqa: E402

# The committed lesson notebooks; COURSEWORK_NOTEBOOKS points elsewhere when working on the tests.
NOTEBOOKS = Path(os.environ.get("COURSEWORK_NOTEBOOKS", ROOT / "notebooks"))
STUDENT_OK, STUDENT_WRONG = "instructor", "wrong"
TIMINGS: dict[str, float] = {}  # printed by the last test of each class (pytest -s, or -rA)


def _read(path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _errors(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"):
            parts.append(o.get("data", {}).get("text/plain", ""))
        elif o.get("output_type") == "error":
            parts.append(f"{o['ename']}: {o['evalue']}")
    return "".join(parts)


def _kernel_env() -> dict:
    # The kernel draws figures as a student's would (inline), whatever backend pytest chose.
    return {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}


def _solution_name(source: str) -> tuple[str, str]:
    """The function or class of a solution cell whose body holds ``### BEGIN SOLUTION``."""
    lines = source.splitlines()
    marker = next(i + 1 for i, line in enumerate(lines) if "### BEGIN SOLUTION" in line)
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and (
            node.lineno <= marker <= node.end_lineno
        ):
            return node.name, "class" if isinstance(node, ast.ClassDef) else "function"
    raise AssertionError(f"the solution region is not inside a function or class:\n{source}")


# the edit lives with the benchmark's grading section, which grades a class of them too
from benchmarks.grading import wrong_answer  # noqa: E402

# --- the table of wrong answers fed to every check, inside the student's kernel ---------------

PROBE_HELPERS = '''
import torch as _cw_torch

class _CwNotApplicable(Exception):
    pass

def _cw_mutate(right, kind, what):
    """A wrong answer of the given kind, built from the right one."""
    def bad_value(r):
        if kind == "nan":
            if isinstance(r, _cw_torch.Tensor) and r.is_floating_point():
                return r * float("nan")
            if isinstance(r, float):
                return float("nan")
        if kind == "shape" and isinstance(r, _cw_torch.Tensor) and r.dim() > 0:
            return r.unsqueeze(0)
        if kind == "dtype":
            if isinstance(r, _cw_torch.Tensor) and r.is_floating_point():
                return r.to(_cw_torch.int64)
            if isinstance(r, int | float):
                return str(r)
        raise _CwNotApplicable(kind)
    if kind == "none":
        return None
    if what == "class":
        class Wrong(right):
            def forward(self, *args, **kwargs):
                if kind == "not_implemented":
                    raise NotImplementedError()
                if kind == "raises":
                    raise ValueError("a bug in the student's code")
                return bad_value(super().forward(*args, **kwargs))
        return Wrong
    def wrong(*args, **kwargs):
        if kind == "not_implemented":
            raise NotImplementedError()
        if kind == "raises":
            raise ValueError("a bug in the student's code")
        return bad_value(right(*args, **kwargs))
    return wrong
'''

# kind -> words of which the verdict must contain one (lower case)
PROBES = {
    "none": ("none",),
    "not_implemented": ("not implemented",),
    "raises": ("raised valueerror",),
    "nan": ("nan", "finite"),
    "shape": ("shape", "dimension", "size"),
    "dtype": ("dtype", "float", "number", "integer", "str"),
}


def _run(client: NotebookClient, nb, source: str) -> nbformat.NotebookNode:
    nb.cells.append(new_code_cell(source))
    client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
    return nb.cells[-1]


# --- fixtures: once per lesson (class scope) ----------------------------------------------------


class Course:
    def __init__(self, lesson, folder: Path, instructor_path: Path):
        self.lesson = lesson
        self.folder = folder
        self.instructor_path = instructor_path
        self.instructor = _read(instructor_path)
        self.exercises = cw.exercises(self.instructor)
        self.student = _read(cw.student_notebook(lesson, folder))


def _run_folder(tmp_path_factory) -> Path:
    """A folder of this test run that every pytest-xdist worker shares (the controller's base
    temporary folder; without xdist, the session's own)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="class")
def course(request, tmp_path_factory):
    """The lesson's course folder and release, made once per run: a lesson's autograde tests and
    its other tests are two xdist groups (conftest.py, SPLIT_BY_FIXTURE), maybe on two
    workers; the first to take the lesson's lock releases it, the other reads the same folder."""
    lesson = request.cls.lesson
    if not (NOTEBOOKS / lesson.notebook).exists():
        pytest.skip(f"notebooks/{lesson.notebook} (lesson {lesson.number}) is not written yet")
    folder = _run_folder(tmp_path_factory) / f"course_{lesson.assignment}"
    # one snapshot of the committed notebook for every test of the lesson, even if it changes
    snapshot = folder / "instructor"
    with open(folder.parent / f".course_{lesson.assignment}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".released").exists():
            if folder.exists():
                shutil.rmtree(folder)  # a release that failed halfway
            snapshot.mkdir(parents=True)
            nbformat.write(_read(NOTEBOOKS / lesson.notebook), str(snapshot / lesson.notebook))
            start = time.perf_counter()
            cw.release([lesson], folder, notebooks=snapshot)
            TIMINGS[f"lesson{lesson.number} release"] = time.perf_counter() - start
            (folder / ".released").write_text("")
    return Course(lesson, folder, snapshot / lesson.notebook)


@pytest.fixture(scope="class")
def student_run(course):
    """The student version executed top to bottom, then the table of wrong answers per check."""
    nb = copy.deepcopy(course.student)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=True,
        resources={
            "metadata": {"path": str(course.folder / "release" / cw.assignment_id(course.lesson))}
        },
    )
    n_cells = len(nb.cells)
    probes: dict[str, dict] = {}
    start = time.perf_counter()
    with client.setup_kernel(env=_kernel_env()):
        for index, cell in enumerate(nb.cells[:n_cells]):
            client.execute_cell(cell, index)
        TIMINGS[f"lesson{course.lesson.number} student run"] = time.perf_counter() - start
        _run(client, nb, PROBE_HELPERS)
        for ex in course.exercises:
            solution = course.instructor.cells[ex.solution_index].source
            check = course.instructor.cells[ex.check_index].source
            name, what = _solution_name(solution)
            found = probes[ex.check_id] = {}
            found["right"] = (_run(client, nb, solution), _run(client, nb, check))
            _run(client, nb, f"_cw_right = {name}")
            for kind in PROBES:
                made = _run(client, nb, f"{name} = _cw_mutate(_cw_right, {kind!r}, {what!r})")
                found[kind] = (made, _run(client, nb, check))
            _run(client, nb, solution)  # put the right answer back
    TIMINGS[f"lesson{course.lesson.number} student run + probes"] = time.perf_counter() - start
    nb.cells = nb.cells[:n_cells]
    return nb, probes


@pytest.fixture(scope="class")
def graded(course):
    """nbgrader autograde of two submissions: the instructor version, and one wrong answer."""
    if not course.exercises:
        pytest.fail(f"{course.lesson.notebook} has no graded exercise")
    if shutil.which("bwrap") is None:
        pytest.skip(
            "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (.ci/run does)"
        )
    wrong_ex = course.exercises[min(1, len(course.exercises) - 1)]  # the second exercise
    wrong = copy.deepcopy(course.instructor)
    cell = wrong.cells[wrong_ex.solution_index]
    cell.source = wrong_answer(cell.source)
    cw.submit(course.lesson, STUDENT_OK, course.instructor_path, course.folder)
    cw.submit(course.lesson, STUDENT_WRONG, wrong, course.folder)
    start = time.perf_counter()
    cw.autograde(course.lesson, course.folder)
    TIMINGS[f"lesson{course.lesson.number} autograde (2 submissions)"] = time.perf_counter() - start
    autograded = {
        s: _read(
            course.folder
            / "autograded"
            / s
            / cw.assignment_id(course.lesson)
            / course.lesson.notebook
        )
        for s in (STUDENT_OK, STUDENT_WRONG)
    }
    return cw.scores(course.lesson, course.folder), wrong_ex, autograded


# --- the tests, one class per lesson -------------------------------------------------------------


def test_list_command(capsys):
    """``coursework.py list``: each lesson present, its exercises and points."""
    assert cw.main(["list"]) == 0
    out = capsys.readouterr().out
    for lesson in cw.lessons_present(NOTEBOOKS):
        assert f"{cw.assignment_id(lesson)} {lesson.notebook}: " in out


def test_wrong_answer_edit():
    source = "def f(x):\n    # doc\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y\n    ### END SOLUTION"
    namespace = {}
    exec(wrong_answer(source), namespace)
    assert namespace["f"](1.0) == pytest.approx(2.02) and namespace["f"](1) == 3


@pytest.mark.slow
class _Coursework:
    lesson = None

    def test_release_builds(self, course):
        student, instructor = course.student, course.instructor
        assert len(student.cells) == len(instructor.cells)
        least = 1 if course.lesson.further else 3  # a "Going further" companion may hold fewer
        assert len(course.exercises) >= least, f"{len(course.exercises)} graded exercises"
        for i, (s, t) in enumerate(zip(student.cells, instructor.cells, strict=True)):
            meta = _nbg(t)
            if s.cell_type == "code":
                assert not s.outputs and s.execution_count is None, f"cell {i}: outputs kept"
            assert "### BEGIN SOLUTION" not in s.source and "HIDDEN TESTS" not in s.source
            if meta.get("solution"):
                # a code answer gets the code stub; a written answer graded by hand, the text one
                stub = (
                    "raise NotImplementedError()" if s.cell_type == "code" else "YOUR ANSWER HERE"
                )
                assert stub in s.source, f"cell {i}: no stub"
                assert s.source != t.source
            elif meta.get("grade"):
                assert _nbg(s).get("locked") and _nbg(s)["points"] == meta["points"]
                if "### BEGIN HIDDEN TESTS" not in t.source:
                    assert s.source == t.source, f"cell {i}: check cell changed"
            else:
                assert s.source == t.source, f"cell {i} changed in the release"

    def test_student_notebook_runs_with_only_exercises_stubbed(self, course, student_run):
        nb, _ = student_run
        checks = {e.check_index for e in course.exercises}
        solutions = {e.solution_index for e in course.exercises}
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            assert cell.execution_count is not None, f"cell {i} did not run"
            errors = _errors(cell)
            tags = cell.get("metadata", {}).get("tags", [])
            if i in checks:
                assert errors, f"check cell {i} passed the stub: its check cannot fail"
                assert errors[0]["ename"] == "ExerciseFailed", errors[0]["ename"]
                assert "not implemented yet" in errors[0]["evalue"], errors[0]["evalue"]
            elif i in solutions:
                assert not errors or errors[0]["ename"] == "NotImplementedError"
            elif "raises-exception" not in tags:
                assert not errors, (
                    f"cell {i} (not an exercise) raised in the student version: "
                    f"{errors[0]['ename']}: {errors[0]['evalue']}\n{cell.source[:300]}"
                )

    def test_check_verdict_is_one_red_line(self, course, student_run):
        """What the student sees in a check cell: the verdict alone, no traceback."""
        nb, _ = student_run
        for e in course.exercises:
            (error,) = _errors(nb.cells[e.check_index])
            assert len(error["traceback"]) == 1, error["traceback"]
            line = error["traceback"][0]
            assert "✗" in line and "\x1b[1;31m" in line and "\n" not in line.strip()
            assert "Traceback" not in line and "File " not in line

    def test_checks_pass_the_right_answer(self, course, student_run):
        _, probes = student_run
        for e in course.exercises:
            solution, check = probes[e.check_id]["right"]
            assert not _errors(solution) and not _errors(check), _text(check)
            assert "✓" in _text(check), f"{e.check_id} printed no ✓ verdict: {_text(check)!r}"

    @pytest.mark.parametrize("kind", list(PROBES))
    def test_checks_name_the_problem(self, course, student_run, kind):
        _, probes = student_run
        applied = 0
        for e in course.exercises:
            made, check = probes[e.check_id][kind]
            assert not _errors(made), _text(made)
            errors = _errors(check)
            if errors and "_CwNotApplicable" in errors[0]["evalue"]:
                continue  # e.g. no wrong shape for an answer that is a plain number
            applied += 1
            assert errors, f"{e.check_id} accepted a wrong answer ({kind}): {_text(check)!r}"
            error = errors[0]
            assert error["ename"] == "ExerciseFailed", (
                f"{e.check_id} ({kind}): the check itself raised {error['ename']}: "
                f"{error['evalue']}"
            )
            assert len(error["traceback"]) == 1 and "\n" not in error["evalue"].strip()
            verdict = error["evalue"].lower()
            assert any(w in verdict for w in PROBES[kind]), (
                f"{e.check_id} ({kind}): the verdict does not name the problem: {error['evalue']}"
            )
        if kind in ("none", "not_implemented", "raises"):
            assert applied == len(course.exercises)

    def test_autograde_gives_the_instructor_version_full_marks(self, course, graded):
        scores, _, autograded = graded
        got = scores[STUDENT_OK]
        by_hand = {m.grade_id for m in cw.manual_answers(course.instructor)}
        assert set(got) == {e.check_id for e in course.exercises} | by_hand
        lost = {k: v for k, v in got.items() if v[0] != v[1] and k not in by_hand}
        assert not lost, f"the instructor version lost points: {lost}"
        # an answer graded by hand is pending (None), neither 0 nor full marks
        assert all(got[k][0] is None for k in by_hand), {k: got[k] for k in by_hand}
        for e in course.exercises:  # what the autograder saw: the ✓ verdict, no error
            cell = autograded[STUDENT_OK].cells[e.check_index]
            assert not _errors(cell) and "✓" in _text(cell), _text(cell)
            hidden = "### BEGIN HIDDEN TESTS" in course.instructor.cells[e.check_index].source
            assert not hidden or "### BEGIN HIDDEN TESTS" in cell.source, "hidden tests not run"

    def test_skipping_demonstration_cells_changes_no_record(self, course, graded):
        """The instructor's notebook run with the demonstration cells skipped (as every graded
        run is) and run whole record the same values and calls for every hidden case."""
        from helpers.grading import PUBLIC_SECRET
        from tools.grading import reference as references
        from tools.grading.verdicts import judge

        aid, nid = cw.assignment_id(course.lesson), cw.notebook_id(course.lesson)
        skipped = references.reference(course.folder, aid, nid, PUBLIC_SECRET, True)
        whole = references.reference(course.folder, aid, nid, PUBLIC_SECRET, False)
        keep = ("value", "calls", "inputs", "error")
        assert set(skipped) == set(whole) == {e.solution_id for e in course.exercises}
        differ = []
        for x in whole:
            assert judge(x, whole[x], skipped[x]).correct, x
            for case in whole[x]:
                got = [{k: e.get(k) for k in keep} for e in skipped[x][case]]
                if got != [{k: e.get(k) for k in keep} for e in whole[x][case]]:
                    differ.append((x, case))
        assert not differ, differ
        cached = sorted((course.folder / ".grading" / "reference" / aid).glob("*.json"))
        counts = sorted(len(references.info(p)["skipped"]) for p in cached)
        print(f"\nlesson {course.lesson.key}: cells skipped when grading: {counts[-1]}")

    def test_skipping_demonstration_cells_changes_no_verdict_of_a_wrong_or_blank_answer(
        self, course, graded
    ):
        """One submission with every kind of answer: the exercise the autograde test gets wrong
        answered 1% off (as there), the first other exercise left as released (its stub), every
        other one right. Run as every graded run is, once with the demonstration cells skipped and
        once whole: every exercise gets the same verdict, every hidden case records the same
        values and calls, and something was skipped. (The instructor's right answers, skipped and
        whole, are the record test above.)"""
        from helpers.grading import PUBLIC_SECRET
        from tools.grading import execute
        from tools.grading import reference as references
        from tools.grading.verdicts import by_case, judge_all

        _, wrong_ex, _ = graded
        aid, nid = cw.assignment_id(course.lesson), cw.notebook_id(course.lesson)
        source = _read(course.folder / "source" / aid / course.lesson.notebook)
        release = _read(course.folder / "release" / aid / course.lesson.notebook)
        blank_ex = next((e for e in course.exercises if e is not wrong_ex), None)
        mixed = copy.deepcopy(course.instructor)
        cell = mixed.cells[wrong_ex.solution_index]
        cell.source = wrong_answer(cell.source)
        if blank_ex is not None:
            mixed.cells[blank_ex.solution_index] = copy.deepcopy(
                release.cells[blank_ex.solution_index]
            )
        ids = execute.solution_ids(source)
        keep = ("value", "calls", "inputs", "error")
        seen = {}
        for skip in (True, False):
            ref = references.reference(course.folder, aid, nid, PUBLIC_SECRET, skip)
            outcome = execute.run(
                copy.deepcopy(mixed), source, release, course.folder, PUBLIC_SECRET, skip=skip
            )
            assert not outcome.problems, (skip, outcome.problems)
            verdicts = judge_all(ids, ref, outcome.records)
            records = {
                x: {c: [{k: e.get(k) for k in keep} for e in es] for c, es in cases.items()}
                for x, cases in by_case(outcome.records.cases).items()
            }
            seen[skip] = (outcome.skipped, verdicts, records)
        (skipped, on, records_on), (_, off, records_off) = seen[True], seen[False]
        assert skipped, "no cell was skipped (the comparison would prove nothing)"
        assert {x: (v.correct, v.message) for x, v in on.items()} == {
            x: (v.correct, v.message) for x, v in off.items()
        }
        assert records_on == records_off
        wrong = {wrong_ex.solution_id} | ({blank_ex.solution_id} if blank_ex else set())
        assert {x for x, v in on.items() if not v.correct} == wrong, on
        assert {x for x, v in on.items() if v.correct} == set(ids) - wrong, on
        print(
            f"\nlesson {course.lesson.key}: {wrong_ex.solution_id} wrong, "
            f"{blank_ex.solution_id if blank_ex else 'none'} blank, the rest right: "
            f"{len(skipped)} cells skipped, same verdicts"
        )

    def test_autograde_one_wrong_answer_loses_exactly_its_points(self, course, graded):
        scores, wrong_ex, autograded = graded
        got = scores[STUDENT_WRONG]
        for e in course.exercises:
            score, most = got[e.check_id]
            assert most == e.points
            if e is wrong_ex:
                assert score == 0, f"{e.check_id}: a wrong answer kept {score} points"
            else:
                assert score == most, f"{e.check_id}: lost points for another exercise's answer"
        total = sum(got[e.check_id][0] for e in course.exercises)
        assert total == sum(e.points for e in course.exercises) - wrong_ex.points
        (error,) = _errors(autograded[STUDENT_WRONG].cells[wrong_ex.check_index])
        assert error["ename"] == "ExerciseFailed" and len(error["traceback"]) == 1
        print(
            f"\nlesson {course.lesson.number}: {len(course.exercises)} exercises, "
            f"{sum(e.points for e in course.exercises):g} points "
            f"({', '.join(f'{e.check_id} {e.points:g}' for e in course.exercises)}); "
            f"wrong {wrong_ex.check_id} -> {total:g}; verdict: {error['evalue']}"
        )
        print(json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}, indent=1))


for _lesson in COURSE_NOTEBOOKS:  # core lessons and their "Going further" companions
    _name = f"TestLesson{_lesson.assignment.removeprefix('lesson')}"
    globals()[_name] = type(_name, (_Coursework,), {"lesson": _lesson})
del _lesson, _name
