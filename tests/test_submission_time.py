"""A submission's time comes from something the student cannot write (issue: a student who owns
the exchange's inbound folder rewrote ``timestamp.txt`` and a 2-day-late submission lost nothing).

Through nbgrader's real ``collect`` with the classroom's configuration (classroom/nbgrader_config.py
and owner_exchange.py, as a hub's /etc/jupyter holds them): the collected ``timestamp.txt``, which
nbgrader's autograde reads for the late policy, is the submission's inode change time (set by the
kernel, never earlier than the last change) when the student's own file disagrees, and the
student's own time when it is the honest one nbgrader's submit wrote (within the tolerance);
both times are recorded on the instructor's side."""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


def _utc(text: str) -> datetime:
    return datetime.strptime(text.strip(), FORMAT)


@pytest.fixture
def exchange(tmp_path):
    shared = tmp_path / "jupyter"  # what /etc/jupyter holds on the hub
    shared.mkdir()
    for name in ("nbgrader_config.py", "owner_exchange.py"):
        shutil.copy(ROOT / "classroom" / name, shared / name)
    root = tmp_path / "exchange"
    inbound = root / "transformer-block" / "inbound"
    inbound.mkdir(parents=True)
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n", encoding="utf-8"
    )
    env = {
        **os.environ,
        "JUPYTER_CONFIG_PATH": str(shared),
        "COURSE_EXCHANGE": str(root),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    me = pwd.getpwuid(os.getuid()).pw_name

    def hand_in(assignment: str, claimed: datetime | None, folder_time: datetime) -> Path:
        """A submission folder as nbgrader's submit makes it, with ``claimed`` in its
        timestamp.txt (what a student who owns the folder can write)."""
        stamp = folder_time.strftime(FORMAT)
        folder = inbound / f"{me}+{assignment}+{stamp}+abcd1234"
        folder.mkdir()
        nbformat.write(nbformat.v4.new_notebook(), str(folder / f"{assignment}.ipynb"))
        if claimed is not None:
            (folder / "timestamp.txt").write_text(claimed.strftime(FORMAT), encoding="utf-8")
        return folder

    def collect(assignment: str) -> tuple[datetime, dict]:
        result = subprocess.run(
            [sys.executable, "-m", "nbgrader", "collect", assignment],
            cwd=course,
            env=env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        got = course / "submitted" / me / assignment / "timestamp.txt"
        record = course / ".grading" / "times" / assignment / f"{me}.json"
        data = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {}
        if data:
            assert (course / ".grading").stat().st_mode & 0o077 == 0  # the instructor's alone
        return _utc(got.read_text(encoding="utf-8")), {**data, "log": result.stderr}

    return hand_in, collect


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def test_a_rewritten_timestamp_loses_to_the_file_systems_time(exchange):
    hand_in, collect = exchange
    before = _now() - timedelta(seconds=2)  # the file system's clock may round down
    forged = before - timedelta(days=2)  # "handed in two days ago", written today
    hand_in("lesson04", forged, folder_time=forged)
    used, record = collect("lesson04")
    assert used >= before, f"the collected time {used} is the student's {forged}"
    assert used <= _now() + timedelta(seconds=2)
    assert record["timestamp_txt"] == forged.strftime(FORMAT)
    assert list(record["notebooks"]) == ["lesson04.ipynb"]  # the files this time is for
    assert record["source"] == "the file system's change time"
    assert "the file system's time is used" in record["log"]


def test_a_missing_timestamp_gets_the_file_systems_time(exchange):
    hand_in, collect = exchange
    before = _now() - timedelta(seconds=2)
    hand_in("lesson05", None, folder_time=before - timedelta(days=3))
    used, record = collect("lesson05")
    assert used >= before
    assert record["timestamp_txt"] is None


def test_the_honest_timestamp_nbgrader_submit_wrote_is_kept(exchange):
    hand_in, collect = exchange
    honest = _now() - timedelta(seconds=1)  # submit stamps the time, then copies the files
    hand_in("lesson06", honest, folder_time=honest)
    used, record = collect("lesson06")
    assert used == datetime.strptime(honest.strftime(FORMAT), FORMAT)
    assert record["source"].startswith("timestamp.txt")  # and it says so


# --- through the whole pipeline: the late penalty follows the time the student cannot write ------


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is needed for grading")
def test_a_forged_timestamp_does_not_escape_the_late_penalty(exchange, tmp_path):
    """A full-marks submission handed in 1 day 23 hours late whose timestamp.txt claims an hour
    before the due date: nbgrader collect (classroom configuration), then coursework.py's
    confined autograde. The penalty is two started days of 10 %: 2 points earned, 0.4 taken."""
    from _grading_notebooks import code_cell, python_notebook

    from helpers.course import Lesson
    from tools import coursework as cw

    hand_in, collect = exchange
    course = tmp_path / "course"
    (course / "nbgrader_config.py").unlink()  # the course's own configuration instead
    lesson = Lesson(93, "late", "lesson93.ipynb", (), None, "late")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    instructor = python_notebook(
        [
            code_cell("import torch\nfrom helpers.grading import record"),
            code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                      solution=True, grade=False, locked=False, grade_id="t_ex1"),
            code_cell("print('✓ passed')\n### BEGIN HIDDEN TESTS\n"
                      "record('t_ex1', double, torch.tensor([1.5, -2.0]))\n### END HIDDEN TESTS",
                      solution=False, grade=True, locked=True, points=2, grade_id="t_ex1_check"),
        ]
    )  # fmt: skip
    nbformat.write(instructor, notebooks / lesson.notebook)
    cw.release([lesson], course, notebooks=notebooks)
    now = _now()
    due = now - timedelta(days=2) + timedelta(hours=1)
    (course / "course_settings.py").write_text(
        f"c.CourseGrading.due = {{'lesson93': {due.strftime(FORMAT)!r}}}\n"
        "c.CourseGrading.late = {'*': {'percent_per_day': 10, 'cap_percent': 50}}\n",
        encoding="utf-8",
    )
    folder = hand_in("lesson93", due - timedelta(hours=1), folder_time=due - timedelta(hours=1))
    (folder / "lesson93.ipynb").unlink()
    nbformat.write(instructor, str(folder / lesson.notebook))
    (folder / "timestamp.txt").write_text((due - timedelta(hours=1)).strftime(FORMAT))  # again
    used, _ = collect("lesson93")
    graded = cw.autograde(lesson, course, progress=io.StringIO())
    me = pwd.getpwuid(os.getuid()).pw_name
    assert not graded.failed, graded.failed
    assert cw.scores(lesson, course)[me]["t_ex1_check"] == (2.0, 2.0)
    assert cw.penalties(lesson, course)[me] == pytest.approx(0.4)
    assert used >= now - timedelta(seconds=2)
