"""Coursework with nbgrader: the student release of every lesson, collecting and autograding.

The committed notebooks under ``notebooks/`` are the instructor versions (complete, executed).
This tool drives nbgrader's own commands in the course folder ``nbgrader/`` (see
docs/INSTRUCTORS.md); everything it writes there is generated and ignored by git.

    python tools/coursework.py release                 # every lesson whose notebook exists
    python tools/coursework.py release --lessons 4 5   # some lessons only
    python tools/coursework.py list                    # exercises and points of each lesson
    python tools/coursework.py collect lesson04 DOWNLOADS/   # DOWNLOADS/<student>.ipynb files
    python tools/coursework.py autograde lesson04      # every submission of lesson04, confined
    python tools/coursework.py scores lesson04         # one line per student, from the gradebook
    python tools/coursework.py review lesson04         # cells that reach for the grading machinery

``release`` copies each lesson notebook to ``nbgrader/source/lessonNN/`` (without the saved
widget state of the instructor's run) and runs ``nbgrader generate_assignment lessonNN --force``
(one run for all lessons): solutions replaced by
``raise NotImplementedError()``, hidden tests removed, outputs cleared, check cells locked; the
student versions land in ``nbgrader/release/lessonNN/``, and the gradebook
(``nbgrader/gradebook.db``) records each assignment's graded cells, which ``autograde`` needs.
``--course-dir DIR`` works on another course folder (the tests use a temporary one).

``autograde`` runs each submission through nbgrader's own ``autograde``, one student at a time (a
malformed submission is named and the others are still graded), in a kernel confined by
bubblewrap (``tools/grading/confine.py``). The points do not come from that kernel: every graded
exercise's hidden test records the student's answers on cases the release never shows
(``helpers.grading.record``), the instructor's solution notebook records the same cases in the
same confined kernel, and ``tools/grading/verdicts.py`` compares the two here, outside. The
verdict is written to the gradebook as the check cell's score (nbgrader's manual score, which
takes precedence over the automatic one) and as the exercise's comment, which nbgrader's
feedback shows. docs/INSTRUCTORS.md says what this guarantees and what it cannot.
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
sys.path.insert(0, str(ROOT / "tools"))

from grading import confine, review  # noqa: E402
from grading.verdicts import Verdict, judge, read_records  # noqa: E402

from helpers.course import LESSONS, Lesson  # noqa: E402

#: The kernelspec nbgrader's autograder runs submissions in (tools/grading/confine.py).
KERNEL = "course-confined"

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
    "Graded",
    "scores",
    "review_submissions",
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
    """The nbgrader assignment name of a lesson: ``lesson04``, ..., ``lesson10``."""
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


def install_kernel(course_dir: Path) -> dict:
    """Write the confined kernelspec into ``course_dir`` and return the environment that finds it."""
    spec_dir = Path(course_dir).resolve() / ".kernels" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [
            sys.executable,
            str(ROOT / "tools" / "grading" / "confine.py"),
            "{connection_file}",
        ],
        "display_name": "Python 3 (confined, for grading)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    path = os.pathsep.join([str(spec_dir.parent.parent), os.environ.get("JUPYTER_PATH", "")])
    return {"JUPYTER_PATH": path.rstrip(os.pathsep)}


def reference_records(lesson: Lesson, course_dir: Path = COURSE_DIR) -> dict:
    """What the instructor's solution records for each hidden case, run in the confined kernel.

    Cached in ``course_dir/.reference/lessonNN/`` by the hash of the source notebook.
    """
    from nbclient import NotebookClient

    course_dir = Path(course_dir).resolve()
    source = course_dir / "source" / assignment_id(lesson) / lesson.notebook
    if not source.exists():
        raise SystemExit(f"coursework: no {source}; run `coursework.py release` first")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    folder = course_dir / ".reference" / assignment_id(lesson) / digest
    log = folder / confine.LOG_NAME
    if not log.exists():
        folder.mkdir(parents=True, exist_ok=True)
        env = install_kernel(course_dir)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            nb = nbformat.read(str(source), as_version=4)
            NotebookClient(
                nb,
                timeout=600,
                kernel_name=KERNEL,
                resources={"metadata": {"path": str(folder)}},
                allow_errors=True,
            ).execute()
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        if not log.exists():
            log.write_text("", encoding="utf-8")
    return read_records(log)[0]


@dataclass
class Graded:
    """What ``autograde`` did: per student, the verdict of each exercise, or why it could not."""

    verdicts: dict[str, dict[str, Verdict]]
    failed: dict[str, str]  # student -> why nbgrader could not grade the submission
    review: dict[str, list]  # student -> review.Finding list


def _students(course_dir: Path, lesson: Lesson) -> list[str]:
    submitted = Path(course_dir) / "submitted"
    if not submitted.exists():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / assignment_id(lesson)).is_dir())


def _why(result: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (result.stderr + result.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\w(Error|Exception): ", ln)]
    return (errors or lines or ["nbgrader failed"])[-1].strip()[:300]


def _record_verdicts(course_dir: Path, lesson: Lesson, student: str, verdicts) -> None:
    from nbgrader.api import Gradebook, MissingEntry

    _venv_on_path()
    found = {
        e.solution_id: e
        for e in exercises(Path(course_dir) / "source" / assignment_id(lesson) / lesson.notebook)
    }
    db = Path(course_dir).resolve() / "gradebook.db"
    with Gradebook(f"sqlite:///{db}", "transformer-block") as gb:
        for exercise, verdict in verdicts.items():
            e = found[exercise]
            try:
                grade = gb.find_grade(
                    e.check_id, notebook_id(lesson), assignment_id(lesson), student
                )
            except MissingEntry:
                continue
            grade.manual_score = e.points if verdict.correct else 0.0
            try:
                comment = gb.find_comment(
                    exercise, notebook_id(lesson), assignment_id(lesson), student
                )
                comment.manual_comment = ("✓ " if verdict.correct else "✗ ") + verdict.message
            except MissingEntry:
                pass
        gb.db.commit()


def autograde(lesson: Lesson, course_dir: Path = COURSE_DIR, student: str | None = None) -> Graded:
    """Grade every submission of ``lesson`` (or one student's), confined, verdicts decided here.

    Each student is one ``nbgrader autograde --student=ID`` run in the confined kernel; one that
    nbgrader cannot grade (a renamed or deleted graded cell, say) is reported in ``failed`` and
    the others are still graded. Then each exercise's hidden records are judged against the
    solution's, and the gradebook gets the verdicts.
    """
    course_dir = Path(course_dir).resolve()
    reference = reference_records(lesson, course_dir)
    env = install_kernel(course_dir)
    solution_ids = [
        e.solution_id
        for e in exercises(course_dir / "source" / assignment_id(lesson) / lesson.notebook)
    ]
    graded = Graded({}, {}, {})
    for sid in [student] if student else _students(course_dir, lesson):
        result = nbgrader(
            course_dir,
            "autograde",
            assignment_id(lesson),
            "--force",
            f"--student={sid}",
            f"--Execute.kernel_name={KERNEL}",
            check=False,
            env=env,
        )
        folder = course_dir / "autograded" / sid / assignment_id(lesson)
        if result.returncode != 0 or not (folder / lesson.notebook).exists():
            graded.failed[sid] = _why(result)
            continue
        records, _ = read_records(folder / confine.LOG_NAME)
        verdicts = {x: judge(x, reference.get(x, {}), records.get(x, {})) for x in solution_ids}
        _record_verdicts(course_dir, lesson, sid, verdicts)
        graded.verdicts[sid] = verdicts
        submitted = course_dir / "submitted" / sid / assignment_id(lesson) / lesson.notebook
        graded.review[sid] = review.review(
            submitted, course_dir / "source" / assignment_id(lesson) / lesson.notebook
        )
    return graded


def review_submissions(lesson: Lesson, course_dir: Path = COURSE_DIR) -> dict[str, list]:
    """The review list of every submission of ``lesson`` (tools/grading/review.py)."""
    course_dir = Path(course_dir).resolve()
    source = course_dir / "source" / assignment_id(lesson) / lesson.notebook
    found = {}
    for sid in _students(course_dir, lesson):
        submitted = course_dir / "submitted" / sid / assignment_id(lesson) / lesson.notebook
        if submitted.exists():
            found[sid] = review.review(submitted, source)
    return found


def _print_review(found: dict[str, list]) -> None:
    flagged = {s: f for s, f in found.items() if f}
    if not flagged:
        print("review: no cell reaches for the grading machinery")
        return
    print("review (for a person to read; not a grade):")
    for sid, findings in sorted(flagged.items()):
        for f in findings:
            print(f"  {sid}  {f.cell} line {f.line}: {f.reason}    {f.code}")


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
    p = sub.add_parser("review", help="list cells of the submissions that reach for the grader")
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
        graded = autograde(lesson, course_dir, args.student)
        for sid, why in sorted(graded.failed.items()):
            print(
                f"{sid}: NOT GRADED, nbgrader could not grade this submission: {why}",
                file=sys.stderr,
            )
        _print_review(graded.review)
        args.command = "scores"
    elif args.command == "review":
        _print_review(review_submissions(_lesson(args.assignment), course_dir))
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
