"""Resume state of an autograde run: what decides whether a student is graded again (the
submission's digest, the reference's key, the late-policy inputs), and the term (due dates,
extensions, collected times) written into the gradebook before grading
(``coursework.py autograde``; docs/INSTRUCTORS.md, "Late submissions, extensions, regrades")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat

from helpers.course import Lesson

from . import reference as references
from .course import _gradebook, assignment_id
from .execute import grading_folder, seeds_for
from .saveverdicts import extension_delta


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


def _reference_key(course_dir: Path, lesson: Lesson, options, secret_bytes: bytes) -> str:
    aid = assignment_id(lesson)
    source = Path(course_dir) / "source" / aid / lesson.notebook
    release = Path(course_dir) / "release" / aid / lesson.notebook
    seeds = seeds_for(nbformat.read(str(source), as_version=4), secret_bytes)
    return references.key(source, release, seeds, options.skip_demonstrations)
