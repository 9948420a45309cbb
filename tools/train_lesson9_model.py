"""Train the longer lesson-9 run that ships with the course: ``helpers/data/lesson9_model.pt``.

    python tools/train_lesson9_model.py            # about 10 minutes on one core of a laptop

The lesson trains its own small model live (360 steps, rotary position, C9.1). This command trains a larger
model of the same code (:class:`helpers.pretrain.Pretraining`: the course's TransformerLM with
its coherent defaults, lesson 8's loop, one CPU thread) for longer, and saves its weights
(float32), its settings and the held-out losses it measured, so that lesson 9 can show what a
longer run writes, and measure its loss again, without the wait. Not run in CI; rerun it when
the model code changes (tests/test_lesson09_checkpoint.py says when the file no longer loads).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from helpers.checkpoint import CHECKPOINT_CONFIG, CHECKPOINT_PATH, save_checkpoint  # noqa: E402
from helpers.pretrain import Corpus, Pretraining  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=CHECKPOINT_PATH)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    run = Pretraining(Corpus.from_text(), **CHECKPOINT_CONFIG)
    print(run, "held-out loss at step 0:", round(run.val_loss, 3), flush=True)
    for target in range(250, args.steps + 1, 250):
        run.train(target, progress="none")
        print(
            f"step {run.step}: held-out {run.val_loss:.3f} nats, "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
    save_checkpoint(run, args.out)
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
