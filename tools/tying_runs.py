"""Lesson 8's shipped runs (C8.5 tied vs untied, C8.6 the embedding scale): ``helpers/data/tying_runs.json``.

    python tools/tying_runs.py                 # 8 seeds; about 20 minutes of CPU on one core
    python tools/tying_runs.py --seeds 0 1 --tying-steps 100 --scale-steps 50 --out DIR

The lesson trains a few dozen steps live. This command trains the same model with the same code
(:func:`helpers.tying_runs.run_arm`: the lesson's character model, the course's loop, float64,
one thread) for every arm of :data:`helpers.tying_runs.ARMS` under every seed of
:data:`helpers.tying_runs.SETTINGS`, and writes each run's held-out curve with
:func:`helpers.shipped.write_results`. The settings were fixed before the first run; rerun it
when the model or the loop changes (tests/test_lesson08_tying.py reruns a reduced version and
compares it with the file).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from helpers.shipped import timed, write_results  # noqa: E402
from helpers.tying_runs import (  # noqa: E402
    NAME,
    RESULTS_SCHEMA,
    SETTINGS,
    SETTINGS_SCHEMA,
    run_experiment,
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=SETTINGS["seeds"])
    parser.add_argument("--tying-steps", type=int, default=SETTINGS["steps"]["tying"])
    parser.add_argument("--scale-steps", type=int, default=SETTINGS["steps"]["scale"])
    parser.add_argument("--out", type=Path, default=None, help="folder (default: helpers/data)")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def progress(comparison, arm, seed):
        print(f"{time.perf_counter() - start:6.0f} s  {comparison} {arm} seed {seed}", flush=True)

    (settings, results), seconds, cpu = timed(
        run_experiment,
        seeds=args.seeds,
        steps={"tying": args.tying_steps, "scale": args.scale_steps},
        progress=progress,
    )
    path = write_results(
        NAME,
        tool="tools/tying_runs.py",
        settings=settings,
        results=results,
        settings_schema=SETTINGS_SCHEMA,
        results_schema=RESULTS_SCHEMA,
        seconds=seconds,
        cpu_seconds=cpu,
        folder=args.out,
    )
    print(f"wrote {path.name}: {seconds:.0f} s wall, {cpu:.0f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
