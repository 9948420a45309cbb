"""Grading by hand: the instructor's score and comment for an answer nbgrader marks "manually
graded" (``coursework.py grade``; docs/INSTRUCTORS.md, "Answers graded by hand")."""

from __future__ import annotations

from pathlib import Path

from helpers.course import Lesson

from .course import COURSE_DIR, _gradebook, assignment_id, manual_answers, notebook_id


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
