"""Installing the course as a student would, in tests (tests/test_installed_course.py,
tests/test_colab_cell.py): the fixtures that build the wheel and the student's fresh environment
are in tests/conftest.py (``course_wheel``, ``student_venv``, ``student_env``)."""

from __future__ import annotations

import subprocess

#: the xdist group of every test that uses the fixtures below: one worker builds them once
COURSE_INSTALL = "course-install"
#: what Colab has before a lesson's first cell, and the torch a student already has
STUDENT_PACKAGES = ("torch==2.13.0", "numpy", "matplotlib", "ipywidgets", "ipython")


def run_ok(cmd, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd`` (text output captured, 15 minutes at most); fail the test with its output
    if it exits with an error."""
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kwargs)
    assert run.returncode == 0, f"{cmd}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run
