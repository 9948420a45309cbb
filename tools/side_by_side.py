"""Lesson 9 (C9.3): the sheet's choices trained side by side, the full grid, as a command whose
results ship with the course.

    python tools/side_by_side.py                 # the declared grid below; writes the three files
    python tools/side_by_side.py --seeds 0 1 2 --factors tying --aa 1 --data-dir DIR --doc DIR/x.md

Declared before it ran (the defaults): lesson 8's model (``helpers.pretrain.LESSON_CONFIG``:
d_model 48, 2 blocks, 4 heads, context 64, batches of 16, AdamW lr 5e-3, float64, one CPU
thread), 250 steps, seeds 0-4, every factor of ``helpers.side_by_side.FACTORS`` (the sheet's four
with the initialization held at the base's, the initialization itself, and position again at
GPT-2's initialization), the position rows also at twice the training length, and 10 A/A
comparisons (the base model again with the same batches and another initial draw). Verdicts:
``helpers.paired.decide``, first declared as "all paired differences of one sign and the mean beyond
2 standard errors"; that rule tested the sign of the differences, not their mean, and was replaced
after the runs (the runs are unchanged) by the paired t-test on the mean below.

Declared before the follow-up seeds ran (a sequential rule, two looks): look 1 decides on seeds
0-4; every row it leaves undecided gets seeds 5, 6 and 7 (with the base's runs under the same
seeds) and look 2 decides on its 8 paired differences. Each look is a paired t-test on the mean
difference at the two-sided level that makes the two looks together fire 5% of the time when a
choice changes nothing (Gaussian differences; ``helpers.paired``). There is no third look: a row
undecided at 8 seeds is "cannot tell apart", beside the smallest difference 8 seeds detect at 80%
power. The follow-up is trained with ``--seeds 5 6 7 --factors "norm placement" tying activation
--aa 0 --raw FILE`` and merged with ``--followup-from-raw FILE``.

Writes ``helpers/data/side_by_side.json`` (``helpers.shipped``: settings, per-seed curves and
finals, A/A runs, times; read by ``helpers.side_by_side.load_side_by_side``), the page
``docs/SIDE_BY_SIDE.md`` and its figure ``docs/side_by_side.png``. ``--raw FILE`` also saves the
grid as soon as it is trained; ``--from-raw FILE`` writes the three outputs from such a file
without training again (``--aa-from-raw FILE``: with the A/A runs of another such file, trained
apart with ``--factors`` left empty: the two processes may run at once; the base runs, trained in
both, must agree exactly). Not run in CI (about 25 minutes of one CPU core with the defaults);
``tests/test_side_by_side_shipped.py`` reruns it at reduced size.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from helpers.pretrain import LESSON_CONFIG, Corpus  # noqa: E402
from helpers.shipped import experiment_command  # noqa: E402
from helpers.side_by_side import (  # noqa: E402
    FACTORS,
    SIDE_BY_SIDE_DATA,
    SideBySide,
    rule_summary,
    save_side_by_side,
    side_by_side,
)

LITERATURE = """\
What the literature reports, at much larger scale, next to what this grid measured:

- Vaswani et al. 2017, Table 3 row (E): learned positions about equal to sinusoidal
  (4.92 vs 4.92 dev perplexity, BLEU 25.7 vs 25.8).
- Su et al. 2021 (RoFormer): rotary makes the scores depend on the relative position; they
  report results comparable to or better than absolute positions on their benchmarks.
  Press et al. 2022 (ALiBi, "Train short, test long", Fig. 1) find sinusoidal and rotary models
  get worse past the training length (ALiBi does not); a learned table cannot run there at all.
- Xiong et al. 2020: pre-norm trains without a learning-rate warm-up; post-norm needs one (no
  warm-up is used here, for either; lesson 5's sweep, docs/WARMUP_SWEEP.md, asks the question).
- Press & Wolf 2017: tying the output projection to the embedding helps or is neutral.
- Shazeer 2020: SwiGLU beats ReLU (and GELU) at equal parameters (d_ff scaled by 2/3 here,
  as in the course's FeedForward).
"""


def _settings(args) -> dict:
    c = LESSON_CONFIG
    return dict(
        d_model=args.d_model if args.d_model is not None else c.d_model,
        n_layers=args.n_layers if args.n_layers is not None else c.n_layers,
        n_heads=c.n_heads,
        block_size=c.block_size,
        batch_size=c.batch_size,
        lr=c.lr,
        eval_every=c.eval_every,
    )


def _figure(grid: SideBySide, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.plots.pretrain import plot_differences, plot_side_by_side

    factors = grid.factors()
    fig = plt.figure(figsize=(3.0 * len(factors), 2.9 + 0.3 * (len(grid.table()) + 2)))
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.0, 1.4])
    curves = top.subplots(1, len(factors), sharey=True)
    plot_side_by_side(grid, curves)
    plot_differences(grid, bottom.subplots(1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def _page(grid: SideBySide, command: str, figure: Path, data: Path) -> str:
    b = grid.baselines
    s = grid.base
    n_models = len({id(runs) for runs in grid.runs.values()})
    aa = grid.aa_rate()
    aa_line = ""
    if aa is not None:
        aa_line = (
            f"The A/A repeats: the base model trained again {len(grid.aa_runs)} times per seed "
            "with the same batches and another initial draw, compared in disjoint pairs (the "
            "base's runs with repeat 1, repeat 2 with 3, ...), so that no run enters two "
            f"comparisons: {aa.comparisons} independent comparisons. Their paired differences "
            f'have a root mean square of {grid.aa_sd():.3f} nats: what "no difference" looks '
            "like here."
        )
    more = ""
    if grid.followup is not None:
        f = grid.followup
        n_more = len({id(runs) for runs in f.runs.values()})
        more = (
            f"; then the follow-up: {n_more} models (the base and the rows the first look left "
            f"undecided) over seeds {', '.join(map(str, f.seeds))}, {f.seconds:.0f} s wall "
            f"({f.cpu_seconds:.0f} s CPU), included in the times above"
        )
    return f"""# Lesson 9, C9.3: the sheet's choices side by side (the full grid)

Written by `{command}` (`tools/side_by_side.py`; not run in CI), which also wrote
`helpers/data/{data.name}` (the data the lesson loads). It took {grid.seconds:.0f} s wall
({grid.cpu_seconds:.0f} s of CPU time) for {n_models} models and {len(grid.aa_runs)} A/A repeats
of the base, each over {len(grid.seeds)} seeds x {grid.steps} steps, one CPU thread, float64{more}.

**Declared before it ran.** Character-level `TransformerLM` on the whole tiny-shakespeare
(`helpers/data`), vocabulary 65, d_model {s.d_model}, {s.n_layers} blocks, {s.n_heads} heads,
context {s.block_size}, batches of {s.batch_size}, AdamW lr {s.lr:g}, no warm-up, gradient clipped
to norm 1, {grid.steps} steps, seeds {", ".join(map(str, grid.seeds))}. Seed s gives every model the
same batches in the same order and the same initial draws where the shapes agree.

**One factor at a time.** The base model is sinusoidal, pre-norm, tied, GELU, with Xavier-normal
weights and token vectors N(0, 1/d_model) multiplied by sqrt(d_model) (sinusoidal's coherent
default, C8.6). In the four factors of the sheet (position, norm placement, tying, activation)
every row holds that initialization and scaling: each row differs from the base in its named
factor only. The initialization is then a factor of its own (GPT-2's N(0, 0.02^2), unscaled), and
position is shown a second time with all three schemes at GPT-2's initialization ("position,
GPT-2 init", compared with sinusoidal at that initialization).

**The rule.** Each choice is compared with its factor's first choice by the paired differences of
their final held-out losses, seed by seed. The {rule_summary(grid)}. {aa_line}

Loss: nats per character on the first {grid.val_tokens:,} characters of the held-out tenth, after the last
step (baselines on the same characters: uniform {b["uniform"]:.3f}, unigram {b["unigram"]:.3f},
bigram {b["bigram"]:.3f}). Differences are the row's loss minus its factor's first choice's
(negative: lower loss); SE is their standard error over the seeds.

{grid.markdown()}

![held-out curves per factor (each seed faint, the mean bold), and every comparison's paired differences, one point per seed, with the A/A comparisons below]({figure.name})

{LITERATURE}"""


def _write(grid: SideBySide, args, argv) -> None:
    data = save_side_by_side(grid, folder=args.data_dir)
    command = experiment_command(
        "tools/side_by_side.py", argv if argv is not None else sys.argv[1:]
    )
    if args.doc is not None:
        figure = args.doc.with_name("side_by_side.png") if args.figure is None else args.figure
        _figure(grid, figure)
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(_page(grid, command, figure, data))
    print("\n".join(grid.lines()))
    print(rule_summary(grid))
    print(f"wrote {data.name} in {grid.seconds:.0f} s ({grid.cpu_seconds:.0f} s CPU)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--factors", nargs="*", default=list(FACTORS), choices=list(FACTORS))
    parser.add_argument("--aa", type=int, default=10, help="A/A comparisons")
    parser.add_argument("--d-model", type=int, default=None)
    parser.add_argument("--n-layers", type=int, default=None)
    parser.add_argument("--val-tokens", type=int, default=8192)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: helpers/data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "SIDE_BY_SIDE.md")
    parser.add_argument("--no-doc", dest="doc", action="store_const", const=None)
    parser.add_argument("--figure", type=Path, default=None, help="default: next to --doc")
    parser.add_argument("--raw", type=Path, default=None, help="also save the trained grid here")
    parser.add_argument("--from-raw", type=Path, default=None, help="write outputs from --raw")
    parser.add_argument(
        "--followup-from-raw",
        type=Path,
        default=None,
        help="with --from-raw: the follow-up seeds' grid from this raw file (same base, new seeds)",
    )
    parser.add_argument(
        "--aa-from-raw",
        type=Path,
        default=None,
        help="with --from-raw: take the A/A runs from this raw file (trained apart, same base)",
    )
    args = parser.parse_args(argv)

    if args.from_raw is not None:
        grid = SideBySide.from_dict(json.loads(args.from_raw.read_text()))
        if args.aa_from_raw is not None:
            grid = grid.with_aa(SideBySide.from_dict(json.loads(args.aa_from_raw.read_text())))
        if args.followup_from_raw is not None:
            more = SideBySide.from_dict(json.loads(args.followup_from_raw.read_text()))
            grid = grid.with_followup(more)
        _write(grid, args, argv)
        return 0
    start = time.perf_counter()
    corpus = Corpus.from_text(val_tokens=args.val_tokens)
    grid = side_by_side(
        steps=args.steps,
        seeds=tuple(args.seeds),
        corpus=corpus,
        factors=args.factors,
        aa=args.aa,
        **_settings(args),
    )
    if args.raw is not None:
        args.raw.write_text(json.dumps(grid.to_dict()))
    _write(grid, args, argv)
    print(f"total {time.perf_counter() - start:.0f} s; data: {SIDE_BY_SIDE_DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
