"""Coursework with nbgrader, the command line: the student release of every lesson, collecting and autograding.

The committed notebooks under ``notebooks/`` are the instructor versions (complete, executed,
solutions and hidden tests included: never hand them out). This tool drives nbgrader in the
course folder ``nbgrader/`` (see docs/INSTRUCTORS.md); everything it writes there is generated
and ignored by git. It runs from the repository's root, as a module of the ``tools`` package:

    python -m tools.coursework release                 # every lesson whose notebook exists
    python -m tools.coursework release --lessons 4 5   # some lessons only
    python -m tools.coursework list                    # exercises and points of each lesson
    python -m tools.coursework secret                  # the instructor's secret (hidden inputs)
    python -m tools.coursework collect lesson04 DOWNLOADS/   # DOWNLOADS/<student>.ipynb files
    python -m tools.coursework collect lesson04 DOWNLOADS/ --roster roster.csv --times times.csv
    python -m tools.coursework autograde lesson04 --jobs 4   # every submission, confined
    python -m tools.coursework autograde lesson04 --student alice   # one student again
    python -m tools.coursework scores lesson04         # one line per student, and per exercise
    python -m tools.coursework scores lesson04 lesson05 --csv grades.csv --roster roster.csv
    python -m tools.coursework review lesson04         # cells that reach for the grading machinery
    python -m tools.coursework grade lesson10 alice l10_ex4_explain 2.5 --comment "..."  # by hand

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

This file is the command line alone: argument parsing and one small function per subcommand (as
nbgrader's apps are). The work is done in ``tools/grading/``: ``course.py`` (the course folder,
its exercises, nbgrader, the gradebook), ``release.py``, ``collect.py``, ``pool.py`` (the worker
pool, beside ``worker.py``), ``resume.py`` (what a resumed run grades again), ``export.py``
(scores, late penalties, the CSV), ``manual.py`` (grading by hand) and ``review.py``.
"""

from __future__ import annotations

if not __package__:  # run as a file: `tools` is not a package then, and nothing below imports
    raise SystemExit(
        "coursework: run it from the repository's root as a module: python -m tools.coursework ..."
    )

import argparse
import re
import sys
from pathlib import Path

from helpers.course import NOTEBOOKS as COURSE_NOTEBOOKS
from helpers.course import Lesson

from .grading import reference as references
from .grading import settings
from .grading.collect import (
    Collected,
    _utc_text,
    check_student_id,
    collect,
    read_roster,
    read_times,
    sanitize,
    submit,
)
from .grading.course import (
    CONFIG,
    COURSE_DIR,
    NOTEBOOKS,
    ROOT,
    Exercise,
    ManualAnswer,
    _gradebook,
    _settings,
    assignment_id,
    exercises,
    lessons_present,
    manual_answers,
    nbgrader,
    notebook_id,
)
from .grading.export import (
    _totals,
    export_note,
    penalties,
    scores,
    spreadsheet_text,
    summary,
    write_csv,
)
from .grading.manual import grade_by_hand
from .grading.pool import Graded, _worker, autograde, zero
from .grading.release import prepare_course_dir, release, student_notebook
from .grading.review import review_submissions

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
    "CONFIG",
    "main",
]
# Reached through this module by the tests and benchmarks/run.py, as before the split.
_INTERNALS = (references, _gradebook, _worker)


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


def _print_review(found: dict[str, list]) -> None:
    flagged = {s: f for s, f in found.items() if f}
    if not flagged:
        print("review: no cell reaches for the grading machinery")
        return
    print("review (for a person to read; not a grade):")
    for sid, findings in sorted(flagged.items()):
        for f in findings:
            print(f"  {sid}  {f.cell} line {f.line}: {f.reason}    {f.code}")


def parser() -> argparse.ArgumentParser:
    """The command line: the course folder, then one subcommand with its arguments."""
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
    return parser


def release_command(args, course_dir: Path) -> int:
    """``release``: the student versions (tools/grading/release.py)."""
    lessons = [_lesson(x) for x in args.lessons] if args.lessons else lessons_present()
    if not lessons:
        raise SystemExit("coursework: no lesson notebook exists yet under notebooks/")
    for name, path in release(lessons, course_dir, db=not args.no_db).items():
        print(f"{name}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


def list_command(args, course_dir: Path) -> int:
    """``list``: each lesson's exercises and points."""
    for lesson in lessons_present():
        found = exercises(NOTEBOOKS / lesson.notebook)
        total = sum(e.points for e in found)
        print(
            f"{assignment_id(lesson)} {lesson.notebook}: {len(found)} exercises, {total:g} points"
        )
        for e in found:
            print(f"    {e.check_id}: {e.points:g}")
    return 0


def secret_command(args, course_dir: Path) -> int:
    """``secret``: a new secret for the hidden cases' inputs (tools/grading/settings.py)."""
    path = settings.write_secret(args.file)
    print(f"secret written to {path} (mode 600); keep it out of the repository")
    return 0


def collect_command(args, course_dir: Path) -> int:
    """``collect``: an LMS download into ``submitted/`` (tools/grading/collect.py)."""
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
    return 1 if done.refused else 0


def autograde_command(args, course_dir: Path) -> int:
    """``autograde``: every submission, confined, by the worker pool (tools/grading/pool.py);
    then the scores."""
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
    return print_scores([lesson], course_dir)


def grade_command(args, course_dir: Path) -> int:
    """``grade``: the instructor's score for an answer graded by hand (tools/grading/manual.py);
    then the scores."""
    lesson = _lesson(args.assignment)
    try:
        grade_by_hand(lesson, args.student, args.grade_id, args.score, args.comment, course_dir)
    except (ValueError, LookupError) as e:
        raise SystemExit(f"coursework: {e}") from None
    return print_scores([lesson], course_dir)


def review_command(args, course_dir: Path) -> int:
    """``review``: the cells that reach for the grading machinery (tools/grading/review.py)."""
    _print_review(review_submissions(_lesson(args.assignment), course_dir))
    return 0


def scores_command(args, course_dir: Path) -> int:
    """``scores``: the gradebook's scores, or with ``--csv`` the LMS's CSV
    (tools/grading/export.py)."""
    lessons = [_lesson(x) for x in args.assignment]
    if not args.csv:
        return print_scores(lessons, course_dir)
    try:
        roster = read_roster(args.roster) if args.roster else None
    except (ValueError, OSError) as e:
        raise SystemExit(f"coursework: {e}") from None
    with open(args.csv, "w", newline="", encoding="utf-8") as f:
        n = write_csv(lessons, course_dir, f, roster)
    print(f"{args.csv}: {n} students, {', '.join(assignment_id(x) for x in lessons)}")
    print(export_note(lessons, roster, n))
    return 0


def print_scores(lessons: list[Lesson], course_dir: Path) -> int:
    """One line per student (late penalty and pending answers said), then per exercise."""
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


COMMANDS = {
    "release": release_command,
    "list": list_command,
    "secret": secret_command,
    "collect": collect_command,
    "autograde": autograde_command,
    "scores": scores_command,
    "grade": grade_command,
    "review": review_command,
}


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run its subcommand; the exit status."""
    args = parser().parse_args(argv)
    return COMMANDS[args.command](args, args.course_dir.resolve())


if __name__ == "__main__":
    sys.exit(main())
