"""Collect: an LMS download's notebooks placed into ``submitted/`` with their submission times
(nbgrader's ZipCollect, for Canvas's and Moodle's names), and what the unconfined side accepts
from a student's folder (``coursework.py collect``; docs/INSTRUCTORS.md, step 5)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nbformat

from helpers.course import Lesson

from .course import COURSE_DIR, assignment_id
from .execute import grading_folder


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
