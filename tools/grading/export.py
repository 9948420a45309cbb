"""Scores, the late policy's penalties and the CSV an LMS imports (Canvas's gradebook layout),
read from the gradebook (``coursework.py scores``; docs/INSTRUCTORS.md, "Scores and the LMS")."""

from __future__ import annotations

from pathlib import Path

from helpers.course import Lesson

from .course import (
    COURSE_DIR,
    _gradebook,
    assignment_id,
    exercises,
    manual_answers,
    notebook_id,
)


def scores(lesson: Lesson, course_dir: Path = COURSE_DIR) -> dict[str, dict[str, tuple]]:
    """The gradebook's scores: {student: {grade_id: (score, max_score)}} for a lesson. A
    manually graded answer the instructor has not graded yet scores ``None`` (pending), never 0:
    the instructor's manual score if given, else the automatic one (0 for an answer left as
    released)."""
    return _per_student(
        lesson, course_dir, lambda nb: {g.name: (_score(g), float(g.max_score)) for g in nb.grades}
    )


def _per_student(lesson: Lesson, course_dir: Path, read) -> dict:
    """{student: ``read``(their submitted notebook of ``lesson`` in the gradebook)}, for every
    student who has one."""
    from nbgrader.api import MissingEntry

    result = {}
    with _gradebook(course_dir) as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(
                    notebook_id(lesson), assignment_id(lesson), student.id
                )
            except MissingEntry:
                continue
            result[student.id] = read(nb)
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


def penalties(lesson: Lesson, course_dir: Path = COURSE_DIR) -> dict[str, float]:
    """Late-submission penalties (points) by student, as nbgrader stored them."""
    return _per_student(lesson, course_dir, lambda nb: float(nb.late_submission_penalty or 0.0))


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
