"""The nbgrader preprocessors the course puts in ``autograde``'s pipeline after the confined run.

* :class:`SaveVerdicts` replaces nbgrader's ``SaveAutoGrades``: a check cell's score is its
  exercise's verdict (the hidden records judged against the instructor's, :mod:`verdicts`), never
  what the kernel printed; the verdict is the solution cell's comment (the feedback shows it), and
  the run is logged for ``coursework.py`` (cells skipped, flags, the channel's problems). A
  submission whose run failed gets 0 on every exercise, with the reason.
* :class:`LatePenalty` is nbgrader's late-submission plugin with the course's policy
  (:mod:`settings`: a percentage per day, a cap, a grace period, per-student extensions).
"""

from __future__ import annotations

import json
import math
import os
from datetime import timedelta
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

from nbgrader import utils

from . import reference as references
from . import settings
from .execute import course_paths, grading_folder, solution_ids
from .verdicts import Verdict, judge_all


def pairs(nb) -> dict[str, str]:
    """{check cell grade_id: the solution cell before it}: each exercise's two cells."""
    found, solution = {}, None
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        if meta.get("solution") and not meta.get("grade"):
            solution = meta.get("grade_id")
        elif meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            found[meta["grade_id"]] = solution
    return found


class SaveVerdicts(NbGraderPreprocessor):
    """Scores from verdicts (see the module docstring)."""

    def preprocess(self, nb, resources):
        meta = resources["nbgrader"]
        root, source_path, _ = course_paths(self.config, resources)
        grading = resources.get("grading", {})
        outcome = grading.get("outcome")
        source = grading.get("source")
        verdicts: dict[str, Verdict] = {}
        failure = None
        try:
            if outcome is None or source is None:
                raise RuntimeError("the notebook was not run by the course's confined executor")
            options = settings.CourseGrading(config=self.config)
            secret, _ = settings.secret(options)
            ref = references.reference(
                root, meta["assignment"], meta["notebook"], secret, options.skip_demonstrations
            )
            verdicts = judge_all(solution_ids(source), ref, outcome.records)
            if outcome.problems and not any(v.correct for v in verdicts.values()):
                failure = outcome.problems[0]
        except BaseException as e:  # noqa: BLE001 - a zero with a reason, never a crash
            if isinstance(e, KeyboardInterrupt):
                raise
            failure = f"{type(e).__name__}: {e}"[:400]
        checks = pairs(source) if source is not None else pairs(nb)
        with Gradebook(meta["db_url"]) as gb:
            for cell in nb.cells:
                if not utils.is_grade(cell):
                    continue
                grade_id = cell.metadata.nbgrader["grade_id"]
                grade = gb.find_grade(
                    grade_id, meta["notebook"], meta["assignment"], meta["student"]
                )
                if utils.is_solution(cell):
                    # a manually graded answer (a written explanation): nbgrader's own rule, read
                    # from the notebook, not the kernel: 0 if left as released, else no automatic
                    # score and waiting for the instructor; a manual score given earlier stays
                    grade.auto_score, _ = utils.determine_grade(cell)
                    grade.needs_manual_grade = (
                        grade.manual_score is not None or grade.auto_score is None
                    )
                    continue
                exercise = checks.get(grade_id)
                verdict = verdicts.get(exercise) if failure is None else None
                if verdict is None:
                    why = failure or f"no exercise pairs with {grade_id}"
                    verdict = Verdict(exercise or grade_id, False, f"not graded: {why}")
                    verdicts.setdefault(verdict.exercise, verdict)
                grade.auto_score = float(grade.max_score) if verdict.correct else 0.0
                grade.needs_manual_grade = grade.manual_score is not None
                if exercise:
                    try:
                        comment = gb.find_comment(
                            exercise, meta["notebook"], meta["assignment"], meta["student"]
                        )
                        comment.auto_comment = ("✓ " if verdict.correct else "✗ ") + verdict.message
                    except Exception:  # noqa: BLE001 - a solution cell the gradebook lacks
                        pass
            for cell in nb.cells:  # solution cells without a check cell: nbgrader's own comment
                if utils.is_solution(cell) and not utils.is_grade(cell):
                    gid = cell.metadata.nbgrader["grade_id"]
                    if gid not in verdicts and gid not in checks.values():
                        comment = gb.find_comment(
                            gid, meta["notebook"], meta["assignment"], meta["student"]
                        )
                        comment.auto_comment = None
            gb.db.commit()
        _log(root, meta, verdicts, outcome, failure)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        return cell, resources


def _log(root: Path, meta: dict, verdicts: dict, outcome, failure) -> None:
    folder = grading_folder(root) / "log" / meta["assignment"]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {
        "student": meta["student"],
        "notebook": meta["notebook"],
        "verdicts": {x: [v.correct, v.message] for x, v in verdicts.items()},
        "failure": failure,
        "skipped": outcome.skipped if outcome else [],
        "problems": (list(outcome.problems) + list(outcome.records.problems)) if outcome else [],
        "flags": [f.get("reason") for f in outcome.records.flags] if outcome else [],
        "seconds": round(outcome.seconds, 2) if outcome else None,
        "sandbox": getattr(outcome, "sandbox", None),  # which limits held: a share, or per process
    }
    path = folder / f"{meta['student']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


class LatePenalty(LateSubmissionPlugin):
    """The course's late policy (``c.CourseGrading.late``), applied to the points earned:
    ``percent_per_day`` of them per started day late (after ``grace_minutes``), at most
    ``cap_percent``; ``zero: true`` takes them all. Extensions (``c.CourseGrading.extensions``)
    are written to the gradebook before grading, so nbgrader's lateness already counts them."""

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        options = settings.CourseGrading(config=self.config)
        assignment = getattr(self.parent, "assignment_id", None)
        return penalty(options.late, assignment, score, total_seconds_late)


def penalty(policies: dict, assignment: str | None, score: float, seconds_late: float) -> float:
    """The points taken for a submission ``seconds_late`` late under the course's policy."""
    policy = policies.get(assignment) or policies.get("*") or {}
    if seconds_late <= 0 or not policy:
        return 0.0
    if seconds_late <= float(policy.get("grace_minutes", 0)) * 60:
        return 0.0
    if policy.get("zero"):
        return float(score)
    days = math.ceil(seconds_late / 86400)
    percent = min(
        float(policy.get("percent_per_day", 0)) * days, float(policy.get("cap_percent", 100))
    )
    return round(float(score) * percent / 100, 6)


def extension_delta(extensions: dict, student: str, assignment: str) -> timedelta | None:
    """A student's extension for an assignment, from ``c.CourseGrading.extensions``."""
    granted = (extensions.get(student) or {}).get(assignment)
    if not granted:
        return None
    return timedelta(days=float(granted.get("days", 0)), hours=float(granted.get("hours", 0)))
