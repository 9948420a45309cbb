"""The ``lessons`` section: every notebook executed top to bottom on a fresh kernel (wall time,
the kernel's CPU time and peak memory, the whole run and cell by cell)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from benchmarks.common import LESSON_SECONDS, ROOT, TARGETS, ok

#: Cells shown per lesson in "where the time goes": those using at least this much CPU time.
CELL_CPU_SECONDS = 0.5


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
        **_live_run(path.name, nb),
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


#: Lesson 9's live run, read from the executed notebook's own printed lines (cell "C9.1 more
#: training ..."): its held-out loss and the words of its three 200-character samples at T = 0.8
#: (pooled) that are the text's.
LIVE_LOSS = re.compile(r"held-out loss: live run ([0-9.]+)")
LIVE_WORDS = re.compile(r"T = 0\.8, three samples pooled: live run (\d+) of (\d+) words")
#: issue 40's product targets for that run
LIVE_TARGETS = {"loss": 2.1, "word_share": 1 / 3}


def _live_run(name: str, nb) -> dict:
    """Lesson 9's live loss and word count as the executed notebook printed them ({} elsewhere
    or when the lines are missing)."""
    if not name.startswith("09_"):
        return {}
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    loss, words = LIVE_LOSS.search(text), LIVE_WORDS.search(text)
    out = {}
    if loss:
        out["live_loss"] = float(loss.group(1))
    if words:
        out["live_words"] = [int(words.group(1)), int(words.group(2))]
    return out


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
        when = f" (measured {r['date']})" if "date" in r else ""
        lines.append(
            f"| {r['lesson']}{when} "
            f"| {r['seconds']:.1f} s | {ok(r['seconds'], target)} "
            f"| {r['cpu_s']:.1f} s | {r['kernel_start_s']:.1f} s / {r['kernel_start_cpu_s']:.1f} s "
            f"| {r['kernel_mb']:.0f} MB | {ok(r['kernel_mb'], t['kernel_mb'])} | {load} |"
        )
    for r in data["lessons"]:
        if "live_loss" in r:
            right, total = r.get("live_words", (0, 0))
            share = right / max(total, 1)
            lines += [
                "",
                f"Lesson 9's live run (printed by the notebook): held-out loss {r['live_loss']:.3f} "
                f"nats (target <= {LIVE_TARGETS['loss']}) {ok(r['live_loss'], LIVE_TARGETS['loss'])}; "
                f"{right} of {total} words of its three samples at T = 0.8 are the text's "
                f"({share:.0%}, target >= "
                f"one third) {ok(-share, -LIVE_TARGETS['word_share'])}.",
            ]
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
