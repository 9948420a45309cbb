"""``coursework.py collect`` from an LMS download, as an instructor types it: each submission gets
a time (the LMS's own export of times when given, else the file's modification time, and it says
which), Canvas's and Moodle's download names are mapped to student ids through a roster, and a
file it cannot place (an id a spreadsheet would compute, a name outside ``submitted/``, not a
notebook, an LMS user not in the roster) is refused by name with the reason, never skipped or
written elsewhere in silence."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import nbformat
import pytest
from _grading_notebooks import run_coursework

from helpers.course import Lesson
from tools import coursework as cw

ROOT = Path(__file__).resolve().parent.parent
LESSON = Lesson(95, "collect", "collect.ipynb", (), None, "collect")
FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


def _notebook(path: Path, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _time(course: Path, sid: str) -> datetime:
    text = (course / "submitted" / sid / LESSON.assignment / "timestamp.txt").read_text()
    return datetime.strptime(text.strip(), FORMAT)


def _run(course: Path, *args: str):
    return run_coursework(cw, LESSON, course, "collect", LESSON.assignment, *args)


@pytest.mark.parametrize(
    "name", ["-2-3.ipynb", "-A1.ipynb", "@A1.ipynb", "=1+1.ipynb", "+1.ipynb", "...ipynb"]
)
def test_an_unsafe_id_is_refused_by_name_and_nothing_is_written(tmp_path, name):
    downloads, course = tmp_path / "downloads", tmp_path / "course"
    _notebook(downloads / name)
    _notebook(downloads / "alice.ipynb")
    result = _run(course, str(downloads))
    assert result.returncode == 1
    assert f"{name}: NOT COLLECTED: student id" in result.stderr
    assert "a letter or digit first" in result.stderr  # the rule
    assert "1 collected, 1 refused" in result.stderr
    made = {
        p.relative_to(course).as_posix() for p in course.rglob("*") if ".grading" not in p.parts
    }
    allowed = ("nbgrader_config.py", "submitted")
    assert all(p in allowed or p.startswith("submitted/alice") for p in made), made
    assert (course / "submitted" / "alice" / LESSON.assignment / LESSON.notebook).is_file()


def test_a_file_that_is_not_a_notebook_is_refused_not_skipped(tmp_path):
    downloads, course = tmp_path / "downloads", tmp_path / "course"
    _notebook(downloads / "alice.ipynb")
    (downloads / "bob.pdf").write_bytes(b"%PDF-1.4")
    result = _run(course, str(downloads))
    assert result.returncode == 1
    assert "bob.pdf: NOT COLLECTED: not a notebook (.ipynb)" in result.stderr


def test_submit_refuses_an_unsafe_id_naming_the_argument():
    with pytest.raises(ValueError, match=r"student id '-2-3'.*a letter or digit first"):
        cw.check_student_id("-2-3")
    assert cw.check_student_id("s1234567") == "s1234567"
    assert cw.check_student_id("jane.doe-2") == "jane.doe-2"
    assert cw.check_student_id("jane.doe@uni.example") == "jane.doe@uni.example"
    for unsafe in ("+1", "=1+1", "@A1", "..", "a+b", "a/b", "x" * 65, ""):
        with pytest.raises(ValueError, match="a letter or digit first"):
            cw.check_student_id(unsafe)


def test_each_submission_gets_the_file_modification_time_and_says_so(tmp_path):
    downloads, course = tmp_path / "downloads", tmp_path / "course"
    when = datetime(2027, 3, 2, 9, 30, 0).timestamp()  # local wall clock, as a download's mtime
    _notebook(downloads / "alice.ipynb", mtime=when)
    result = _run(course, str(downloads))
    assert result.returncode == 0, result.stderr
    expected = datetime.utcfromtimestamp(when)
    assert _time(course, "alice") == expected
    assert f"alice: submitted {expected.strftime(FORMAT)} (from the file's modification time)" in (
        result.stdout
    )
    record = json.loads(
        (course / ".grading" / "times" / LESSON.assignment / "alice.json").read_text()
    )
    assert record["source"] == "the file's modification time"


def _roster(path: Path) -> Path:
    path.write_text(
        "student,lms_id,sis_id,name\n"
        "alice,12345,S-001,Alice Doe\n"
        "bob,23456,S-002,Bob Roe\n"
        "carol,5551,,Carol Poe\n",
        encoding="utf-8",
    )
    return path


def test_canvas_download_names_are_mapped_through_the_roster_with_the_lms_times(tmp_path):
    downloads, course = tmp_path / "downloads", tmp_path / "course"
    _notebook(downloads / "doealice_12345_6789012_collect.ipynb")
    bob_mtime = datetime(2027, 3, 3, 8, 0, 0).timestamp()
    _notebook(downloads / "roebob_late_23456_6789013_collect-1.ipynb", mtime=bob_mtime)
    _notebook(downloads / "stranger_99999_6789014_collect.ipynb")
    times = tmp_path / "times.csv"
    times.write_text("id,time\n12345,2027-03-01T18:05:00+01:00\n", encoding="utf-8")
    result = _run(course, str(downloads), "--roster", str(_roster(tmp_path / "r.csv")),
                  "--times", str(times))  # fmt: skip
    assert _time(course, "alice") == datetime(2027, 3, 1, 17, 5)  # the times file, in UTC
    assert "alice: submitted 2027-03-01 17:05:00.000000 UTC (from the times file)" in result.stdout
    assert _time(course, "bob") == datetime.utcfromtimestamp(bob_mtime)
    assert "bob: submitted" in result.stdout and "(Canvas marked it late)" in result.stdout
    assert "from the file's modification time" in result.stdout.split("bob:")[1]
    assert "Canvas user 99999 is not in the roster" in result.stderr
    assert result.returncode == 1  # the stranger's file is refused, by name


def test_a_canvas_download_without_a_roster_is_refused_with_what_to_pass(tmp_path):
    downloads, course = tmp_path / "downloads", tmp_path / "course"
    _notebook(downloads / "doealice_12345_6789012_collect.ipynb")
    result = _run(course, str(downloads))
    assert result.returncode == 1
    assert "a Canvas download name: pass --roster" in result.stderr
    assert not (course / "submitted" / "doealice_12345_6789012_collect").exists()


def test_moodle_download_folders_and_worksheet_times_are_read(tmp_path):
    downloads, course = tmp_path / "downloads", tmp_path / "course"
    _notebook(downloads / "Carol Poe_5551_assignsubmission_file_" / "collect.ipynb")
    worksheet = tmp_path / "worksheet.csv"  # Moodle's "Download grading worksheet"
    worksheet.write_text(
        "Identifier,Full name,Status,Last modified (submission)\n"
        'Participant 5551,Carol Poe,Submitted,"Tuesday, 2 March 2027, 5:15 PM"\n'
        "Participant 5552,Dan Loe,No submission,-\n",
        encoding="utf-8",
    )
    roster = str(_roster(tmp_path / "r.csv"))
    with pytest.raises(SystemExit, match="line 2: .* has no time zone"):  # never guessed
        _run(course, str(downloads), "--roster", roster, "--times", str(worksheet))
    result = _run(course, str(downloads), "--roster", roster, "--times", str(worksheet),
                  "--timezone", "Europe/Paris")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert _time(course, "carol") == datetime(2027, 3, 2, 16, 15)  # 17:15 in Paris


def test_a_roster_that_maps_one_lms_id_to_two_students_is_refused(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student,lms_id\nalice,12345\nbob,12345\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: lms_id '12345' appears twice"):
        cw.read_roster(roster)
