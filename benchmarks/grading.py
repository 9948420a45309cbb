"""The ``grading`` section: per lesson, a synthetic class (the instructor's solution, every
exercise answered wrong, the blank release) graded through the real pipeline."""

from __future__ import annotations

import os
import re
import statistics
import textwrap
import time
from pathlib import Path

from benchmarks.common import ROOT, TARGETS, ok


def wrong_answer(source: str) -> str:
    """A solution cell's source with a subtly wrong answer: the right result, 1% too large.

    The body between the solution markers is kept in an inner function; the returned value is
    scaled by 1.01 (a tensor or a float), an integer gets 1 added, a bool is negated.
    """
    lines = source.splitlines()
    begin = next(i for i, line in enumerate(lines) if "### BEGIN SOLUTION" in line)
    end = next(i for i, line in enumerate(lines) if "### END SOLUTION" in line)
    indent = re.match(r"\s*", lines[begin]).group(0)
    body = textwrap.dedent("\n".join(lines[begin + 1 : end]))
    wrapped = [
        f"{indent}def _right_answer():",
        textwrap.indent(body, indent + "    "),
        f"{indent}_answer = _right_answer()",
        f"{indent}if isinstance(_answer, bool):",
        f"{indent}    return not _answer",
        f"{indent}if isinstance(_answer, int):",
        f"{indent}    return _answer + 1",
        f"{indent}return _answer * 1.01",
    ]
    return "\n".join(lines[: begin + 1] + wrapped + lines[end:])


#: The synthetic class graded per lesson: the instructor's solution, every exercise answered
#: wrong (:func:`wrong_answer`: the right result 1% off), and the blank release.
GRADING_CLASS = ("solution", "wrong", "blank")
CLASS_SIZE = 300


def _grading_class(lesson, course_dir: Path) -> dict:
    import copy

    import nbformat

    from tools import coursework as cw

    instructor = nbformat.read(ROOT / "notebooks" / lesson.notebook, as_version=4)
    wrong = copy.deepcopy(instructor)
    for ex in cw.exercises(instructor):
        cell = wrong.cells[ex.solution_index]
        cell.source = wrong_answer(cell.source)
    blank = nbformat.read(cw.student_notebook(lesson, course_dir), as_version=4)
    return {"solution": instructor, "wrong": wrong, "blank": blank}


class TreeCPU:
    """CPU seconds (user + system) of every process descending from this one, sampled from /proc
    every ``interval`` s while running. Needed because the confined kernel is never waited for by
    a process that records it (RUSAGE_CHILDREN of a grading run misses it: measured, lesson 7 run
    whole counted 1.6 s). Each process counts its own user + system time (not its children's:
    they are sampled themselves); its last sample is its figure, so up to ``interval`` s of a
    process's CPU after its last sample, and processes shorter than that, are lost."""

    def __init__(self, interval: float = 0.1):
        import threading

        self.interval, self.seen, self.stop = interval, {}, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self):
        ticks, parents, cpu = os.sysconf("SC_CLK_TCK"), {}, {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                start = fields[19]
            except (OSError, IndexError):
                continue
            parents[entry.name] = fields[1]
            cpu[(entry.name, start)] = (
                sum(int(fields[k]) for k in (11, 12)) / ticks,  # its own, not its children's
                entry.name,
            )
        me = str(os.getpid())
        for (pid, start), (seconds, _) in cpu.items():
            p = parents.get(pid)
            while p is not None and p != me and p != "0":
                p = parents.get(p)
            if p == me:
                self.seen[(pid, start)] = seconds

    def _loop(self):
        while not self.stop.wait(self.interval):
            self._sample()

    def __enter__(self):
        self.own = time.process_time()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.seconds = sum(self.seen.values()) + time.process_time() - self.own


def bench_grading(lesson, skip: bool, jobs: int) -> dict:
    """Release ``lesson`` into a fresh course folder, submit the synthetic class and grade it with
    ``coursework.py autograde --jobs`` (the real pipeline: nbgrader, the confined kernel, the
    verdicts), demonstration cells skipped or not: CPU per student (the worker's nbgrader and
    kernel, user + system), the reference run's CPU, wall time, which cells ran."""
    import shutil
    import tempfile

    from tools import coursework as cw
    from tools.grading import plan as planner
    from tools.grading import reference as references
    from tools.grading import release  # prepare_course_dir copies its CONFIG

    scratch = Path(tempfile.mkdtemp(prefix="grading-bench-"))
    try:
        # the course's configuration with skipping set, copied into the course folder by
        # coursework (which writes its own CONFIG there)
        (scratch / "config").mkdir()
        config = scratch / "config" / cw.CONFIG.name
        config.write_text(
            cw.CONFIG.read_text(encoding="utf-8")
            + f"\nc.CourseGrading.skip_demonstrations = {skip}\n",
            encoding="utf-8",
        )
        saved, release.CONFIG = release.CONFIG, config
        try:
            course = scratch / "course"
            cw.release([lesson], course)
            students = _grading_class(lesson, course)
            for name, nb in students.items():
                cw.submit(lesson, name, nb, course)
            plan = planner.plan(students["solution"], students["blank"], enabled=skip)
            secret, _ = cw.settings.secret(cw._settings(course))
            with TreeCPU() as reference:  # the instructor's run, once per lesson (then cached)
                references.reference(course, cw.assignment_id(lesson), cw.notebook_id(lesson),
                                     secret, skip)  # fmt: skip
            load_before = os.getloadavg()[0]
            start = time.perf_counter()
            with TreeCPU() as tree:
                graded = cw.autograde(lesson, course, jobs=jobs, progress=open(os.devnull, "w"))
            seconds = time.perf_counter() - start
            workers = min(jobs, len(students))
            with TreeCPU() as one_worker:  # a worker's one-time start, graded nobody
                worker = cw._worker(course, lesson, dict(os.environ))  # autograde's own command
                worker.communicate("")  # no student: it starts, reads the end of its input, exits
                if worker.returncode != 0:
                    raise RuntimeError(f"a grading worker failed to start ({worker.returncode})")
            load = max(load_before, os.getloadavg()[0])
        finally:
            release.CONFIG = saved
        right = {
            sid: sum(v.correct for v in verdicts.values())
            for sid, verdicts in graded.verdicts.items()
        }
        return {
            "lesson": lesson.notebook,
            "skip": skip,
            "jobs": jobs,
            "students": list(students),
            # every process of the grading run (workers, nbgrader, kernels), shared equally
            "cpu_s": {sid: tree.seconds / len(students) for sid in students},
            # the same without the workers' one-time start (nbgrader, torch): what one more
            # student costs, the figure a class of 300 is made of
            "marginal_cpu_s": max(0.0, tree.seconds - workers * one_worker.seconds) / len(students),
            "worker_start_cpu_s": one_worker.seconds,
            "workers": workers,
            # what the workers counted per student (RUSAGE: the kernels missing)
            "worker_rusage_cpu_s": {sid: graded.seconds.get(sid) for sid in students},
            "reference_cpu_s": reference.seconds,
            "seconds": seconds,
            "load": load,
            "failed": graded.failed,
            "right": right,
            "exercises": len(cw.exercises(students["solution"])),
            "cells_run": sorted(plan.run),
            "cells_skipped": plan.skipped,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_grading(args) -> dict:
    from helpers.course import NOTEBOOKS

    jobs = os.cpu_count() or 1
    out = []
    for skip in [{"on": True, "off": False}[w] for w in args.skipping.split(",")]:
        for lesson in NOTEBOOKS:
            wanted = args.lessons is None or any(
                k in lesson.notebook for k in args.lessons.split(",")
            )
            if (ROOT / "notebooks" / lesson.notebook).exists() and wanted:
                r = bench_grading(lesson, skip, jobs)
                per = _per_student(r)
                print(
                    f"grading {r['lesson']} (skipping {'on' if skip else 'off'}): "
                    f"{per:.1f} s CPU per student (worker start {r['worker_start_cpu_s']:.1f} s "
                    f"apart), reference {r['reference_cpu_s']:.1f} s, "
                    f"{r['seconds']:.0f} s wall at load {r['load']:.1f}; right {r['right']}"
                    + (f"; FAILED {r['failed']}" if r["failed"] else ""),
                    flush=True,
                )
                out.append(r)
    return {"runs": out, "cores": jobs}


def _per_student(r: dict) -> float:
    """CPU one more student costs: the run's CPU without the workers' one-time start, shared by
    the class (runs measured before that start was measured apart: the whole run's share)."""
    if "marginal_cpu_s" in r:
        return r["marginal_cpu_s"]
    return statistics.mean(r["cpu_s"].values())


def _projected(r: dict, cores: int) -> float:
    """Seconds for CLASS_SIZE students at --jobs = cores, from CPU: the reference once, each
    core's worker starting once, then the students' CPU shared by the cores (no waiting counted:
    a projection, not a measurement)."""
    start = r.get("worker_start_cpu_s", 0.0)
    return r["reference_cpu_s"] + start + CLASS_SIZE * _per_student(r) / cores


def render_grading(data: dict) -> list[str]:
    t = TARGETS
    cores = data["cores"]
    lines = [
        f"Per lesson, a synthetic class of {len(GRADING_CLASS)} ({', '.join(GRADING_CLASS)}: the "
        "instructor's solution, every exercise answered wrong, the release left blank) graded by "
        f"`coursework.py autograde --jobs {cores}` in a fresh course folder (release, submit, "
        "nbgrader, the confined kernel, the verdicts), with the demonstration cells skipped "
        "(the default) and run. CPU is that of every process of the grading run (the workers, "
        "nbgrader, the confined kernels; user + system, sampled from /proc every 0.1 s) and "
        "moves little with the load. 'Per student' is what one more student costs: the run's CPU "
        "less the workers' one-time start (measured apart: a worker started and given nobody, "
        "times the workers the run used), divided by the class size; 'whole run / class' keeps "
        "that start in (in a class of 3 it weighs heavily, in one of 300 not). The reference run "
        "(the instructor's notebook, once per lesson) is apart. The 300-student time is "
        f"projected from CPU: reference + one worker start + 300 x per student / {cores} cores. "
        f"Target: <= {t['grading_cpu_s']:.0f} s CPU per student.",
        "",
        "| notebook | skipping | cells run / skipped | CPU per student | | whole run / class "
        "| worker start | reference CPU | 300 students, projected | wall (3 students) | load "
        "| exercises right |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["runs"]:
        per = _per_student(r)
        whole = statistics.mean(r["cpu_s"].values())
        start = r.get("worker_start_cpu_s")
        right = ", ".join(f"{r['right'].get(s, 'failed')}" for s in r["students"])
        lines.append(
            f"| {r['lesson']} | {'on' if r['skip'] else 'off'} "
            f"| {len(r['cells_run'])} / {len(r['cells_skipped'])} | {per:.1f} s "
            f"| {ok(per, t['grading_cpu_s'])} | {whole:.1f} s "
            f"| {'' if start is None else f'{start:.1f} s'} | {r['reference_cpu_s']:.1f} s "
            f"| {_projected(r, cores) / 60:.1f} min | {r['seconds']:.0f} s | {r['load']:.1f} "
            f"| {right} of {r['exercises']} |"
        )
    return lines
