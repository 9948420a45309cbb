"""The course folder and its lessons, as the grading tools see them: where things are, each
notebook's exercises and answers graded by hand, nbgrader run in a course folder, its gradebook and
the course's grading settings (docs/INSTRUCTORS.md). Used by every step of ``tools/coursework.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from helpers.course import NOTEBOOKS as COURSE_NOTEBOOKS
from helpers.course import Lesson

from . import settings

ROOT = Path(__file__).resolve().parent.parent.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE_DIR = ROOT / "nbgrader"
CONFIG = COURSE_DIR / "nbgrader_config.py"
#: The instructor's private settings (due dates, late policy, extensions, the secret's path),
#: beside the course folder's nbgrader_config.py, which reads it; never tracked by git.
SETTINGS_NAME = "course_settings.py"


@dataclass(frozen=True)
class Exercise:
    """One exercise: a solution cell and the locked, graded check cell that follows it."""

    solution_id: str  # nbgrader grade_id of the solution cell
    check_id: str  # grade_id of the graded check cell
    points: float
    solution_index: int  # cell indices in the notebook
    check_index: int


def assignment_id(lesson: Lesson) -> str:
    """The nbgrader assignment name of a notebook: ``lesson04``, ..., ``lesson10``, and
    ``lesson04b`` for lesson 4's "Going further" companion (helpers.course ``Lesson.assignment``)."""
    return lesson.assignment


def notebook_id(lesson: Lesson) -> str:
    """The nbgrader notebook name (the file name without ``.ipynb``)."""
    return Path(lesson.notebook).stem


def lessons_present(notebooks: Path = NOTEBOOKS) -> list[Lesson]:
    """The notebooks of helpers.course.NOTEBOOKS (core lessons and their "Going further"
    companions) that exist, in course order."""
    return [lesson for lesson in COURSE_NOTEBOOKS if (notebooks / lesson.notebook).exists()]


def exercises(nb) -> list[Exercise]:
    """The graded exercises of a notebook (a path or a NotebookNode), in order.

    Each graded check cell is paired with the nearest solution cell before it.
    """
    if not isinstance(nb, nbformat.NotebookNode):
        nb = nbformat.read(str(nb), as_version=4)
    found, solution = [], None
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and not meta.get("grade"):
            solution = (meta["grade_id"], i)
        elif meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            if solution is None:
                raise ValueError(
                    f"graded cell {meta.get('grade_id')!r} has no solution cell before it"
                )
            found.append(
                Exercise(solution[0], meta["grade_id"], float(meta["points"]), solution[1], i)
            )
    return found


@dataclass(frozen=True)
class ManualAnswer:
    """An answer the instructor grades by hand (nbgrader's "manually graded answer": a cell with
    solution and grade both set, e.g. a written explanation); autograde gives it no points (0 if
    left as released), ``scores`` reports it pending until the instructor has graded it."""

    grade_id: str
    points: float
    index: int
    cell_type: str


def manual_answers(nb) -> list[ManualAnswer]:
    """The manually graded answers of a notebook (a path or a NotebookNode), in order."""
    if not isinstance(nb, nbformat.NotebookNode):
        nb = nbformat.read(str(nb), as_version=4)
    return [
        ManualAnswer(meta["grade_id"], float(meta.get("points", 0)), i, cell.cell_type)
        for i, cell in enumerate(nb.cells)
        if (meta := cell.get("metadata", {}).get("nbgrader", {})).get("solution")
        and meta.get("grade")
    ]


def _venv_on_path() -> None:
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def nbgrader(
    course_dir: Path, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course_dir`` (where its nbgrader_config.py is read).

    Kernels started by nbgrader get the notebook's usual inline matplotlib backend, even when the
    caller (pytest) chose a headless one through MPLBACKEND.
    """
    _venv_on_path()  # nbgrader's gradebook runs the `alembic` command of this environment
    env = {**{k: v for k, v in os.environ.items() if k != "MPLBACKEND"}, **(env or {})}
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course_dir,
        env=env,
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"`nbgrader {' '.join(args)}` failed in {course_dir} (exit {result.returncode}):\n"
            + result.stdout[-3000:]
            + result.stderr[-6000:]
        )
    return result


def _students(course_dir: Path, lesson: Lesson) -> list[str]:
    submitted = Path(course_dir) / "submitted"
    if not submitted.exists():
        return []
    return sorted(
        p.name
        for p in submitted.iterdir()
        if not p.is_symlink() and (p / assignment_id(lesson)).is_dir()
    )


def _gradebook(course_dir: Path):
    from nbgrader.api import Gradebook

    _venv_on_path()
    db = Path(course_dir).resolve() / "gradebook.db"
    return Gradebook(f"sqlite:///{db}?timeout=60", "transformer-block")


def _settings(course_dir: Path):
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(CONFIG.name, path=str(Path(course_dir).resolve())).load_config()
    return settings.CourseGrading(config=config)
