"""Lesson 9 (C9.3): the sheet's choices trained side by side, the full grid, as a command.

    python tools/side_by_side.py                      # the defaults below; writes the two files
    python tools/side_by_side.py --steps 100 --seeds 0 1 --out /tmp/grid.md   # a quicker look

One factor at a time from the course's default model (sinusoidal position, pre-norm, tied,
GELU): position (sinusoidal / learned / rotary, also measured at twice the training length),
norm placement (pre / post), tying (tied / untied), activation (GELU / ReLU / SwiGLU). Every
model has the same size, steps, batches and held-out text; each seed sets the initial weights
and the batches (``helpers.side_by_side.side_by_side``). The notebook of lesson 9 runs a small grid
(tiny models, a few steps); this is the bigger one: the lesson's own model size and more seeds.

Writes a Markdown table (``--out``, default ``docs/SIDE_BY_SIDE.md``) and the held-out curves
(``--figure``, default next to it, ``side_by_side.png``). Not run in CI: with the defaults it
trains 7 models x 3 seeds x 250 steps, several minutes of one CPU thread.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # helpers, when run from a checkout without installing

from helpers.plots.pretrain import plot_side_by_side  # noqa: E402
from helpers.pretrain import LESSON_CONFIG, Corpus  # noqa: E402
from helpers.side_by_side import side_by_side  # noqa: E402

LITERATURE = """\
What the literature reports, at much larger scale (compare with the table; at this size the
differences may well be within the spread between seeds):

- Vaswani et al. 2017, Table 3 row (E): learned positions about equal to sinusoidal
  (4.92 vs 4.92 dev perplexity, BLEU 25.7 vs 25.8).
- Xiong et al. 2020: pre-norm trains without a learning-rate warm-up; post-norm needs one
  (no warm-up is used here, for either).
- Press & Wolf 2017: tying the output projection to the embedding helps or is neutral.
- Shazeer 2020: SwiGLU beats ReLU (and GELU) at equal parameters (d_ff scaled by 2/3 here,
  as in the course's FeedForward).
- Press et al. 2022 (ALiBi, "Train short, test long"): sinusoidal and rotary positions get
  worse past the training length (ALiBi does not); a learned table cannot run there at all.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    c = LESSON_CONFIG
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--d-model", type=int, default=c.d_model)
    parser.add_argument("--n-layers", type=int, default=c.n_layers)
    parser.add_argument("--n-heads", type=int, default=c.n_heads)
    parser.add_argument("--block-size", type=int, default=c.block_size)
    parser.add_argument("--batch-size", type=int, default=c.batch_size)
    parser.add_argument("--lr", type=float, default=c.lr)
    parser.add_argument("--eval-every", type=int, default=c.eval_every)
    parser.add_argument("--val-tokens", type=int, default=8192)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "SIDE_BY_SIDE.md")
    parser.add_argument("--figure", type=Path, default=None, help="default: next to --out")
    args = parser.parse_args(argv)
    figure = args.figure or args.out.with_name("side_by_side.png")

    settings = dict(
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        block_size=args.block_size,
        batch_size=args.batch_size,
        lr=args.lr,
        eval_every=args.eval_every,
    )
    start = time.perf_counter()
    cpu = time.process_time()
    corpus = Corpus.from_text(val_tokens=args.val_tokens)
    grid = side_by_side(steps=args.steps, seeds=tuple(args.seeds), corpus=corpus, **settings)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_side_by_side(grid)
    figure.parent.mkdir(parents=True, exist_ok=True)
    plt.savefig(figure, dpi=90)
    plt.close("all")

    command = "python tools/side_by_side.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    n_models = len({id(runs) for runs in grid.runs.values()})
    b = grid.baselines
    text = f"""# Lesson 9, C9.3: the sheet's choices side by side (the full grid)

Written by `{command}` (`tools/side_by_side.py`; not run in CI). It took {seconds:.0f} s
({cpu_seconds:.0f} s of CPU time) for {n_models} models x {len(grid.seeds)} seeds x {grid.steps}
steps, one CPU thread per model, float64.

Setting: character-level `TransformerLM` on the whole tiny-shakespeare (`helpers/data`),
vocabulary {corpus.tokenizer.vocab_size}, d_model {args.d_model}, n_layers {args.n_layers},
n_heads {args.n_heads}, context {args.block_size}, batches of {args.batch_size}, AdamW lr {args.lr:g},
no warm-up, gradient clipped to norm 1. One factor at a time from the course's default
(sinusoidal, pre-norm, tied, GELU; its rows are the same runs in every group). Loss: nats per
character on the first {args.val_tokens:,} characters of the held-out tenth, after the last step
(baselines on the same characters: uniform {b["uniform"]:.3f}, unigram {b["unigram"]:.3f},
bigram {b["bigram"]:.3f}). Spread: max - min over the seeds {", ".join(map(str, grid.seeds))}.

{grid.markdown()}

![held-out loss curves, mean over seeds and each seed]({figure.name})

{LITERATURE}"""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("\n".join(grid.lines()))
    print(f"wrote {args.out} and {figure} in {seconds:.0f} s ({cpu_seconds:.0f} s CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
