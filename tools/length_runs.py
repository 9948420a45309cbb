"""Lesson 4's length experiment (C4.7, and 04b's comparison of position schemes), shipped as data.

    python tools/length_runs.py                      # the shipped run: 4 schemes x 5 seeds
    python tools/length_runs.py --seeds 0 --kinds sinusoidal --out /some/folder

Each run is :func:`helpers.length.train_at_length`: the course's model (2 blocks, d_model 48,
4 heads), 400 AdamW steps on random windows of 32 characters of the shipped text, float64 from
the first weight; then the held-out loss at lengths 32, 64, 128 and 256 and the loss at each
position of the 256-character windows. Every scheme gets the sinusoidal model's initialization
(Xavier, token vectors times sqrt(d_model)), so the schemes differ in the position scheme only.
A learned table is not run: it has no row past position 31 (C4.4).

Writes ``helpers/data/lesson4_length.json`` (``helpers.shipped.write_results``: the settings,
the results, the wall and CPU seconds). Lesson 4 reads it with
``helpers.length.load_length_runs()``; ``tests/test_lesson04_position.py`` reruns one seed of
one scheme at reduced size (slow) and checks it against the shipped seeds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helpers.length import (
    LENGTH_RESULTS_SCHEMA,
    LENGTH_RUNS,
    LENGTH_SETTINGS_SCHEMA,
    length_experiment,
)
from helpers.shipped import timed, write_results

KINDS = ("sinusoidal", "rotary", "alibi", "none")
SEEDS = (0, 1, 2, 3, 4)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), help="position schemes")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--out", type=Path, default=None, help="folder (default helpers/data)")
    args = parser.parse_args(argv)

    def progress(kind, seed):
        print(f"training {kind}, seed {seed} ...", flush=True)

    (settings, results), seconds, cpu = timed(
        length_experiment, args.kinds, args.seeds, steps=args.steps, progress=progress
    )
    path = write_results(
        LENGTH_RUNS,
        tool="tools/length_runs.py",
        settings=settings,
        results=results,
        settings_schema=LENGTH_SETTINGS_SCHEMA,
        results_schema=LENGTH_RESULTS_SCHEMA,
        seconds=seconds,
        cpu_seconds=cpu,
        folder=args.out,
    )
    for kind, runs in results.items():
        for run in runs:
            shown = ", ".join(f"{n}: {loss:.3f}" for n, loss in run["losses"].items())
            print(f"{kind:>10} seed {run['seed']}: {shown}")
    print(f"wrote {path.name}: {seconds:.0f} s wall, {cpu:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
