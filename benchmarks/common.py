"""What every section of the benchmark shares: the targets, the machine line, the verdict, and
the :class:`Section` record that ``benchmarks/run.py`` lists."""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
KEEP = "<!-- notes written by hand below this line are kept when the script rewrites the file -->"


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
