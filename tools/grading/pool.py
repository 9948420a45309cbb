"""The worker pool of ``coursework.py autograde``: N grading workers (:mod:`worker`, one
process each, nbgrader's autograde in each), a progress line, a resumed run grading only what
changed (:mod:`resume`), a submission that cannot be graded scored 0 with the reason."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers.course import Lesson

from . import limits, settings
from . import reference as references
from .collect import sanitize
from .course import (
    COURSE_DIR,
    ROOT,
    _gradebook,
    _settings,
    _students,
    _venv_on_path,
    assignment_id,
    exercises,
    notebook_id,
)
from .execute import grading_folder
from .release import prepare_course_dir
from .resume import _apply_term, _reference_key, _state, _submission_digest
from .review import review_submissions
from .verdicts import Verdict


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
    # started from the repository's root, where ``-m`` finds the ``tools`` package; the worker
    # then works in the course folder
    return subprocess.Popen(
        [sys.executable, "-m", "tools.grading.worker", str(course_dir), assignment_id(lesson)],
        cwd=ROOT,
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
