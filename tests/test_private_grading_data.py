"""The grader's private data stays out of git: the records under ``nbgrader/.grading/``
(reference records, per-student logs, submission times, resume state) and the instructor's
settings (due dates, late policy, extensions, the secret's path) in ``nbgrader/course_settings.py``
are git-ignored, and no tracked file sets them; a tracked example shows what to write."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ignored(path: str) -> bool:
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, capture_output=True
    )
    return result.returncode == 0


@pytest.mark.parametrize(
    "path",
    [
        "nbgrader/.grading/references/lesson04.json",
        "nbgrader/.grading/log/lesson04/alice.json",
        "nbgrader/.grading/state/lesson04/alice.json",
        "nbgrader/.grading/times/lesson04/alice.json",
        "nbgrader/course_settings.py",
    ],
)
def test_the_graders_records_and_the_instructors_settings_are_git_ignored(path):
    assert _ignored(path), f"{path} would be committed"


def test_no_tracked_file_sets_due_dates_late_policy_extensions_or_the_secret():
    tracked = subprocess.run(
        ["git", "ls-files", "nbgrader", "classroom"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    setting = re.compile(r"^\s*c\.CourseGrading\.(due|late|extensions|secret_file)\s*=", re.M)
    for name in tracked:
        if name.endswith(".example.py") or not name.endswith(".py"):
            continue
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not setting.search(text), f"{name} sets the instructor's private settings"
    example = ROOT / "nbgrader" / "course_settings.example.py"
    assert setting.search(example.read_text(encoding="utf-8"))
    assert (
        'load_subconfig("course_settings.py")'
        in (ROOT / "nbgrader" / "nbgrader_config.py").read_text()
    )
