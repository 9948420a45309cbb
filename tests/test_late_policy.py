"""The course's late-submission policy (tools/grading/saveverdicts.py, ``penalty`` and
``extension_delta``; set in one place, ``c.CourseGrading.late`` and ``.extensions``): the points
taken for a submission by how late it is, and the extra time a student was granted."""

import sys
from datetime import timedelta

import pytest

from tools.grading.saveverdicts import extension_delta, penalty  # noqa: E402

DAY, MINUTE = 86400.0, 60.0
POLICY = {"*": {"percent_per_day": 10, "cap_percent": 50, "grace_minutes": 15}}


@pytest.mark.parametrize(
    ("seconds_late", "taken"),
    [
        (-5 * DAY, 0.0),  # early
        (0.0, 0.0),  # on time
        (15 * MINUTE, 0.0),  # inside the grace period
        (16 * MINUTE, 1.0),  # a started day: 10 % of the 10 points earned
        (DAY, 1.0),  # exactly one day
        (DAY + 1, 2.0),  # into the second day
        (4.5 * DAY, 5.0),  # five started days: 50 %, the cap
        (30 * DAY, 5.0),  # never more than the cap
    ],
)
def test_late_penalty_is_a_percentage_per_started_day_after_the_grace_period_up_to_the_cap(
    seconds_late, taken
):
    assert penalty(POLICY, "lesson04", 10.0, seconds_late) == pytest.approx(taken)


def test_late_penalty_is_a_share_of_the_points_earned():
    assert penalty(POLICY, "lesson04", 0.0, 3 * DAY) == 0.0  # nothing earned, nothing taken
    assert penalty(POLICY, "lesson04", 7.0, 3 * DAY) == pytest.approx(2.1)


def test_late_policy_of_an_assignment_overrides_the_course_wide_one():
    policies = {**POLICY, "lesson09": {"zero": True}}
    assert penalty(policies, "lesson09", 8.0, MINUTE) == 8.0  # late at all: nothing earned
    assert penalty(policies, "lesson04", 8.0, MINUTE) == 0.0  # the "*" grace period
    assert penalty({}, "lesson04", 8.0, 10 * DAY) == 0.0  # no policy: no penalty


def test_extension_is_the_granted_time_for_that_student_and_assignment_only():
    extensions = {"alice": {"lesson04": {"days": 2, "hours": 6}}}
    assert extension_delta(extensions, "alice", "lesson04") == timedelta(days=2, hours=6)
    assert extension_delta(extensions, "alice", "lesson05") is None
    assert extension_delta(extensions, "bob", "lesson04") is None


# --- the late-policy inputs across runs: extensions granted or removed, due dates, times --------
#
# autograde's decisions (who is graded again, what goes into the gradebook before nbgrader runs)
# with the grading itself replaced by a worker that answers at once (every run "fails", which
# zeroes the student and marks them graded): what is tested is what the resume state holds.

import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
from datetime import datetime  # noqa: E402

import nbformat  # noqa: E402
from _grading_notebooks import code_cell, python_notebook  # noqa: E402

from helpers.course import Lesson  # noqa: E402
from tools import coursework as cw  # noqa: E402
from tools.grading import pool  # noqa: E402

LESSON = Lesson(94, "late", "late.ipynb", (), None, "late")
AID = LESSON.assignment
DUE = "2027-03-01 17:00:00 UTC"
FAKE_WORKER = (
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    print(json.dumps({'success': False, 'error': 'not run (test)'}), flush=True)\n"
)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    base = tmp_path_factory.mktemp("late")
    notebooks, course = base / "notebooks", base / "course"
    notebooks.mkdir()
    cells = [
        code_cell("def f():\n    return 1", solution=True, grade=False, locked=False,
                  grade_id="t_ex1"),
        code_cell("print('checked')", solution=False, grade=True, locked=True, points=2,
                  grade_id="t_ex1_check"),
    ]  # fmt: skip
    nbformat.write(python_notebook(cells), notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    return course


@pytest.fixture
def term(released, tmp_path, monkeypatch):
    import shutil

    course = tmp_path / "course"
    shutil.copytree(released, course)
    monkeypatch.setattr(cw.references, "reference", lambda *a, **k: None)
    monkeypatch.setattr(pool, "_reference_key", lambda *a, **k: "reference")
    monkeypatch.setattr(
        pool,
        "_worker",
        lambda course_dir, lesson, env: subprocess.Popen(
            [sys.executable, "-c", FAKE_WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ),
    )
    nb = nbformat.read(cw.student_notebook(LESSON, course), as_version=4)
    cw.submit(LESSON, "alice", nb, course, timestamp=datetime(2027, 3, 3, 17, 0))  # 2 days late

    def settings(extensions: dict | None = None, due: bool = True, late: dict = POLICY):
        lines = [
            f"c.CourseGrading.late = {late!r}",
            f"c.CourseGrading.extensions = {extensions or {}!r}",
        ]
        if due:
            lines.append(f"c.CourseGrading.due = { ({AID: DUE})!r}")
        (course / "course_settings.py").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def grade():
        return cw.autograde(LESSON, course, progress=io.StringIO())

    settings()
    return course, settings, grade


def _extension(course):
    with cw._gradebook(course) as gb:
        return gb.find_submission(AID, "alice").extension


def test_an_extension_granted_after_a_first_run_is_applied_by_the_next_run(term):
    course, settings, grade = term
    assert "alice" in grade().failed  # graded (by the stand-in)
    assert grade().up_to_date == ["alice"]  # nothing changed: not again
    settings({"alice": {AID: {"days": 3}}})
    again = grade()
    assert again.up_to_date == [], "the extension was not applied: alice was not graded again"
    assert _extension(course) == timedelta(days=3)
    assert any("alice: the due date, extension or late policy changed" in n for n in again.notes)


def test_an_extension_removed_from_the_settings_leaves_the_gradebook(term):
    course, settings, grade = term
    settings({"alice": {AID: {"days": 3}}})
    grade()
    assert _extension(course) == timedelta(days=3)
    settings({})
    again = grade()
    assert _extension(course) is None
    assert again.up_to_date == []
    assert any("extension of" in n and "removed" in n for n in again.notes)


def test_a_late_policy_change_regrades_and_a_removed_due_date_leaves_the_gradebook(term):
    course, settings, grade = term
    grade()
    settings(late={"*": {"zero": True}})
    assert grade().up_to_date == []
    settings(due=False)
    again = grade()
    with cw._gradebook(course) as gb:
        assert gb.find_assignment(AID).duedate is None
    assert any("no longer in c.CourseGrading.due" in n for n in again.notes)


def test_a_submission_without_a_time_is_never_silently_on_time(term):
    course, _, grade = term
    (course / "submitted" / "alice" / AID / "timestamp.txt").unlink()
    notes = grade().notes
    assert any(n.startswith("alice: NO SUBMISSION TIME") for n in notes), notes


def test_the_time_recorded_at_collect_wins_over_a_rewritten_timestamp(term):
    course, _, grade = term
    record = course / ".grading" / "times" / AID
    record.mkdir(parents=True)
    submitted = course / "submitted" / "alice" / AID
    digest = hashlib.sha256((submitted / LESSON.notebook).read_bytes()).hexdigest()
    collected = {"used": "2027-03-05 09:00:00.000000 UTC", "notebooks": {LESSON.notebook: digest}}
    (record / "alice.json").write_text(json.dumps(collected))
    notes = grade().notes
    assert (submitted / "timestamp.txt").read_text() == "2027-03-05 09:00:00.000000 UTC"
    assert any("the time recorded at collect" in n for n in notes)


def test_a_time_recorded_for_another_notebook_is_not_applied(term):
    course, _, grade = term
    record = course / ".grading" / "times" / AID
    record.mkdir(parents=True)
    collected = {"used": "2027-03-05 09:00:00.000000 UTC", "notebooks": {LESSON.notebook: "0"}}
    (record / "alice.json").write_text(json.dumps(collected))
    stamp = course / "submitted" / "alice" / AID / "timestamp.txt"
    before = stamp.read_text()
    notes = grade().notes
    assert stamp.read_text() == before
    assert any("is for another notebook" in n for n in notes), notes


def test_feedback_written_before_a_regrade_is_not_left_stale(term):
    course, settings, grade = term
    grade()
    feedback = course / "feedback" / "alice" / AID
    feedback.mkdir(parents=True)
    (feedback / "late.html").write_text("<p>old grade</p>")
    settings({"alice": {AID: {"hours": 12}}})
    again = grade()
    assert not feedback.exists() and again.stale_feedback == ["alice"]


def test_settings_written_in_a_course_dirs_config_are_not_overwritten(term):
    course, _, _ = term
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nc.CourseGrading.late = {}\n", encoding="utf-8")
    edited = config.read_text()
    cw.prepare_course_dir(course)
    assert config.read_text() == edited
