"""Coursework with nbgrader: the student release of every lesson, collecting and autograding.

The committed notebooks under ``notebooks/`` are the instructor versions (complete, executed).
This tool drives nbgrader's own commands in the course folder ``nbgrader/`` (see
docs/INSTRUCTORS.md); everything it writes there is generated and ignored by git.

    python tools/coursework.py release                 # every lesson whose notebook exists
    python tools/coursework.py release --lessons 4 5   # some lessons only
    python tools/coursework.py list                    # exercises and points of each lesson
    python tools/coursework.py collect lesson04 DOWNLOADS/   # DOWNLOADS/<student>.ipynb files
    python tools/coursework.py autograde lesson04      # every submission of lesson04
    python tools/coursework.py scores lesson04         # one line per student, from the gradebook

``release`` copies each lesson notebook to ``nbgrader/source/lessonNN/`` (without the saved
widget state of the instructor's run) and runs ``nbgrader generate_assignment lessonNN --force``
(one run for all lessons): solutions replaced by
``raise NotImplementedError()``, hidden tests removed, outputs cleared, check cells locked; the
student versions land in ``nbgrader/release/lessonNN/``, and the gradebook
(``nbgrader/gradebook.db``) records each assignment's graded cells, which ``autograde`` needs.
``--course-dir DIR`` works on another course folder (the tests use a temporary one).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE_DIR = ROOT / "nbgrader"
CONFIG = COURSE_DIR / "nbgrader_config.py"

sys.path.insert(0, str(ROOT))  # helpers.course, when run from a checkout without installing

from helpers.course import LESSONS, Lesson  # noqa: E402

__all__ = [
    "Exercise",
    "assignment_id",
    "notebook_id",
    "lessons_present",
    "exercises",
    "prepare_course_dir",
    "release",
    "student_notebook",
    "submit",
    "autograde",
    "scores",
    "nbgrader",
]


@dataclass(frozen=True)
class Exercise:
    """One exercise: a solution cell and the locked, graded check cell that follows it."""

    solution_id: str  # nbgrader grade_id of the solution cell
    check_id: str  # grade_id of the graded check cell
    points: float
    solution_index: int  # cell indices in the notebook
    check_index: int


def assignment_id(lesson: Lesson) -> str:
    """The nbgrader assignment name of a lesson: ``lesson04``, ..., ``lesson09``."""
    return f"lesson{lesson.number:02d}"


def notebook_id(lesson: Lesson) -> str:
    """The nbgrader notebook name (the file name without ``.ipynb``)."""
    return Path(lesson.notebook).stem


def lessons_present(notebooks: Path = NOTEBOOKS) -> list[Lesson]:
    """The lessons of helpers.course.LESSONS whose notebook exists."""
    return [lesson for lesson in LESSONS if (notebooks / lesson.notebook).exists()]


def _lesson(arg: str) -> Lesson:
    digits = re.sub(r"\D", "", str(arg))
    for lesson in LESSONS:
        if digits and int(digits) == lesson.number:
            return lesson
    known = ", ".join(f"{x.number} ({assignment_id(x)})" for x in LESSONS)
    raise SystemExit(f"coursework: no lesson {arg!r}; lessons: {known}")


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


def _venv_on_path() -> None:
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def nbgrader(course_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course_dir`` (where its nbgrader_config.py is read).

    Kernels started by nbgrader get the notebook's usual inline matplotlib backend, even when the
    caller (pytest) chose a headless one through MPLBACKEND.
    """
    _venv_on_path()  # nbgrader's gradebook runs the `alembic` command of this environment
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
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


def prepare_course_dir(course_dir: Path = COURSE_DIR) -> Path:
    """Make ``course_dir`` an nbgrader course folder (the course's nbgrader_config.py in it)."""
    course_dir = Path(course_dir).resolve()
    course_dir.mkdir(parents=True, exist_ok=True)
    if course_dir != CONFIG.parent:
        shutil.copy(CONFIG, course_dir / CONFIG.name)
    return course_dir


def release(
    lessons=None,
    course_dir: Path = COURSE_DIR,
    notebooks: Path = NOTEBOOKS,
    db: bool = True,
) -> dict[str, Path]:
    """Build the student version of each lesson with nbgrader's ``generate_assignment``.

    Returns {assignment id: path of the student notebook}. Lessons default to every lesson whose
    notebook exists; ``db=False`` skips the gradebook (then ``autograde`` cannot be used).
    """
    course_dir = prepare_course_dir(course_dir)
    lessons = lessons_present(notebooks) if lessons is None else list(lessons)
    names = []
    for lesson in lessons:
        src = Path(notebooks) / lesson.notebook
        if not src.exists():
            raise FileNotFoundError(f"{src} does not exist (lesson {lesson.number})")
        source = course_dir / "source" / assignment_id(lesson)
        if source.exists():
            shutil.rmtree(source)
        source.mkdir(parents=True)
        nb = nbformat.read(str(src), as_version=4)
        nb.metadata.pop("widgets", None)  # the saved state of the instructor's live explorers
        nbformat.write(nb, str(source / lesson.notebook))
        names.append(assignment_id(lesson))
    flags = ["--force", *([] if db else ["--no-db"])]
    pattern = _glob_for(names, course_dir / "source")
    for name in [pattern] if pattern else names:  # one nbgrader run for all when a glob fits
        nbgrader(course_dir, "generate_assignment", name, *flags)
    built = {assignment_id(x): student_notebook(x, course_dir) for x in lessons}
    for path in built.values():
        if not path.exists():
            raise RuntimeError(f"nbgrader wrote no {path}")
    return built


def _glob_for(names: list[str], source: Path) -> str | None:
    """A glob matching exactly ``names`` among the folders of ``source`` (nbgrader accepts one)."""
    if len(names) < 2 or len({len(n) for n in names}) != 1:
        return None
    pattern = "".join(
        chars.pop() if len(chars := set(column)) == 1 else "[" + "".join(sorted(chars)) + "]"
        for column in zip(*names, strict=True)
    )
    matched = {p.name for p in source.glob(pattern) if p.is_dir()}
    return pattern if matched == set(names) else None


def student_notebook(lesson: Lesson, course_dir: Path = COURSE_DIR) -> Path:
    """Where ``release`` puts the student version of a lesson."""
    return Path(course_dir).resolve() / "release" / assignment_id(lesson) / lesson.notebook


def submit(lesson: Lesson, student: str, notebook, course_dir: Path = COURSE_DIR) -> Path:
    """Place one student's notebook (a path or a NotebookNode) where nbgrader's ``collect`` would.

    That is ``submitted/<student>/<lessonNN>/<notebook name>``, the input of ``autograde``.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.@-]+", student):
        raise ValueError(f"student must be an id of letters, digits, _ . @ -; got {student!r}")
    folder = Path(course_dir).resolve() / "submitted" / student / assignment_id(lesson)
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / lesson.notebook
    if isinstance(notebook, nbformat.NotebookNode):
        nbformat.write(notebook, str(dest))
    else:
        shutil.copy(notebook, dest)
    return dest


def autograde(lesson: Lesson, course_dir: Path = COURSE_DIR, student: str | None = None):
    """Run ``nbgrader autograde lessonNN --force`` (every submission, or one student's)."""
    args = ["autograde", assignment_id(lesson), "--force"]
    if student:
        args.append(f"--student={student}")
    return nbgrader(Path(course_dir).resolve(), *args)


def scores(lesson: Lesson, course_dir: Path = COURSE_DIR) -> dict[str, dict[str, tuple]]:
    """The gradebook's scores: {student: {grade_id: (score, max_score)}} for a lesson."""
    from nbgrader.api import Gradebook, MissingEntry

    _venv_on_path()

    db = Path(course_dir).resolve() / "gradebook.db"
    result: dict[str, dict[str, tuple]] = {}
    with Gradebook(f"sqlite:///{db}", "transformer-block") as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(
                    notebook_id(lesson), assignment_id(lesson), student.id
                )
            except MissingEntry:
                continue
            result[student.id] = {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}
    return result


def collect(lesson: Lesson, folder: Path, course_dir: Path = COURSE_DIR) -> list[Path]:
    """Copy ``folder/<student>.ipynb`` (e.g. downloaded from a learning platform) into submitted/."""
    paths = sorted(Path(folder).glob("*.ipynb"))
    if not paths:
        raise SystemExit(f"coursework: no <student>.ipynb files in {folder}")
    return [submit(lesson, p.stem, p, course_dir) for p in paths]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--course-dir", type=Path, default=COURSE_DIR, help="nbgrader course folder"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("release", help="build the student version of the lessons")
    p.add_argument("--lessons", nargs="*", help="lesson numbers (default: every lesson present)")
    p.add_argument(
        "--no-db", action="store_true", help="do not record the assignments in the gradebook"
    )
    sub.add_parser("list", help="exercises and points of each lesson")
    p = sub.add_parser("collect", help="copy FOLDER/<student>.ipynb into submitted/")
    p.add_argument("assignment")
    p.add_argument("folder", type=Path)
    p = sub.add_parser("autograde", help="autograde the submissions of an assignment")
    p.add_argument("assignment")
    p.add_argument("--student")
    p = sub.add_parser("scores", help="print the gradebook's scores of an assignment")
    p.add_argument("assignment")
    args = parser.parse_args(argv)
    course_dir = args.course_dir.resolve()

    if args.command == "release":
        lessons = [_lesson(x) for x in args.lessons] if args.lessons else lessons_present()
        if not lessons:
            raise SystemExit("coursework: no lesson notebook exists yet under notebooks/")
        for name, path in release(lessons, course_dir, db=not args.no_db).items():
            print(f"{name}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    elif args.command == "list":
        for lesson in lessons_present():
            found = exercises(NOTEBOOKS / lesson.notebook)
            total = sum(e.points for e in found)
            print(
                f"{assignment_id(lesson)} {lesson.notebook}: {len(found)} exercises, {total:g} points"
            )
            for e in found:
                print(f"    {e.check_id}: {e.points:g}")
    elif args.command == "collect":
        lesson = _lesson(args.assignment)
        for path in collect(lesson, args.folder, course_dir):
            print(path)
    elif args.command == "autograde":
        lesson = _lesson(args.assignment)
        prepare_course_dir(course_dir)
        result = autograde(lesson, course_dir, args.student)
        for line in result.stderr.splitlines():  # nbgrader's warnings: late, missing files
            if "| WARNING]" in line or "| ERROR]" in line:
                print(line, file=sys.stderr)
        args.command = "scores"
    if args.command == "scores":
        lesson = _lesson(args.assignment)
        for student, grades in sorted(scores(lesson, course_dir).items()):
            got = sum(s for s, _ in grades.values())
            most = sum(m for _, m in grades.values())
            lost = [k for k, (s, m) in grades.items() if s < m]
            print(f"{student}: {got:g}/{most:g}" + (f" (lost: {', '.join(lost)})" if lost else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
