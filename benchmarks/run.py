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
* ``speed``: the course's training step (``Pretraining``, its own loop) against a reference GPT
  written with torch's fused modules at nanoGPT's CPU shape, one thread each, on the same batches
  in one run: CPU ms per step and their ratio (``benchmarks/speed.py``);
* ``suite`` (not by default): the whole test suite and its core selection, wall and CPU time;
* ``grading`` (not by default; ``--lessons``, ``--skipping on,off``): per lesson, a synthetic
  class (the instructor's solution, every exercise wrong, the blank release) graded through the
  real pipeline (``coursework.py autograde --jobs`` = the core count): CPU per student, the
  reference run's CPU, and the projected time for 300 students, demonstration cells skipped and
  run.

The machine is shared: wall times move with the load, CPU times much less; both are printed.
Each section is a module of ``benchmarks/`` (lessons, explorers, block, speed, suite, grading,
chromium; ``common`` holds the targets and the machine line). A new section is a ``run(args) ->
dict`` and a ``render(data) -> list[str]`` registered in :data:`SECTIONS` (``Section(name, title,
run, render, default)``); nothing else changes.

This is a script, not a timed test: machines are shared and noisy, so figures are measured and
written down, and a missed target is work to do, not a red build.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

# each section lives in its own module; the names tests use are importable from here too
from benchmarks import chromium as _chromium  # the widgets engineer's section
from benchmarks.block import bench_block, render_block, run_block
from benchmarks.common import KEEP, RESULTS_JSON, ROOT, Section, machine
from benchmarks.explorers import render_explorers, run_explorers
from benchmarks.grading import render_grading, run_grading
from benchmarks.lessons import render_lessons, run_lessons
from benchmarks.speed import render_speed, run_speed
from benchmarks.suite import machine_busy_cpu_s, render_suite, run_suite

__all__ = ["SECTIONS", "bench_block", "machine_busy_cpu_s", "main", "render_suite", "report"]

#: The benchmark's sections, in the order RESULTS.md shows them.
SECTIONS = [
    Section("lessons", "Lessons: executing the notebook on a fresh kernel", run_lessons, render_lessons),
    Section("explorers", "Explorers: one update (compute and redraw, server side)", run_explorers, render_explorers),
    Section("block", "Model piece: forward + backward", run_block, render_block),
    Section("speed", "Training step: the course against a reference GPT (nanoGPT's CPU shape)", run_speed, render_speed),
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


def merge_lessons(old: dict, new: dict) -> dict:
    """The lessons entry after measuring only some lessons (``--lessons``): the new rows, each
    marked with its date and machine, replace the same lessons' rows; the others stay as they were
    measured, with the entry's date and machine."""
    fresh = {r["lesson"]: dict(r, date=new["date"]) for r in new["data"]["lessons"]}
    rows = [fresh.pop(r["lesson"], r) for r in old["data"]["lessons"]] + list(fresh.values())
    return dict(old, data=dict(old["data"], lessons=rows))


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
        entry = {"date": date.today().isoformat(), "machine": machine(), "data": sec.run(args)}
        if sec.name == "lessons" and args.lessons and sec.name in stored:
            entry = merge_lessons(stored[sec.name], entry)
        stored[sec.name] = entry
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
