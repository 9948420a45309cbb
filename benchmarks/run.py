"""Benchmark: fast lessons, instant explorers, small memory, a quick test suite.

    .venv/bin/python -m benchmarks.run                        # the default sections
    .venv/bin/python -m benchmarks.run --only lessons          # one section (or several: a,b)
    .venv/bin/python -m benchmarks.run --only suite            # the whole test suite (slow)
    .venv/bin/python -m benchmarks.run --only grading --lessons 06,07   # grading a class

Each section measures one thing and prints its table next to the targets; its figures are kept
in ``benchmarks/results.json`` (one entry per section, with the date and the machine), and
``benchmarks/RESULTS.md`` is written from every section measured so far, so rerunning one section
leaves the others' figures as they were. The sections:

* ``lessons``: per lesson, the notebook executed top to bottom on a fresh kernel: wall time
  (kernel start included), the kernel's CPU time (user + system, its threads and children), and
  its peak memory (``VmHWM``, the kernel's own peak resident set); and per cell the same three
  figures, so a lesson's cost can be read cell by cell ("where the time goes");
* ``explorers`` (each in a fresh process): the time of one update (compute and redraw, server
  side) near the default settings and near the maximum settings, median and 95th percentile over
  many random control changes; then 500 random changes: pyplot figures left open, figures kept by
  the explorer, and resident-memory growth;
* ``block``: the course's ``TransformerBlock`` forward + backward against PyTorch's
  ``nn.TransformerEncoderLayer`` at the same size, as a ratio of medians measured in one run
  (interleaved, so load on a shared machine hits both);
* ``suite`` (not by default): the whole test suite and its core selection, wall and CPU time;
* ``grading`` (not by default; ``--lessons``, ``--skipping on,off``): per lesson, a synthetic
  class (the instructor's solution, every exercise wrong, the blank release) graded through the
  real pipeline (``coursework.py autograde --jobs`` = the core count): CPU per student, the
  reference run's CPU, and the projected time for 300 students, demonstration cells skipped and
  run.

The machine is shared: wall times move with the load, CPU times much less; both are printed.
A new section is a ``run(args) -> dict`` and a ``render(data) -> list[str]`` registered in
:data:`SECTIONS` (``Section(name, title, run, render, default)``); nothing else changes.

This is a script, not a timed test: machines are shared and noisy, so figures are measured and
written down, and a missed target is work to do, not a red build.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks import chromium as _chromium  # noqa: E402  (the widgets engineer's section)

TARGETS = {
    "lesson_seconds": 20.0,
    "kernel_mb": 600.0,
    "explorer_median_ms": 100.0,
    "explorer_p95_ms": 200.0,
    "slow_explorer_ms": 500.0,  # the gradient-norm explorer (lesson 5) runs a backward pass
    "generation_explorer_ms": 1000.0,  # lesson 9 writes 200 characters per update (issue 19)
    "open_figures": 1,
    "growth_mb": 20.0,
    "block_ratio": 1.25,
    "lesson9_seconds": 30.0,  # lesson 9 trains the full model live
    "suite_seconds": 600.0,  # the whole suite on 2 cores (hard ceiling 900 s)
    "core_seconds": 90.0,  # -m "not slow and not browser and not hub"
    "grading_cpu_s": 5.0,  # CPU per student per lesson, autograded (issue 27)
}
#: Per lesson: the time target when it is not TARGETS["lesson_seconds"].
LESSON_SECONDS = {"09_the_full_model.ipynb": TARGETS["lesson9_seconds"]}
RESULTS_JSON = ROOT / "benchmarks" / "results.json"
#: Cells shown per lesson in "where the time goes": those using at least this much CPU time.
CELL_CPU_SECONDS = 0.5
SLOW_EXPLORERS = {"norm_explorer"}
#: Explorers whose update is a long computation, timed over fewer changes: name -> (timed
#: changes per setting, changes for the leak check). Lesson 9 generates 200 characters each time.
FEW_CHANGES = {"generation_explorer": (8, 40)}
#: The values a text box (lesson 9's prompt) takes in the benchmark.
PROMPTS = ("First Citizen:", "ROMEO:", "To be, or not to be", "KING RICHARD III:\nNow is")
KEEP = "<!-- notes written by hand below this line are kept when the script rewrites the file -->"


# --------------------------------------------------------------------------- lessons
def _kernel_usage(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system, the kernel's threads and its waited-for children) and peak
    resident memory in MB (VmHWM) of process ``pid``, read from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = sum(int(fields[k]) for k in (11, 12, 13, 14)) / ticks  # utime stime cutime cstime
    hwm = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
    return cpu, hwm


def bench_lesson(path: Path) -> dict:
    """Execute ``path`` on a fresh kernel: the whole run's wall time (kernel start included),
    the kernel's CPU time and peak memory, and the same per code cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    cells, state = [], {}

    def pid() -> int:
        return client.km.provisioner.process.pid

    def before(cell, cell_index, **_):
        state["cpu"], _peak = _kernel_usage(pid())
        state["wall"] = time.perf_counter()
        state.setdefault("started", (state["wall"], state["cpu"]))  # the kernel is up

    def after(cell, cell_index, **_):
        wall = time.perf_counter() - state["wall"]
        cpu, peak = _kernel_usage(pid())
        state["end"] = (cpu, peak)
        first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")[:70]
        cells.append(
            {"index": cell_index, "first_line": first, "wall_s": wall,
             "cpu_s": cpu - state["cpu"], "peak_mb": peak}
        )  # fmt: skip

    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_execute=before,
        on_cell_executed=after,
    )
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    load = max(load_before, os.getloadavg()[0])
    started, start_cpu = state["started"]
    cpu, peak = state["end"]
    errors = [
        c["index"]
        for c in cells
        if any(o.get("output_type") == "error" for o in nb.cells[c["index"]].outputs)
        and "raises-exception" not in nb.cells[c["index"]].metadata.get("tags", [])
    ]
    return {
        "lesson": path.name,
        "seconds": seconds,
        "kernel_start_s": started - start,
        "cpu_s": cpu,
        "kernel_start_cpu_s": start_cpu,
        "kernel_mb": peak,
        "load": load,
        "cells": cells,
        "errors": errors,
    }


def run_lessons(args) -> dict:
    from helpers.course import NOTEBOOKS  # every lesson and its "Going further" companion

    out = []
    for lesson in NOTEBOOKS:
        path = ROOT / "notebooks" / lesson.notebook
        wanted = args.lessons is None or any(k in lesson.notebook for k in args.lessons.split(","))
        if path.exists() and wanted:
            r = bench_lesson(path)
            print(
                f"lesson {r['lesson']}: {r['seconds']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
                f"{r['kernel_mb']:.0f} MB"
                + (f"; ERRORS in cells {r['errors']}" if r["errors"] else ""),
                flush=True,
            )
            out.append(r)
    return {"lessons": out}


def render_lessons(data: dict) -> list[str]:
    t = TARGETS
    lines = [
        "Each notebook executed top to bottom on a fresh kernel, one after another. Wall time "
        "includes starting the kernel; CPU time is the kernel's own (user + system, all its "
        "threads); peak memory is the kernel's peak resident set (VmHWM). Lesson 9's time target "
        f"is {t['lesson9_seconds']:.0f} s. The load average (1 minute, the highest seen at the start "
        "or the end of the lesson) says how busy the machine was: on 2 cores a load above 2 "
        "stretches wall times, CPU times much less.",
        "",
        f"| notebook | wall time (target <= {t['lesson_seconds']:.0f} s) | | kernel CPU time "
        f"| kernel start (wall / CPU) | peak memory (target < {t['kernel_mb']:.0f} MB) | | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["lessons"]:
        target = LESSON_SECONDS.get(r["lesson"], t["lesson_seconds"])
        load = f"{r['load']:.1f}" if "load" in r else "not recorded"
        lines.append(
            f"| {r['lesson']} | {r['seconds']:.1f} s | {ok(r['seconds'], target)} "
            f"| {r['cpu_s']:.1f} s | {r['kernel_start_s']:.1f} s / {r['kernel_start_cpu_s']:.1f} s "
            f"| {r['kernel_mb']:.0f} MB | {ok(r['kernel_mb'], t['kernel_mb'])} | {load} |"
        )
    lines += [
        "",
        f"### Where the time goes: every cell using {CELL_CPU_SECONDS} s of CPU or more",
        "",
        "Cell numbers are the notebook's own (nbformat index, counting markdown cells, from 0); "
        "'peak so far' is the kernel's peak memory after the cell.",
        "",
        "| notebook | cell | starts with | wall | CPU | peak so far |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for r in data["lessons"]:
        for c in r["cells"]:
            if c["cpu_s"] >= CELL_CPU_SECONDS:
                first = c["first_line"].replace("|", "\\|")
                lines.append(
                    f"| {r['lesson'].split('_')[0]} | {c['index']} | `{first}` | {c['wall_s']:.1f} s "
                    f"| {c['cpu_s']:.1f} s | {c['peak_mb']:.0f} MB |"
                )
    return lines


# --------------------------------------------------------------------------- explorers
def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _is_range(control) -> bool:
    return isinstance(control.value, tuple)


def _options(control) -> list:
    """Every value a control allows (for a range slider: the single positions of either end)."""
    if hasattr(control, "options") and control.options:
        opts = control.options
        return [o[1] if isinstance(o, tuple) else o for o in opts]
    if isinstance(control.value, str):  # a text box: a few prompts
        return list(dict.fromkeys([control.value, *PROMPTS]))
    if isinstance(control.value, bool):  # a checkbox
        return [False, True]
    if hasattr(control, "min") and hasattr(control, "max"):
        step = getattr(control, "step", 1) or 1
        n = int(round((control.max - control.min) / step))
        return [control.min + i * step for i in range(n + 1)]
    raise TypeError(f"cannot enumerate values of {type(control).__name__}")


def _random_value(control, rng: random.Random):
    opts = _options(control)
    if _is_range(control):
        lo, hi = sorted(rng.sample(opts, 2))
        return (lo, hi)
    return rng.choice(opts)


def _maximum(control):
    """The heaviest setting: a slider's maximum, a range slider's full range; a dropdown or a
    checkbox keeps its value (it has no maximum)."""
    if (hasattr(control, "options") and control.options) or isinstance(control.value, bool | str):
        return control.value
    opts = _options(control)
    return (opts[0], opts[-1]) if _is_range(control) else opts[-1]


def _near(control, anchor) -> list:
    """Values one or two steps from ``anchor`` (the settings stay near the anchor)."""
    opts = _options(control)
    if _is_range(control):
        step = opts[1] - opts[0] if len(opts) > 1 else 1
        lo, hi = anchor
        shifted = [(lo + k * step, hi + k * step) for k in (-2, -1, 1, 2)]
        grown = [(lo, hi + k * step) for k in (-2, -1, 1, 2)]
        fits = [v for v in shifted + grown if opts[0] <= v[0] < v[1] <= opts[-1]]
        return fits or [anchor]
    i = opts.index(anchor) if anchor in opts else 0
    return [opts[j] for j in range(max(0, i - 2), min(len(opts), i + 3)) if j != i] or [anchor]


def _time_updates(explorer, rng, anchors: dict, n: int) -> list[float]:
    """``n`` updates, each moving one random control near its anchor and back; ms per update."""
    times = []
    names = list(explorer.controls)
    for _ in range(n):
        name = rng.choice(names)
        control = explorer.controls[name]
        for value in (rng.choice(_near(control, anchors[name])), anchors[name]):
            if control.value == value:
                continue
            start = time.perf_counter()
            control.value = value  # observers run synchronously: compute + redraw
            times.append((time.perf_counter() - start) * 1000)
    return times


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def bench_explorer_in_process(name: str, n_timed: int, n_leak: int) -> dict:
    import gc

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from helpers import widgets

    rng = random.Random(0)
    explorer = getattr(widgets, name)()
    defaults = {k: c.value for k, c in explorer.controls.items()}
    default_ms = _time_updates(explorer, rng, defaults, n_timed)
    maxima = {k: _maximum(c) for k, c in explorer.controls.items()}
    for k, v in maxima.items():
        explorer.controls[k].value = v
    max_ms = _time_updates(explorer, rng, maxima, n_timed)
    for k, v in defaults.items():
        explorer.controls[k].value = v

    # 500 random changes anywhere in the control ranges
    gc.collect()
    warm = 20
    for i in range(n_leak + warm):
        if i == warm:
            gc.collect()
            rss_before = _rss_mb()
        name_ = rng.choice(list(explorer.controls))
        explorer.controls[name_].value = _random_value(explorer.controls[name_], rng)
    gc.collect()
    rss_after = _rss_mb()
    with warnings.catch_warnings():  # isinstance on every object wakes torch's deprecated aliases
        warnings.simplefilter("ignore")
        figures_alive = sum(1 for o in gc.get_objects() if isinstance(o, Figure))
    result = {
        "explorer": name,
        "default_median_ms": statistics.median(default_ms),
        "default_p95_ms": _pct(default_ms, 0.95),
        "max_median_ms": statistics.median(max_ms),
        "max_p95_ms": _pct(max_ms, 0.95),
        "n_timed": len(default_ms) + len(max_ms),
        "pyplot_open": len(plt.get_fignums()),
        "figures_alive": figures_alive,
        "growth_mb": rss_after - rss_before,
        "n_leak": n_leak,
    }
    explorer.close()
    return result


def bench_explorer(name: str, n_timed: int, n_leak: int) -> dict:
    """Run one explorer's benchmark in a fresh interpreter (clean memory, clean caches)."""
    n_timed, n_leak = FEW_CHANGES.get(name, (n_timed, n_leak))
    code = (
        "import json; "
        "from benchmarks.run import bench_explorer_in_process as b; "
        f"print('RESULT', json.dumps(b({name!r}, {n_timed}, {n_leak})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


# --------------------------------------------------------------------------- model piece
def bench_block(repeats: int = 15, device: str = "cpu") -> dict:
    """The ``block`` section on ``device`` (``--device``; ``helpers.pretrain.check_device``).
    On a GPU the weights and input are the CPU's (drawn there, then moved), the times are the
    device's own (each step waits for the device to finish) and so is the ratio."""
    import torch
    from torch import nn

    from helpers import TransformerBlock
    from helpers.pretrain import check_device

    dev = check_device(device)
    torch.manual_seed(0)
    d, heads, d_ff, batch, n = 512, 8, 2048, 8, 128
    ours = TransformerBlock(d, heads, d_ff, norm="pre", activation="relu").to(dev)
    ref = nn.TransformerEncoderLayer(d, heads, d_ff, dropout=0.0, batch_first=True, norm_first=True)
    ref = ref.to(dev)
    x = torch.randn(batch, n, d).to(dev)
    wait = {"cuda": torch.cuda.synchronize, "mps": lambda: torch.mps.synchronize()}.get(
        dev.type, lambda: None
    )

    def step(module):
        module(x).sum().backward()
        wait()

    for module in (ours, ref):
        for _ in range(3):
            step(module)
    t_ours, t_ref = [], []
    for _ in range(repeats):
        for module, sink in ((ours, t_ours), (ref, t_ref)):
            start = time.perf_counter()
            step(module)
            sink.append(time.perf_counter() - start)
    m_ours, m_ref = statistics.median(t_ours), statistics.median(t_ref)
    return {
        "size": f"d_model {d}, {heads} heads, d_ff {d_ff}, batch {batch} x {n} tokens, pre-norm, ReLU",
        "ours_ms": m_ours * 1000,
        "torch_ms": m_ref * 1000,
        "ratio": m_ours / m_ref,
        "threads": torch.get_num_threads(),
        "device": str(dev),
    }


# --------------------------------------------------------------------------- suite
def machine_busy_cpu_s() -> float | None:
    """CPU-seconds the whole machine has spent busy since it booted (every core; ``/proc/stat``:
    user, nice, system, irq, softirq, steal), or None where there is no ``/proc/stat``."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def bench_suite(marker: str | None = None) -> dict:
    """Wall and CPU time of ``python -m pytest`` (optionally ``-m marker``), as the README runs it.
    Two CPU figures: every process the run started and waited for (resource.RUSAGE_CHILDREN; it
    misses processes that are not waited for), and the whole machine's busy CPU over the run
    (/proc/stat: everything the run started, but also anything else running at the time)."""
    cmd = [sys.executable, "-m", "pytest", "-q"] + (["-m", marker] if marker else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_before = machine_busy_cpu_s()
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    busy_after = machine_busy_cpu_s()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = [line for line in out.stdout.splitlines() if line.strip()][-1:] or [""]
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "machine_busy_cpu_s": None if busy_before is None else busy_after - busy_before,
        "cores": os.cpu_count() or 1,  # of the machine measured, not of the one rendering
        "summary": tail[0].strip("= "),
        "returncode": out.returncode,
        "marker": marker,
    }


CORE = "not slow and not browser and not hub"


def run_suite(args) -> dict:
    suites = []
    for marker in (None, CORE):
        r = bench_suite(marker)
        print(
            f"suite {marker or 'all'}: {r['seconds']:.0f} s wall, {r['cpu_s']:.0f} s CPU: "
            f"{r['summary']}",
            flush=True,
        )
        suites.append(r)
    return {"suites": suites}


def render_suite(data: dict) -> list[str]:
    t = TARGETS
    lines = [
        f"Targets on 2 cores: the whole suite <= {t['suite_seconds']:.0f} s (hard ceiling 900 s), "
        f'the core selection (`-m "{CORE}"`) <= {t["core_seconds"]:.0f} s. Two CPU figures: '
        "the processes the run waited for (it misses those never waited for), and the whole "
        "machine's busy CPU over the run (`/proc/stat`; everything the run started, and anything "
        "else that ran meanwhile, so read it from a quiet machine). The busy share is that CPU "
        "over wall time times the core count: near 100 % means only less CPU makes the suite "
        "faster, not more workers.",
        "",
        "| command | wall time | | CPU, waited for | CPU, machine busy | busy share | pytest said |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in data["suites"]:
        command = "python -m pytest" + (f' -m "{s["marker"]}"' if s["marker"] else "")
        target = t["suite_seconds"] if not s["marker"] else t["core_seconds"]
        busy = s.get("machine_busy_cpu_s")
        busy_cells = (
            f"{busy:.0f} s | {100 * busy / (s['seconds'] * s['cores']):.0f} %"
            if busy is not None
            else "not measured | not measured"
        )
        lines.append(
            f"| `{command}` | {s['seconds']:.0f} s | {ok(s['seconds'], target)} "
            f"| {s.get('cpu_s', float('nan')):.0f} s | {busy_cells} | {s['summary']} |"
        )
    return lines


# --------------------------------------------------------------------------- grading
#: The synthetic class graded per lesson: the instructor's solution, every exercise answered
#: wrong (tests/test_coursework.py's edit: the right result 1% off), and the blank release.
GRADING_CLASS = ("solution", "wrong", "blank")
CLASS_SIZE = 300


def _grading_class(lesson, course_dir: Path) -> dict:
    import copy

    import nbformat

    from tests.test_coursework import wrong_answer
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


# --------------------------------------------------------------------------- explorers, block
def run_explorers(args) -> dict:
    from helpers.course import LESSONS

    out = []
    for lesson in LESSONS:
        if lesson.explorer:
            r = bench_explorer(lesson.explorer, args.updates, args.leak_changes)
            print(
                f"explorer {r['explorer']}: default {r['default_median_ms']:.0f}/{r['default_p95_ms']:.0f} ms, "
                f"max {r['max_median_ms']:.0f}/{r['max_p95_ms']:.0f} ms, open {r['pyplot_open']}, "
                f"growth {r['growth_mb']:+.1f} MB",
                flush=True,
            )
            out.append(r)
    return {"explorers": out}


def render_explorers(data: dict) -> list[str]:
    t = TARGETS
    lines = [
        f"Targets: median <= {t['explorer_median_ms']:.0f} ms and 95th percentile <= {t['explorer_p95_ms']:.0f} ms "
        f"at default settings (<= {t['slow_explorer_ms']:.0f} ms for the gradient-norm explorer, which runs a backward pass; "
        f"<= {t['generation_explorer_ms']:.0f} ms for the generation explorer, which writes 200 characters with the shipped "
        f"longer run (d_model 96, 3 layers, a sliding window of 96 characters), timed over {FEW_CHANGES['generation_explorer'][0]} changes per setting and "
        f"{FEW_CHANGES['generation_explorer'][1]} for the leak check); "
        f"after 500 random changes at most {t['open_figures']} figure open and < {t['growth_mb']:.0f} MB memory growth.",
        "",
        "| explorer | default: median / p95 | | maximum: median / p95 | pyplot figures open | figures alive | memory growth (500 changes) | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["explorers"]:
        slow = r["explorer"] in SLOW_EXPLORERS
        med_t = t["slow_explorer_ms"] if slow else t["explorer_median_ms"]
        p95_t = t["slow_explorer_ms"] if slow else t["explorer_p95_ms"]
        if r["explorer"] == "generation_explorer":  # about a second for 200 characters
            med_t = p95_t = t["generation_explorer_ms"]
        met = r["default_median_ms"] <= med_t and r["default_p95_ms"] <= p95_t
        leak_ok = r["figures_alive"] <= t["open_figures"] and r["growth_mb"] < t["growth_mb"]
        lines.append(
            f"| {r['explorer']} | {r['default_median_ms']:.0f} / {r['default_p95_ms']:.0f} ms "
            f"| {'met' if met else '**missed**'} | {r['max_median_ms']:.0f} / {r['max_p95_ms']:.0f} ms "
            f"| {r['pyplot_open']} | {r['figures_alive']} | {r['growth_mb']:+.1f} MB | {'met' if leak_ok else '**missed**'} |"
        )
    lines += [
        "",
        "'figures alive' counts every matplotlib Figure object still reachable in the process: the",
        "explorer's own one figure, which it keeps and redraws in place, and nothing else.",
    ]
    return lines


def run_block(args) -> dict:
    b = bench_block(device=getattr(args, "device", "cpu"))
    print(f"block: ratio {b['ratio']:.2f}", flush=True)
    return b


def render_block(b: dict) -> list[str]:
    t = TARGETS
    return [
        f"Size: {b['size']}; {b['threads']} torch threads; median of interleaved repeats"
        + ("." if b.get("device", "cpu") == "cpu" else f"; on {b['device']}."),
        "",
        f"| course `TransformerBlock` | `nn.TransformerEncoderLayer` | ratio (target <= {t['block_ratio']}) | |",
        "|---|---|---|---|",
        f"| {b['ours_ms']:.1f} ms | {b['torch_ms']:.1f} ms | {b['ratio']:.2f} | {ok(b['ratio'], t['block_ratio'])} |",
    ]


# --------------------------------------------------------------------------- report
def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024**2:.0f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    import torch

    return (
        f"{os.cpu_count()} cores ({cpu}){mem}; {platform.system()} {platform.machine()}; "
        f"Python {platform.python_version()}, torch {torch.__version__}"
    )


def ok(value: float, target: float) -> str:
    return "met" if value <= target else "**missed**"


@dataclass(frozen=True)
class Section:
    """One part of the benchmark: ``run(args)`` measures and returns plain data (JSON),
    ``render(data)`` turns it into the Markdown lines under the section's ``title``;
    ``default``: run when no ``--only`` is given."""

    name: str
    title: str
    run: Callable[[argparse.Namespace], dict]
    render: Callable[[dict], list[str]]
    default: bool = True


#: The benchmark's sections, in the order RESULTS.md shows them.
SECTIONS = [
    Section("lessons", "Lessons: executing the notebook on a fresh kernel", run_lessons, render_lessons),
    Section("explorers", "Explorers: one update (compute and redraw, server side)", run_explorers, render_explorers),
    Section("block", "Model piece: forward + backward", run_block, render_block),
    Section("suite", "The test suite", run_suite, render_suite, default=False),
    Section("grading", "Grading a class: CPU per student per lesson", run_grading, render_grading, default=False),
    Section("explorers_chromium", "Explorers in Chromium: key press to new picture", _chromium.run_chromium, _chromium.render_chromium, default=False),
]  # fmt: skip


def report(stored: dict) -> str:
    lines = [
        "# Benchmark results",
        "",
        "Written by `benchmarks/run.py`; each section says when and where it was measured.",
    ]
    for sec in SECTIONS:
        entry = stored.get(sec.name)
        if entry is None:
            continue
        lines += [
            "",
            f"## {sec.title}",
            "",
            f"Measured on {entry['date']}; {entry['machine']}.",
            "",
        ]
        lines += sec.render(entry["data"])
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    names = [s.name for s in SECTIONS]
    parser.add_argument(
        "--only",
        default=None,
        help=f"comma-separated sections to run, of {', '.join(names)} (default: "
        f"{', '.join(s.name for s in SECTIONS if s.default)})",
    )
    parser.add_argument(
        "--updates", type=int, default=60, help="timed control changes per setting (default 60)"
    )
    parser.add_argument(
        "--leak-changes",
        type=int,
        default=500,
        help="random changes for the leak check (default 500)",
    )
    parser.add_argument(
        "--lessons",
        default=None,
        help="lessons and grading sections: only the notebooks whose name contains one of "
        "these (04,09)",
    )
    parser.add_argument(
        "--skipping",
        default="on,off",
        help="grading section: demonstration cells skipped (on), run (off), or both (on,off)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="block section: where the model runs, cpu (default; the stored figures are "
        "the CPU's), cuda or mps",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--data", type=Path, default=RESULTS_JSON)
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="measure nothing: rewrite RESULTS.md from the data",
    )
    args = parser.parse_args(argv)
    from helpers.pretrain import check_device

    try:
        check_device(args.device)
    except (TypeError, ValueError) as error:
        parser.error(f"--device: {error}")
    chosen = [s for s in SECTIONS if s.default] if args.only is None else []
    if args.render_only:
        chosen, args.only = [], None
    for name in [] if args.only is None or args.render_only else args.only.split(","):
        if name not in names:
            parser.error(f"--only: unknown section {name!r}; the sections are {', '.join(names)}")
        chosen.append(next(s for s in SECTIONS if s.name == name))

    stored = json.loads(args.data.read_text()) if args.data.exists() else {}
    for sec in chosen:
        stored[sec.name] = {
            "date": date.today().isoformat(),
            "machine": machine(),
            "data": sec.run(args),
        }
        args.data.write_text(json.dumps(stored, indent=1) + "\n")  # after each: nothing lost
    text = report(stored)
    if args.out.exists() and KEEP in args.out.read_text():  # hand-written notes survive a rerun
        text += "\n" + KEEP + args.out.read_text().split(KEEP, 1)[1]
    args.out.write_text(text)
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
