"""Coursework with nbgrader: the student release of every lesson, collecting and autograding.

The committed notebooks under ``notebooks/`` are the instructor versions (complete, executed,
solutions and hidden tests included: never hand them out). This tool drives nbgrader in the
course folder ``nbgrader/`` (see docs/INSTRUCTORS.md); everything it writes there is generated
and ignored by git.

    python tools/coursework.py release                 # every lesson whose notebook exists
    python tools/coursework.py release --lessons 4 5   # some lessons only
    python tools/coursework.py list                    # exercises and points of each lesson
    python tools/coursework.py secret                  # the instructor's secret (hidden inputs)
    python tools/coursework.py collect lesson04 DOWNLOADS/   # DOWNLOADS/<student>.ipynb files
    python tools/coursework.py collect lesson04 DOWNLOADS/ --roster roster.csv --times times.csv
    python tools/coursework.py autograde lesson04 --jobs 4   # every submission, confined
    python tools/coursework.py autograde lesson04 --student alice   # one student again
    python tools/coursework.py scores lesson04         # one line per student, and per exercise
    python tools/coursework.py scores lesson04 lesson05 --csv grades.csv --roster roster.csv
    python tools/coursework.py review lesson04         # cells that reach for the grading machinery
    python tools/coursework.py grade lesson10 alice l10_ex4_explain 2.5 --comment "..."  # by hand

``release`` copies each lesson notebook to ``nbgrader/source/lessonNN/`` (without the saved
widget state of the instructor's run) and runs ``nbgrader generate_assignment --force`` (one run
for all lessons): solutions replaced by ``raise NotImplementedError()``, hidden tests removed,
outputs cleared, check cells locked; the student versions land in ``nbgrader/release/lessonNN/``,
and the gradebook (``nbgrader/gradebook.db``) records each assignment's graded cells.
``--course-dir DIR`` works on another course folder (the tests use a temporary one).

``collect`` places an LMS download's notebooks (``<student>.ipynb``, or Canvas's and Moodle's
download names mapped to student ids by a roster) into ``submitted/``, each with its submission
time (from the LMS's times when given, else the file's modification time; it says which), and
refuses by name, with the reason, a file it cannot place (an unsafe id, not a notebook).

``autograde`` grades every submission of a lesson with nbgrader's own autograde, configured by
the course folder's ``nbgrader_config.py`` (so the formgrader's button grades the same way): each
notebook runs in the confined grading kernel, from a private folder, with the course's
demonstration cells no exercise needs skipped (``tools/grading/execute.py``, ``plan.py``); the
points come from the hidden tests' records, judged against the instructor's notebook's records
outside the kernel (``tools/grading/verdicts.py``). ``--jobs N`` grades N students at once (one
worker process each, ``tools/grading/worker.py``), with a progress line; an interrupted run,
started again, grades only the students not graded yet or whose submission, due date,
extension or late policy changed since (``--force`` grades everyone again); due dates and
extensions come from ``course_settings.py`` (private, beside ``nbgrader_config.py``).
A submission that cannot be graded scores 0 on every exercise, with the reason; the others are
graded. docs/INSTRUCTORS.md says what this guarantees and what it cannot.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COURSE_DIR = ROOT / "nbgrader"
CONFIG = COURSE_DIR / "nbgrader_config.py"
#: The instructor's private settings (due dates, late policy, extensions, the secret's path),
#: beside the course folder's nbgrader_config.py, which reads it; never tracked by git.
SETTINGS_NAME = "course_settings.py"

sys.path.insert(0, str(ROOT))  # helpers.course, when run from a checkout without installing
sys.path.insert(0, str(ROOT / "tools"))

from grading import limits, review, settings  # noqa: E402
from grading import reference as references  # noqa: E402
from grading.execute import grading_folder  # noqa: E402
from grading.saveverdicts import extension_delta  # noqa: E402
from grading.verdicts import Verdict  # noqa: E402

from helpers.course import NOTEBOOKS as COURSE_NOTEBOOKS  # noqa: E402
from helpers.course import Lesson  # noqa: E402

__all__ = [
    "Exercise",
    "ManualAnswer",
    "manual_answers",
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
    "penalties",
    "grade_by_hand",
    "summary",
    "write_csv",
    "export_note",
    "spreadsheet_text",
    "check_student_id",
    "read_roster",
    "read_times",
    "collect",
    "Collected",
    "sanitize",
    "zero",
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


def _lesson(arg: str) -> Lesson:
    """A notebook by its number or assignment: ``4``, ``04``, ``lesson04``; ``4b``,
    ``lesson04b`` for a companion."""
    match = re.fullmatch(r"(?:lesson)?0*(\d+)(b?)", str(arg).strip().lower())
    if match:
        for lesson in COURSE_NOTEBOOKS:
            if lesson.key == match.group(1) + match.group(2):
                return lesson
    known = ", ".join(f"{x.key} ({assignment_id(x)})" for x in COURSE_NOTEBOOKS)
    raise SystemExit(f"coursework: no lesson {arg!r}; notebooks: {known}")


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


def prepare_course_dir(course_dir: Path = COURSE_DIR) -> Path:
    """Make ``course_dir`` an nbgrader course folder: the course's nbgrader_config.py in it (a
    copy, which names this checkout's grading code, for a folder other than ``nbgrader/``). A
    copy the instructor has edited is kept as it is (and said so); their settings belong in
    ``course_settings.py`` beside it, which the copy reads."""
    course_dir = Path(course_dir).resolve()
    course_dir.mkdir(parents=True, exist_ok=True)
    if course_dir != CONFIG.parent.resolve():
        text = CONFIG.read_text(encoding="utf-8")
        tools = json.dumps(str(ROOT / "tools"))
        text = text.replace(
            "c = get_config()",
            f'os.environ.setdefault("COURSE_TOOLS", {tools})\nc = get_config()',
            1,
        )
        target = course_dir / CONFIG.name
        record = grading_folder(course_dir) / "config.sha256"
        ours = record.read_text(encoding="utf-8").strip() if record.exists() else None
        if target.exists() and target.read_text(encoding="utf-8") != text:
            current = hashlib.sha256(target.read_bytes()).hexdigest()
            if current != ours:  # written or edited by the instructor: theirs, never replaced
                print(
                    f"coursework: {target} is not the copy coursework.py wrote (edited?): kept as "
                    f"it is, without the course's later changes; the course's settings belong "
                    f"in {SETTINGS_NAME} beside it (delete {target.name} to get the course's)",
                    file=sys.stderr,
                )
                return course_dir
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            record.write_text(hashlib.sha256(text.encode()).hexdigest(), encoding="utf-8")
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


# ---------------------------------------------------------------------------------------------
# Submissions: what the unconfined side accepts from a student's folder
# ---------------------------------------------------------------------------------------------


def sanitize(folder: Path) -> list[str]:
    """Remove from a student's submitted folder everything but plain files and folders: symlinks,
    files with more than one hard link (possibly someone else's file), fifos, sockets, devices.
    Returns what was removed (paths relative to the folder). Nothing is followed."""
    removed: list[str] = []
    folder = Path(folder)

    def walk(path: Path):
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for entry in entries:
            rel = str(Path(entry.path).relative_to(folder))
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                os.unlink(entry.path)
                removed.append(f"{rel} (a symbolic link)")
            elif stat.S_ISDIR(info.st_mode):
                walk(Path(entry.path))
            elif not stat.S_ISREG(info.st_mode):
                os.unlink(entry.path)
                removed.append(f"{rel} (not a regular file)")
            elif info.st_nlink != 1:
                os.unlink(entry.path)
                removed.append(f"{rel} (a hard link to another file)")

    if folder.is_symlink():
        folder.unlink()
        return ["(the submission folder itself was a symbolic link)"]
    if folder.is_dir():
        walk(folder)
    return removed


def submit(
    lesson: Lesson, student: str, notebook, course_dir: Path = COURSE_DIR, timestamp=None
) -> Path:
    """Place one student's notebook (a path or a NotebookNode) where nbgrader's ``collect`` would.

    That is ``submitted/<student>/<lessonNN>/<notebook name>``, the input of ``autograde``;
    ``timestamp`` (a datetime) is written as nbgrader's ``timestamp.txt`` (when it was handed in).
    """
    check_student_id(student)
    folder = Path(course_dir).resolve() / "submitted" / student / assignment_id(lesson)
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / lesson.notebook
    if dest.is_symlink():
        dest.unlink()
    if isinstance(notebook, nbformat.NotebookNode):
        nbformat.write(notebook, str(dest))
    else:
        shutil.copyfile(notebook, dest, follow_symlinks=False)
    if timestamp is not None:
        stamp = folder / "timestamp.txt"
        if stamp.is_symlink():
            stamp.unlink()
        stamp.write_text(_utc_text(timestamp), encoding="utf-8")
    return dest


#: A student id the course accepts: a letter or digit first, then letters, digits, ``_ . - @``
#: (at most 64; an e-mail address is one). Never a leading ``- + = @`` (a spreadsheet computes
#: ``-2-3``, ``=1+1``, ``@A1``), never a leading dot (``..`` would name a folder outside
#: ``submitted/``), never a ``+`` (nbgrader's exchange separates names with it).
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
ID_RULE = "a letter or digit first, then only letters, digits, _ . - @ (at most 64 characters)"


def check_student_id(student, where: str = "") -> str:
    """``student`` if it is a safe student id (:data:`STUDENT_ID`), else a ValueError naming it,
    where it came from and the rule (the course's coursework tools; docs/INSTRUCTORS.md section 2)."""
    if not isinstance(student, str) or not STUDENT_ID.fullmatch(student):
        origin = f" ({where})" if where else ""
        raise ValueError(f"student id {student!r}{origin} is not allowed: {ID_RULE}")
    return student


# Canvas's "Download Submissions": ``<name>_<user id>_<submission id>_<file>``, with ``late_``
# (or ``LATE_``) before the user id of a late one; a resubmitted file's name may end ``-1``.
CANVAS_NAME = re.compile(
    r"(?P<name>[^_]+)_(?P<late>late_)?(?P<lms>\d+)_(?P<sub>\d+)_(?P<file>.+)", re.I
)
# Moodle's "Download all submissions": ``<Full Name>_<participant id>_assignsubmission_file_<file>``
# (or a folder ``<Full Name>_<participant id>_assignsubmission_file_/`` holding the file).
MOODLE_NAME = re.compile(r"(?P<name>.+)_(?P<lms>\d+)_assignsubmission_file_(?P<file>.*)")


@dataclass
class Collected:
    """What ``collect`` did: per student, the notebook placed and its time (and where the time
    came from); the files it refused, each with the reason."""

    placed: dict[str, Path] = field(default_factory=dict)
    times: dict[str, tuple] = field(default_factory=dict)  # student -> (datetime UTC, source)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    notes: dict[str, str] = field(default_factory=dict)  # student -> what the LMS said


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """A roster CSV: a ``student`` column (the course's student id) and optional ``lms_id`` (the
    LMS's user id as in its download names: Canvas's user id, Moodle's participant id),
    ``sis_id`` (the id the LMS's grade import matches) and ``name``. Returns {student: row}."""
    import csv

    rows: dict[str, dict[str, str]] = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "student" not in reader.fieldnames:
            raise ValueError(
                f"roster {path}: a header row with a 'student' column is needed "
                "(and optionally lms_id, sis_id, name)"
            )
        for n, row in enumerate(reader, start=2):
            sid = (row.get("student") or "").strip()
            check_student_id(sid, f"roster {path}, line {n}")
            if sid in rows:
                raise ValueError(f"roster {path}, line {n}: student {sid!r} appears twice")
            rows[sid] = {k: (row.get(k) or "").strip() for k in ("lms_id", "sis_id", "name")}
            lms = rows[sid]["lms_id"]
            if lms and any(r["lms_id"] == lms for s, r in rows.items() if s != sid):
                raise ValueError(f"roster {path}, line {n}: lms_id {lms!r} appears twice")
    return rows


def read_times(path: Path, zone: str | None = None) -> dict[str, datetime]:
    """Submission times from a CSV with an id column (``id``, ``student``, ``lms_id`` or Moodle's
    ``Identifier``: a student id or the LMS's user id) and a time column (``time``,
    ``submitted_at`` or Moodle's ``Last modified (submission)``). A time without a zone needs
    ``zone`` (e.g. ``Europe/Paris``). Returns {id: UTC datetime}."""
    import csv
    from zoneinfo import ZoneInfo

    from dateutil import parser as dateparser

    id_names = ("id", "student", "lms_id", "Identifier")
    time_names = ("time", "submitted_at", "Last modified (submission)")
    found: dict[str, datetime] = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        id_col = next((c for c in id_names if c in fields), None)
        time_col = next((c for c in time_names if c in fields), None)
        if id_col is None or time_col is None:
            raise ValueError(
                f"times {path}: the header needs an id column ({', '.join(id_names)}) and a time "
                f"column ({', '.join(time_names)}); it has {', '.join(fields) or 'none'}"
            )
        for n, row in enumerate(reader, start=2):
            key = (row.get(id_col) or "").strip().removeprefix("Participant ").strip()
            text = (row.get(time_col) or "").strip()
            if not key or not text or text == "-":
                continue  # Moodle's row of a student who submitted nothing
            try:
                when = dateparser.parse(text)
            except (ValueError, OverflowError):
                raise ValueError(f"times {path}, line {n}: {text!r} is not a time") from None
            if when.tzinfo is None:
                if not zone:
                    raise ValueError(
                        f"times {path}, line {n}: {text!r} has no time zone; write one "
                        "(2027-03-01 17:05:00+01:00, ... UTC) or pass --timezone (Europe/Paris)"
                    )
                when = when.replace(tzinfo=ZoneInfo(zone))
            found[key] = when.astimezone(UTC).replace(tzinfo=None)
    return found


def _downloads(folder: Path) -> list[tuple[Path, str]]:
    """The files of an LMS download folder, each with the name that identifies it (a file in a
    Moodle submission folder is named by its folder)."""
    found = []
    for entry in sorted(Path(folder).iterdir()):
        if entry.is_dir() and not entry.is_symlink() and MOODLE_NAME.fullmatch(entry.name):
            found += [(p, entry.name + p.name) for p in sorted(entry.iterdir())]
        else:
            found.append((entry, entry.name))
    return found


#: How nbgrader writes a submission's time in ``timestamp.txt``.
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


def _utc_text(when) -> str:
    """``when`` (a datetime; naive means UTC) in nbgrader's ``timestamp.txt`` format, in UTC."""
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.strftime(TIME_FORMAT)


def collect(
    lesson: Lesson,
    folder: Path,
    course_dir: Path = COURSE_DIR,
    roster: dict | None = None,
    times: dict | None = None,
) -> Collected:
    """Place an LMS download's notebooks into ``submitted/``, each with its submission time.

    A file is ``<student>.ipynb``, or a Canvas or Moodle download name (``roster``, from
    :func:`read_roster`, maps the LMS's user id in it to the student). Its time is the one
    ``times`` gives (from :func:`read_times`, by student or LMS id), else the file's modification
    time; which one is recorded in ``.grading/times/``. A file that is not a notebook, whose
    student is unknown or whose id is not safe (:data:`STUDENT_ID`) is refused with the reason,
    as are two notebooks for one student; the others are collected under ``lesson``."""
    course_dir = Path(course_dir).resolve()
    roster = roster or {}
    by_lms = {row["lms_id"]: sid for sid, row in roster.items() if row.get("lms_id")}
    times = times or {}
    done = Collected()
    chosen: dict[str, list[tuple[Path, str, str]]] = {}
    entries = _downloads(folder)
    if not entries:
        raise SystemExit(f"coursework: {folder} is empty")
    for path, name in entries:
        shown = str(path.relative_to(folder))
        if path.is_symlink() or not path.is_file():
            done.refused.append((shown, "not a regular file (a folder or a link)"))
            continue
        if not name.endswith(".ipynb"):
            done.refused.append((shown, "not a notebook (.ipynb)"))
            continue
        lms = CANVAS_NAME.fullmatch(name) or MOODLE_NAME.fullmatch(name)
        note = ""
        if lms:
            kind = "Moodle" if "assignsubmission_file_" in name else "Canvas"
            if not roster:
                done.refused.append(
                    (
                        shown,
                        f"a {kind} download name: pass --roster (student,lms_id,...) to map "
                        f"LMS user {lms['lms']} to a student id",
                    )
                )
                continue
            sid = by_lms.get(lms["lms"])
            if sid is None:
                done.refused.append((shown, f"{kind} user {lms['lms']} is not in the roster"))
                continue
            if lms.groupdict().get("late"):
                note = "Canvas marked it late"
        else:
            sid = name[: -len(".ipynb")]
            try:
                check_student_id(sid, f"file {shown}")
            except ValueError as e:
                done.refused.append((shown, str(e)))
                continue
            if roster and sid not in roster:
                done.refused.append((shown, f"student {sid!r} is not in the roster"))
                continue
        chosen.setdefault(sid, []).append((path, shown, note))
    for sid, found in sorted(chosen.items()):
        if len(found) > 1:
            names = ", ".join(shown for _, shown, _ in found)
            for _, shown, _ in found:
                done.refused.append(
                    (shown, f"{len(found)} notebooks for {sid} ({names}): keep one")
                )
            continue
        path, shown, note = found[0]
        lms_id = roster.get(sid, {}).get("lms_id", "")
        if sid in times or (lms_id and lms_id in times):
            when = times[sid] if sid in times else times[lms_id]
            source = "the times file"
        else:
            when = datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)
            source = "the file's modification time"
        done.placed[sid] = submit(lesson, sid, path, course_dir, timestamp=when)
        done.times[sid] = (when, source)
        if note:
            done.notes[sid] = note
        _record_time(course_dir, lesson, sid, when, source, shown)
    return done


def _record_time(course_dir: Path, lesson: Lesson, sid: str, when, source: str, file: str) -> None:
    """The time ``collect`` gave a submission, and where it came from, on the instructor's side."""
    folder = grading_folder(Path(course_dir)) / "times" / assignment_id(lesson)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    placed = Path(course_dir) / "submitted" / sid / assignment_id(lesson) / lesson.notebook
    data = {
        "used": when.strftime(TIME_FORMAT),
        "source": source,
        "collected_from": file,
        "how": "LMS download",
        "notebooks": {lesson.notebook: hashlib.sha256(placed.read_bytes()).hexdigest()},
    }
    tmp = folder / f"{sid}.tmp"
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, folder / f"{sid}.json")


def _students(course_dir: Path, lesson: Lesson) -> list[str]:
    submitted = Path(course_dir) / "submitted"
    if not submitted.exists():
        return []
    return sorted(
        p.name
        for p in submitted.iterdir()
        if not p.is_symlink() and (p / assignment_id(lesson)).is_dir()
    )


# ---------------------------------------------------------------------------------------------
# Autograding: workers, progress, resume, zeros with a reason
# ---------------------------------------------------------------------------------------------


@dataclass
class Graded:
    """What ``autograde`` did: per student, the verdict of each exercise, or why it could not."""

    verdicts: dict[str, dict[str, Verdict]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # student -> why: 0 on every exercise
    review: dict[str, list] = field(default_factory=dict)  # student -> review.Finding list
    removed: dict[str, list[str]] = field(default_factory=dict)  # student -> what sanitize took
    up_to_date: list[str] = field(default_factory=list)  # graded before, unchanged since
    notes: list[str] = field(default_factory=list)  # the term applied: due dates, extensions
    late: dict[str, str] = field(default_factory=dict)  # student -> late-policy inputs' key
    stale_feedback: list[str] = field(default_factory=list)  # feedback removed: out of date
    skipped_cells: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # student -> CPU seconds
    reference_seconds: float = 0.0


def _gradebook(course_dir: Path):
    from nbgrader.api import Gradebook

    _venv_on_path()
    db = Path(course_dir).resolve() / "gradebook.db"
    return Gradebook(f"sqlite:///{db}?timeout=60", "transformer-block")


def _settings(course_dir: Path):
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(CONFIG.name, path=str(Path(course_dir).resolve())).load_config()
    return settings.CourseGrading(config=config)


def _submission_digest(course_dir: Path, lesson: Lesson, student: str) -> str:
    folder = Path(course_dir) / "submitted" / student / assignment_id(lesson)
    h = hashlib.sha256()
    for name in (lesson.notebook, "timestamp.txt"):
        path = folder / name
        if path.is_file() and not path.is_symlink():
            h.update(name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:24]


def _state(course_dir: Path, lesson: Lesson) -> Path:
    folder = grading_folder(Path(course_dir)) / "state" / assignment_id(lesson)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def _apply_term(
    course_dir: Path, lesson: Lesson, options, students: list[str]
) -> tuple[dict[str, str], list[str]]:
    """The settings' term into the gradebook, before grading, and each student's late-policy
    inputs (for the resume state): ``c.CourseGrading.due`` over nbgrader's own due date (and a
    due date this wrote, since removed from the settings, removed from the gradebook too);
    extensions exactly as the settings say (one removed there is removed from the gradebook);
    the time ``collect`` recorded over a ``timestamp.txt`` that disagrees. Notes on what it
    changed or cannot apply are returned too. Returns ({student: key}, notes)."""
    from nbgrader.api import MissingEntry
    from nbgrader.utils import parse_utc

    aid = assignment_id(lesson)
    course_dir = Path(course_dir)
    state = _state(course_dir, lesson)
    term_file = state / "term.json"
    term = json.loads(term_file.read_text(encoding="utf-8")) if term_file.exists() else {}
    notes: list[str] = []
    keys = {}
    with _gradebook(course_dir) as gb:
        if aid in options.due:
            due = parse_utc(options.due[aid])
            gb.update_or_create_assignment(aid, duedate=due)
            term["due_written"] = due.isoformat()
        else:
            written = term.pop("due_written", None)
            current = gb.update_or_create_assignment(aid).duedate
            if written and current is not None and current.isoformat() == written:
                gb.update_or_create_assignment(aid, duedate=None)
                notes.append(
                    f"the due date of {aid} is no longer in c.CourseGrading.due: removed from "
                    "the gradebook"
                )
        due = gb.find_assignment(aid).duedate
        policy = options.late.get(aid) or options.late.get("*") or {}
        for sid in students:
            delta = extension_delta(options.extensions, sid, aid)
            try:
                had = gb.find_submission(aid, sid).extension
            except MissingEntry:
                had = None
            if delta is not None and delta != had:
                gb.update_or_create_student(sid)
                gb.update_or_create_submission(aid, sid, extension=delta)
            elif delta is None and had is not None:
                gb.update_or_create_submission(aid, sid, extension=None)
                notes.append(f"{sid}: the extension of {aid} is no longer in the settings: removed")
            stamp = course_dir / "submitted" / sid / aid / "timestamp.txt"
            recorded = course_dir / ".grading" / "times" / aid / f"{sid}.json"
            notebook = course_dir / "submitted" / sid / aid / lesson.notebook
            record = json.loads(recorded.read_text(encoding="utf-8")) if recorded.is_file() else {}
            digest = (
                hashlib.sha256(notebook.read_bytes()).hexdigest()
                if notebook.is_file() and not notebook.is_symlink()
                else None
            )
            if record and record.get("notebooks", {}).get(lesson.notebook) != digest:
                notes.append(
                    f"{sid}: the time recorded at collect is for another notebook than the one "
                    "in submitted/ (collected since without the course's collect?): its "
                    "timestamp.txt is used as it is"
                )
            elif record:
                used = record["used"]
                said = stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else None
                if said != used:
                    if stamp.is_symlink():
                        stamp.unlink()
                    stamp.write_text(used, encoding="utf-8")
                    notes.append(
                        f"{sid}: timestamp.txt said {said or 'nothing'}, the time recorded at "
                        f"collect is {used}: that one is used"
                    )
            has_time = stamp.is_file() and not stamp.is_symlink()
            if due is not None and not has_time:
                notes.append(
                    f"{sid}: NO SUBMISSION TIME: the due date of {aid} cannot be applied "
                    f"(`coursework.py collect` records one; or write {stamp.relative_to(course_dir)})"
                )
            keys[sid] = json.dumps(
                [
                    due.isoformat() if due else None,
                    delta.total_seconds() if delta else 0,
                    policy,
                    stamp.read_text(encoding="utf-8").strip() if has_time else None,
                ],
                sort_keys=True,
            )
    term_file.write_text(json.dumps(term), encoding="utf-8")
    return keys, notes


def zero(course_dir: Path, lesson: Lesson, student: str, why: str) -> None:
    """0 on every exercise of ``lesson`` for ``student``, each with the reason (never what the
    kernel printed, never a score left from an earlier run)."""
    from nbgrader.api import MissingEntry

    aid, nid = assignment_id(lesson), notebook_id(lesson)
    source = Path(course_dir) / "source" / aid / lesson.notebook
    found = exercises(source)
    with _gradebook(course_dir) as gb:
        gb.update_or_create_student(student)
        try:
            gb.find_submission(aid, student)
        except MissingEntry:
            gb.add_submission(aid, student)
        for e in found:
            grade = gb.find_grade(e.check_id, nid, aid, student)
            grade.auto_score = 0.0
            grade.needs_manual_grade = grade.manual_score is not None
            comment = gb.find_comment(e.solution_id, nid, aid, student)
            comment.auto_comment = f"✗ not graded: {why}"
        gb.db.commit()


class Progress:
    """A one-line progress report on stderr: students done and failed, the time left."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.failed = total, 0, 0
        self.start = time.perf_counter()
        self.stream = stream if stream is not None else sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def update(self, student: str, ok: bool, note: str = "") -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        elapsed = time.perf_counter() - self.start
        left = elapsed / self.done * (self.total - self.done)
        bar = "#" * round(20 * self.done / max(self.total, 1))
        line = (
            f"[{bar:<20}] {self.done}/{self.total} graded, {self.failed} failed, "
            f"{_clock(elapsed)} elapsed, about {_clock(left)} left   {student} {note}".rstrip()
        )
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _worker(course_dir: Path, lesson: Lesson, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tools" / "grading" / "worker.py"),
            str(course_dir),
            assignment_id(lesson),
        ],  # fmt: skip
        cwd=course_dir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: stopped as a whole
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def autograde(
    lesson: Lesson,
    course_dir: Path = COURSE_DIR,
    student: str | None = None,
    jobs: int = 1,
    force: bool = False,
    progress=None,
) -> Graded:
    """Grade every submission of ``lesson`` (or ``student``'s), ``jobs`` at a time; see the module
    docstring. A student graded before, whose submission has not changed since (same notebook,
    same timestamp, same reference), is not graded again unless ``force`` or named."""
    course_dir = prepare_course_dir(course_dir)
    options = _settings(course_dir)
    secret_bytes, _ = settings.secret(options)
    aid = assignment_id(lesson)
    students = [student] if student else _students(course_dir, lesson)
    graded = Graded()
    if not students:
        return graded
    for sid in students:
        removed = sanitize(Path(course_dir) / "submitted" / sid / aid)
        if removed:
            graded.removed[sid] = removed
    late_keys, graded.notes = _apply_term(course_dir, lesson, options, students)
    start = time.process_time()
    cpu0 = _children_cpu()
    ref_key = _reference_key(course_dir, lesson, options, secret_bytes)
    try:
        references.reference(course_dir, aid, notebook_id(lesson), secret_bytes,
                             options.skip_demonstrations)  # fmt: skip
    except references.ReferenceError as e:
        raise SystemExit(f"coursework: {e}") from None
    graded.reference_seconds = time.process_time() - start + _children_cpu() - cpu0
    state = _state(course_dir, lesson)
    todo, refused = [], []
    for sid in students:
        digest = _submission_digest(course_dir, lesson, sid)
        late = hashlib.sha256(late_keys[sid].encode()).hexdigest()[:16]
        marker = state / f"{sid}.json"
        if not force and not student and marker.exists():
            saved = json.loads(marker.read_text(encoding="utf-8"))
            same = saved.get("submission") == digest and saved.get("reference") == ref_key
            if same and saved.get("late") == late:
                graded.up_to_date.append(sid)
                continue
            if same:
                graded.notes.append(
                    f"{sid}: the due date, extension or late policy changed since the last run: "
                    "graded again"
                )
        graded.late[sid] = late
        over = _over_limits(course_dir, lesson, sid)
        if over:  # never parsed nor run: 0 with the reason, and the next student
            _finish(course_dir, lesson, sid, digest, ref_key, graded,
                    {"success": False, "error": over})  # fmt: skip
            refused.append(sid)
            continue
        todo.append((sid, digest))
    bar = Progress(len(todo), progress) if todo else None
    env = {**os.environ, "COURSE_TOOLS": str(ROOT / "tools"), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("MPLBACKEND", None)
    _venv_on_path()
    env["PATH"] = os.environ["PATH"]
    queue = list(todo)
    workers: dict[subprocess.Popen, tuple[str, str] | None] = {}
    started: dict[subprocess.Popen, float] = {}
    # a student's whole run: the kernel's own wall limit, then nbgrader's work around it
    deadline = float(os.environ.get("GRADING_WALL_SECONDS", "1200")) + 300
    try:
        for _ in range(max(1, min(jobs, len(queue)))):
            workers[_worker(course_dir, lesson, env)] = None
        while workers:
            for proc in [p for p, job in workers.items() if job is None]:
                if queue:
                    job = queue.pop(0)
                    proc.stdin.write(job[0] + "\n")
                    proc.stdin.flush()
                    workers[proc] = job
                    started[proc] = time.monotonic()
                else:
                    proc.stdin.close()
                    proc.wait()
                    del workers[proc]
            busy = [p for p, job in workers.items() if job is not None]
            if not busy:
                continue
            ready, _, _ = select.select([p.stdout for p in busy], [], [], 5.0)
            for proc in busy:
                if proc.stdout not in ready:
                    if time.monotonic() - started[proc] > deadline:  # hung: stop it, zero, go on
                        sid, digest = workers.pop(proc)
                        _stop(proc)
                        why = f"grading this submission took longer than {deadline:.0f} s"
                        result = {"success": False, "error": why}
                        _finish(course_dir, lesson, sid, digest, ref_key, graded, result)
                        bar.update(sid, False, "NOT GRADED")
                        if queue:
                            workers[_worker(course_dir, lesson, env)] = None
                    continue
                sid, digest = workers[proc]
                line = proc.stdout.readline()
                if not line:  # the worker died on this student
                    why = f"the grading worker stopped while grading this submission (exit {proc.wait()})"
                    _finish(
                        course_dir,
                        lesson,
                        sid,
                        digest,
                        ref_key,
                        graded,
                        {"success": False, "error": why},
                    )
                    bar.update(sid, False, "NOT GRADED")
                    del workers[proc]
                    if queue:
                        workers[_worker(course_dir, lesson, env)] = None
                    continue
                result = json.loads(line)
                ok = _finish(course_dir, lesson, sid, digest, ref_key, graded, result)
                bar.update(sid, ok, _score_note(graded, sid))
                workers[proc] = None
    finally:
        for proc in workers:
            _stop(proc)
    graded.review = review_submissions(lesson, course_dir, [s for s, _ in todo] + refused)
    return graded


def _over_limits(course_dir: Path, lesson: Lesson, student: str) -> str | None:
    """Why a submission is over the grader's caps (tools/grading/limits.py), or None."""
    path = Path(course_dir) / "submitted" / student / assignment_id(lesson) / lesson.notebook
    if not path.is_file() or path.is_symlink():
        return None  # nbgrader says it has nothing to grade
    try:
        limits.check_file(path)
    except limits.OverLimit as e:
        return f"over the grader's limits: {e}"
    return None


def _children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def _reference_key(course_dir: Path, lesson: Lesson, options, secret_bytes: bytes) -> str:
    from grading.execute import seeds_for

    aid = assignment_id(lesson)
    source = Path(course_dir) / "source" / aid / lesson.notebook
    release = Path(course_dir) / "release" / aid / lesson.notebook
    seeds = seeds_for(nbformat.read(str(source), as_version=4), secret_bytes)
    return references.key(source, release, seeds, options.skip_demonstrations)


def _score_note(graded: Graded, sid: str) -> str:
    verdicts = graded.verdicts.get(sid)
    if not verdicts:
        return "NOT GRADED"
    return f"{sum(v.correct for v in verdicts.values())}/{len(verdicts)} exercises right"


def _finish(course_dir, lesson, sid, digest, ref_key, graded: Graded, result: dict) -> bool:
    """Read what the worker's nbgrader run left (the course's log of the run), zero a submission
    that could not be graded, and mark the student graded (for a resumed run)."""
    log = grading_folder(Path(course_dir)) / "log" / assignment_id(lesson) / f"{sid}.json"
    data = json.loads(log.read_text(encoding="utf-8")) if log.exists() else {}
    fresh = (
        log.exists() and log.stat().st_mtime >= time.time() - max(result.get("seconds", 0), 0) - 5
    )
    why = None
    if not result.get("success"):
        why = result.get("error") or "nbgrader could not grade this submission"
    elif not fresh:
        why = "nbgrader did not run the course's grader on it"
    elif data.get("failure"):
        why = data["failure"]
    if why:
        graded.failed[sid] = why
        zero(course_dir, lesson, sid, why)
    else:
        graded.verdicts[sid] = {
            x: Verdict(x, bool(ok), message) for x, (ok, message) in data["verdicts"].items()
        }
        graded.skipped_cells[sid] = data.get("skipped", [])
    graded.seconds[sid] = result.get("cpu", 0.0)
    marker = _state(course_dir, lesson) / f"{sid}.json"
    tmp = marker.with_suffix(".tmp")
    saved = {
        "submission": digest,
        "reference": ref_key,
        "late": graded.late.get(sid),
        "failed": why,
    }
    tmp.write_text(json.dumps(saved), encoding="utf-8")
    os.replace(tmp, marker)
    feedback = Path(course_dir) / "feedback" / sid / assignment_id(lesson)
    if feedback.is_dir() and not feedback.is_symlink():  # written from the grades just replaced
        shutil.rmtree(feedback)
        graded.stale_feedback.append(sid)
    return why is None


# ---------------------------------------------------------------------------------------------
# Review, scores, the LMS export
# ---------------------------------------------------------------------------------------------


def review_submissions(
    lesson: Lesson, course_dir: Path = COURSE_DIR, students=None
) -> dict[str, list]:
    """The review list of every submission of ``lesson`` (tools/grading/review.py); a submission
    the review cannot read gets one finding saying so (the others are still reviewed)."""
    course_dir = Path(course_dir).resolve()
    source = course_dir / "source" / assignment_id(lesson) / lesson.notebook
    found = {}
    for sid in students if students is not None else _students(course_dir, lesson):
        submitted = course_dir / "submitted" / sid / assignment_id(lesson) / lesson.notebook
        if not submitted.is_file() or submitted.is_symlink():
            continue
        try:
            found[sid] = review.review(submitted, source)
        except Exception as e:  # noqa: BLE001 - one unreadable submission stops nothing
            found[sid] = [
                review.Finding("notebook", 0, f"could not be reviewed ({type(e).__name__})", "")
            ]
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
    """The gradebook's scores: {student: {grade_id: (score, max_score)}} for a lesson. A
    manually graded answer the instructor has not graded yet scores ``None`` (pending), never 0:
    the instructor's manual score if given, else the automatic one (0 for an answer left as
    released)."""
    from nbgrader.api import MissingEntry

    result: dict[str, dict[str, tuple]] = {}
    with _gradebook(course_dir) as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(
                    notebook_id(lesson), assignment_id(lesson), student.id
                )
            except MissingEntry:
                continue
            result[student.id] = {g.name: (_score(g), float(g.max_score)) for g in nb.grades}
    return result


def _score(grade) -> float | None:
    if grade.manual_score is not None:
        return float(grade.manual_score)
    if grade.auto_score is not None:
        return float(grade.auto_score)
    return None  # waiting for the instructor (nbgrader: needs_manual_grade)


def _totals(grades: dict[str, tuple]) -> tuple[float, float, float]:
    """(points earned, points possible, points still to be graded by hand) of one student."""
    got = sum(s for s, _ in grades.values() if s is not None)
    most = sum(m for _, m in grades.values())
    pending = sum(m for s, m in grades.values() if s is None)
    return got, most, pending


def grade_by_hand(
    lesson: Lesson,
    student: str,
    grade_id: str,
    score: float,
    comment: str | None = None,
    course_dir: Path = COURSE_DIR,
) -> None:
    """The instructor's score (and comment) for a manually graded answer of one student: stored
    as nbgrader's manual score, which a later ``autograde`` keeps and the feedback shows."""
    source = Path(course_dir) / "source" / assignment_id(lesson) / lesson.notebook
    answers = {m.grade_id: m for m in manual_answers(source)}
    if grade_id not in answers:
        raise ValueError(
            f"grade_id must name an answer graded by hand in {assignment_id(lesson)} "
            f"({', '.join(answers) or 'it has none'}); got {grade_id!r}"
        )
    most = answers[grade_id].points
    if not isinstance(score, int | float) or not 0 <= score <= most:
        raise ValueError(f"score must be a number from 0 to {most:g} for {grade_id}; got {score!r}")
    with _gradebook(course_dir) as gb:
        nid, aid = notebook_id(lesson), assignment_id(lesson)
        grade = gb.find_grade(grade_id, nid, aid, student)
        grade.manual_score = float(score)
        grade.needs_manual_grade = False
        if comment is not None:
            gb.find_comment(grade_id, nid, aid, student).manual_comment = comment
        gb.db.commit()


def penalties(lesson: Lesson, course_dir: Path = COURSE_DIR) -> dict[str, float]:
    """Late-submission penalties (points) by student, as nbgrader stored them."""
    from nbgrader.api import MissingEntry

    out = {}
    with _gradebook(course_dir) as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(
                    notebook_id(lesson), assignment_id(lesson), student.id
                )
            except MissingEntry:
                continue
            out[student.id] = float(nb.late_submission_penalty or 0.0)
    return out


def summary(lesson: Lesson, course_dir: Path = COURSE_DIR) -> list[tuple[str, float, float, float]]:
    """Per exercise: (check cell, points, mean score, share of students with full marks)."""
    table = scores(lesson, course_dir)
    found = exercises(Path(course_dir) / "source" / assignment_id(lesson) / lesson.notebook)
    rows = []
    for e in found:
        got = [grades[e.check_id][0] for grades in table.values() if e.check_id in grades]
        got = [g for g in got if g is not None]
        mean = sum(got) / len(got) if got else 0.0
        full = sum(g >= e.points for g in got) / len(got) if got else 0.0
        rows.append((e.check_id, e.points, mean, full))
    return rows


#: The characters a spreadsheet reads as the start of a formula (OWASP, "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: one that starts like a formula gets a leading
    ``'`` (OWASP's CSV-injection guidance; the CSV quotes every cell too)."""
    text = str(text)
    return "'" + text if text.startswith(FORMULA_START) else text


def write_csv(lessons: list[Lesson], course_dir: Path, out, roster: dict | None = None) -> int:
    """One row per student, in the layout Canvas's gradebook import reads (``Student``, ``ID``,
    ``SIS User ID``, ``SIS Login ID``, ``Section``, a ``Points Possible`` row first); per lesson a
    column per exercise and per answer graded by hand (empty until graded), the late penalty
    (negative: the columns add up to the total) and the total, the column to import.

    ``roster`` (:func:`read_roster`) fills ``ID`` with the LMS's user id and ``SIS User ID`` with
    its SIS id; without one the SIS columns hold the course's student ids, which the LMS matches
    only if they are its own. Every cell is quoted, and text that starts like a formula is
    neutralised (:func:`spreadsheet_text`). Returns the number of students."""
    import csv

    roster = roster or {}
    names, ids, columns, maxima = {}, [], [], []
    per_lesson = []
    for lesson in lessons:
        table, late = scores(lesson, course_dir), penalties(lesson, course_dir)
        source = Path(course_dir) / "source" / assignment_id(lesson) / lesson.notebook
        found = [(e.check_id, e.solution_id, e.points) for e in exercises(source)]
        found += [(m.grade_id, m.grade_id, m.points) for m in manual_answers(source)]
        aid = assignment_id(lesson)
        columns += [f"{aid} {label} ({points:g})" for _, label, points in found]
        columns += [f"{aid} late penalty", f"{aid} total"]
        maxima += [points for *_, points in found] + [0.0, sum(points for *_, points in found)]
        per_lesson.append((found, table, late))
        ids += [s for s in table if s not in ids]
    with _gradebook(course_dir) as gb:
        for student in gb.students:
            full = " ".join(x for x in (student.last_name, student.first_name) if x)
            names[student.id] = (
                ", ".join(x for x in (student.last_name, student.first_name) if x)
                if full
                else student.id
            )
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *columns])
    writer.writerow(["Points Possible", "", "", "", "", *(f"{m:g}" for m in maxima)])
    for sid in sorted(ids):
        row = []
        for found, table, late in per_lesson:
            grades = table.get(sid, {})
            got = [grades.get(gid, (0.0, points))[0] for gid, _, points in found]
            earned = sum(g for g in got if g is not None)
            taken = min(late.get(sid, 0.0), earned)  # never below zero in total
            # an answer waiting to be graded by hand: an empty cell (Canvas: not graded yet)
            row += ["" if g is None else f"{g:g}" for g in got]
            row += [f"{-taken:g}" if taken else "0", f"{earned - taken:g}"]
        known = roster.get(sid, {})
        name = known.get("name") or names.get(sid, sid)
        sis = known.get("sis_id") or sid
        people = [name, known.get("lms_id", ""), sis, sid, ""]
        writer.writerow([*(spreadsheet_text(x) for x in people), *row])
    return len(ids)


def export_note(lessons: list[Lesson], roster: dict | None, students: int) -> str:
    """What the instructor imports from the CSV, and how the LMS matches its rows."""
    totals = ", ".join(f"'{assignment_id(x)} total'" for x in lessons)
    mapped = sum(bool(row.get("sis_id") or row.get("lms_id")) for row in (roster or {}).values())
    if roster:
        ids = (
            f"ID and SIS User ID come from the roster ({mapped} of {len(roster)} students have "
            "an LMS id there); a student without one keeps the course's id in SIS User ID"
        )
    else:
        ids = (
            "no --roster: SIS User ID and SIS Login ID are the course's student ids, which the "
            "LMS matches only if they are its own SIS ids (pass --roster student,lms_id,sis_id)"
        )
    return (
        f"import the column {totals} (after the late penalty); the exercise columns and the "
        f"late penalty add up to it, for reading (do not import them). Rows are matched by "
        f"ID, SIS User ID or SIS Login ID: {ids}. {students} students."
    )


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
    p = sub.add_parser("secret", help="write a new secret for the hidden cases' inputs")
    p.add_argument("--file", type=Path, default=settings.DEFAULT_SECRET)
    p = sub.add_parser(
        "collect", help="place an LMS download's notebooks into submitted/, with their times"
    )
    p.add_argument("assignment")
    p.add_argument("folder", type=Path)
    p.add_argument("--roster", type=Path, help="CSV: student,lms_id,sis_id,name")
    p.add_argument("--times", type=Path, help="CSV: id,time (the LMS's submission times)")
    p.add_argument("--timezone", help="zone of times written without one (Europe/Paris)")
    p = sub.add_parser("autograde", help="autograde the submissions of an assignment")
    p.add_argument("assignment")
    p.add_argument("--student", help="grade this student only (again, even if graded before)")
    p.add_argument("--jobs", type=int, default=1, help="students graded at once (default 1)")
    p.add_argument("--force", action="store_true", help="grade everyone again")
    p = sub.add_parser("scores", help="the gradebook's scores of assignments")
    p.add_argument("assignment", nargs="+")
    p.add_argument("--csv", type=Path, help="write them as a CSV an LMS imports (Canvas)")
    p.add_argument("--roster", type=Path, help="CSV: student,lms_id,sis_id,name (LMS ids)")
    p = sub.add_parser("grade", help="the instructor's score for an answer graded by hand")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("grade_id")
    p.add_argument("score", type=float)
    p.add_argument("--comment")
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
    elif args.command == "secret":
        path = settings.write_secret(args.file)
        print(f"secret written to {path} (mode 600); keep it out of the repository")
    elif args.command == "collect":
        lesson = _lesson(args.assignment)
        try:
            roster = read_roster(args.roster) if args.roster else None
            times = read_times(args.times, args.timezone) if args.times else None
        except (ValueError, OSError) as e:
            raise SystemExit(f"coursework: {e}") from None
        prepare_course_dir(course_dir)
        done = collect(lesson, args.folder, course_dir, roster, times)
        for sid, (when, source) in sorted(done.times.items()):
            note = f" ({done.notes[sid]})" if sid in done.notes else ""
            print(f"{sid}: submitted {_utc_text(when)} (from {source}){note}")
        for file, why in done.refused:
            print(f"{file}: NOT COLLECTED: {why}", file=sys.stderr)
        print(f"{len(done.placed)} collected, {len(done.refused)} refused", file=sys.stderr)
        if done.refused:
            return 1
    elif args.command == "autograde":
        lesson = _lesson(args.assignment)
        prepare_course_dir(course_dir)
        _, where = settings.secret(_settings(course_dir))
        if where == "public default":
            print(
                "coursework: no secret set, grading with the public hidden cases "
                "(`coursework.py secret` writes one)",
                file=sys.stderr,
            )
        else:  # where it is, never what it holds
            print(f"coursework: grading with the secret in {where}", file=sys.stderr)
        graded = autograde(lesson, course_dir, args.student, jobs=args.jobs, force=args.force)
        for sid, removed in sorted(graded.removed.items()):
            print(f"{sid}: removed from the submission: {'; '.join(removed)}", file=sys.stderr)
        for sid, why in sorted(graded.failed.items()):
            print(f"{sid}: NOT GRADED (0 points): {why}", file=sys.stderr)
        for note in graded.notes:
            print(note, file=sys.stderr)
        if graded.stale_feedback:
            print(
                f"feedback of {', '.join(sorted(graded.stale_feedback))} was written before this "
                f"grading: removed; `nbgrader generate_feedback {args.assignment}` writes it "
                f"again (then `nbgrader release_feedback {args.assignment}`)",
                file=sys.stderr,
            )
        if graded.up_to_date:
            print(
                f"{len(graded.up_to_date)} submission(s) graded before and unchanged since: not "
                "graded again (--force grades them again)",
                file=sys.stderr,
            )
        _print_review(graded.review)
        args.command, args.assignment, args.csv = "scores", [args.assignment], None
    elif args.command == "grade":
        lesson = _lesson(args.assignment)
        try:
            grade_by_hand(lesson, args.student, args.grade_id, args.score, args.comment, course_dir)
        except (ValueError, LookupError) as e:
            raise SystemExit(f"coursework: {e}") from None
        args.command, args.assignment, args.csv = "scores", [args.assignment], None
    elif args.command == "review":
        _print_review(review_submissions(_lesson(args.assignment), course_dir))
    if args.command == "scores":
        lessons = [_lesson(x) for x in args.assignment]
        if args.csv:
            try:
                roster = read_roster(args.roster) if getattr(args, "roster", None) else None
            except (ValueError, OSError) as e:
                raise SystemExit(f"coursework: {e}") from None
            with open(args.csv, "w", newline="", encoding="utf-8") as f:
                n = write_csv(lessons, course_dir, f, roster)
            print(f"{args.csv}: {n} students, {', '.join(assignment_id(x) for x in lessons)}")
            print(export_note(lessons, roster, n))
            return 0
        for lesson in lessons:
            late = penalties(lesson, course_dir)
            for student, grades in sorted(scores(lesson, course_dir).items()):
                got, most, pending = _totals(grades)
                lost = [k for k, (s, m) in grades.items() if s is not None and s < m]
                waiting = [k for k, (s, _) in grades.items() if s is None]
                penalty = late.get(student, 0.0)
                shown = f"{max(got - penalty, 0):g}/{most:g}"
                if pending:
                    shown = (
                        f"{max(got - penalty, 0):g}/{most - pending:g} autograded, "
                        f"{pending:g} points to grade by hand ({', '.join(waiting)})"
                    )
                if penalty:
                    shown += f" (late: -{penalty:g} of {got:g})"
                print(f"{student}: {shown}" + (f" (lost: {', '.join(lost)})" if lost else ""))
            rows = summary(lesson, course_dir)
            if rows:
                print(f"{assignment_id(lesson)} per exercise: mean score, share with full marks")
                for check, points, mean, full in rows:
                    print(f"  {check}: {mean:.2f}/{points:g}, {full:.0%} full marks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
