"""The ``suite`` section: the whole test suite and its core selection, wall and CPU time, and the
machine's busy CPU over the run."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, TARGETS, ok


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
