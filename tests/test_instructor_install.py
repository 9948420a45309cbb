"""The lean installs of docs/INSTRUCTORS.md, "Set up": the instructor's requirements file pins
what the test install pins, and the course package students get as a wheel (without a clone of
the public repository) holds the helpers and their data and no solution.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pins(path: Path, seen: set[Path] | None = None) -> dict[str, str]:
    """name -> version of every ``name==version`` line, following ``-r`` includes."""
    seen = seen or set()
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            included = (path.parent / line[3:].strip()).resolve()
            if included not in seen:
                seen.add(included)
                pins.update(_pins(included, seen))
        elif "==" in line:
            name, version = line.split("==", 1)
            pins[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return pins


@pytest.mark.parametrize(
    "requirements", ["requirements-instructor.txt", "classroom/requirements-hub.txt"]
)
def test_lean_install_pins_the_same_versions_as_the_test_install(requirements):
    lean, full = _pins(ROOT / requirements), _pins(ROOT / "requirements-dev.txt")
    assert {"nbgrader", "bleach", "tinycss2"} <= set(lean), sorted(lean)
    differ = {n: (v, full.get(n)) for n, v in lean.items() if full.get(n) != v}
    assert not differ, f"{requirements} pins differ from requirements-dev.txt: {differ}"
    assert not {"pytest", "playwright", "transformers"} & set(lean)


def test_instructor_install_has_the_course():
    assert "torch" in _pins(ROOT / "requirements-instructor.txt")


def test_hub_environment_has_the_culler_and_the_hub_and_no_editable_clone():
    hub = ROOT / "classroom/requirements-hub.txt"
    assert {"jupyterhub", "jupyterhub-idle-culler"} <= set(_pins(hub))
    lines = [line.split("#", 1)[0].strip() for line in hub.read_text().splitlines()]
    assert not [line for line in lines if line.startswith(("-e", "-r", "--editable"))]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel the guide's ``pip wheel --no-deps .`` builds, from a copy of the course that
    holds the instructor notebooks, nbgrader/ and tools/ (so they could be picked up)."""
    src = tmp_path_factory.mktemp("course")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("helpers", "notebooks", "tools"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    (src / "nbgrader").mkdir()
    shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", src / "nbgrader")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + [".", "-w", str(out)],
        cwd=src,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("*.whl")
    return zipfile.ZipFile(built)


@pytest.mark.slow
def test_students_wheel_holds_the_helpers_and_their_data(wheel):
    names = set(wheel.namelist())
    tracked = subprocess.run(
        ["git", "ls-files", "helpers"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: the tracked helpers files are unknown")
    missing = [f for f in tracked if f not in names]
    assert not missing, f"the wheel lacks {missing}"


@pytest.mark.slow
def test_students_wheel_holds_no_solution(wheel):
    outside = [n for n in wheel.namelist() if not n.startswith(("helpers/", "transformer_"))]
    assert not outside, outside
    assert not [n for n in wheel.namelist() if n.endswith(".ipynb")]
    # nbgrader's markers as they open a line of code (a docstring may name them)
    marker = re.compile(r"^\s*### BEGIN (SOLUTION|HIDDEN TESTS)", re.MULTILINE)
    for name in wheel.namelist():
        text = wheel.read(name).decode("utf-8", errors="replace")
        assert not marker.search(text), f"{name} holds a solution or hidden tests"
