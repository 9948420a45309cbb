"""Lesson 5 (C5.7): does post-norm need a learning-rate warm-up, and does pre-norm tolerate larger
rates? The experiment, declared before it ran, as a command whose results ship with the course.

    python tools/warmup_sweep.py              # helpers.warmup.SWEEP; writes the three files
    python tools/warmup_sweep.py --seeds 0 1 2 --lrs 0.03 --aa 1 --data-dir DIR --doc DIR/x.md

Declared (``helpers.warmup.SWEEP``): lesson 5's model (d_model 32, 4 blocks, 4 heads, context
16, batches of 8, sinusoidal, Xavier init, GELU, tied, float64, one CPU thread) on lesson 5's
text, 120 steps of AdamW (betas 0.9, 0.98, no clipping), at learning rates 3e-3, 1e-2 and 3e-2,
seeds 0-4; at each rate and seed the three runs of ``WARMUP_RUNS`` (post-norm with a 40-step
linear warm-up, post-norm without, pre-norm without) share the batches and the initial draw; two
A/A comparisons per run and rate (another initial draw, the same batches). Verdicts:
``helpers.paired.decide``, declared as "all paired differences of one sign and the mean beyond 2
standard errors"; that rule tested the sign, not the mean, and was replaced after the runs (the
runs are unchanged) by a paired t-test on the mean (below); "every seed": what holds for all five.

Declared before the follow-up seeds ran (the same two-look plan as lesson 9's grid): look 1
decides each comparison on seeds 0-4; a comparison it leaves undecided is decided once more on 8
seeds, with seeds 5, 6 and 7 added (trained for every run and rate, without A/A repeats:
``--seeds 5 6 7 --aa 0 --raw FILE``, merged with ``--followup-from-raw FILE``). Each look is a
paired t-test on the mean difference at ``helpers.paired.TWO_LOOK_LEVEL``, so that the two looks
together fire about 5% of the time when nothing differs; no third look.

Writes ``helpers/data/warmup_sweep.json`` (``helpers.shipped``; read by
``helpers.warmup.load_warmup_sweep``), ``docs/WARMUP_SWEEP.md`` and ``docs/warmup_sweep.png``;
``--raw FILE`` also saves the sweep as soon as it ran, ``--from-raw FILE`` writes the outputs from it.
Not run in CI (about 5 minutes of one CPU core); ``tests/test_lesson05_warmup_sweep.py`` reruns it
at reduced size.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from helpers.paired import chance_alarms, t_quantile  # noqa: E402
from helpers.shipped import experiment_command  # noqa: E402
from helpers.warmup import (  # noqa: E402
    SWEEP,
    SWEEP_COMPARISONS,
    WARMUP_RUNS,
    WarmupSweep,
    save_warmup_sweep,
    warmup_sweep,
)

LITERATURE = """\
What Xiong et al. 2020 report, next to what this sweep measured: their no-warm-up ablation is on
IWSLT14 German-English translation (Post-LN without warm-up, or with too short a one, trains far
worse than with it; Pre-LN without warm-up reaches Post-LN-with-warm-up quality), and their BERT
runs compare Pre-LN without warm-up to Post-LN with it (Pre-LN reaches a given validation loss in
fewer steps and tolerates a larger learning rate). Their theory (Theorem 1) says Post-LN's
gradient near the output is large at initialization, so a large first step is risky; here the
model has 4 blocks and 58 characters, 120 steps.
"""


def _figure(sweep: WarmupSweep, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lrs = sweep.lrs
    fig, axes = plt.subplots(1, len(lrs), figsize=(3.3 * len(lrs), 3.0), sharey=True)
    axes = [axes] if len(lrs) == 1 else list(axes)
    runs = list(sweep.finals)
    for ax, lr in zip(axes, lrs, strict=True):
        for x, run in enumerate(runs):
            finals = sweep.final(run, lr)
            ax.plot([x] * len(finals), finals, "o", ms=4, alpha=0.7, color=f"C{x}")
            ax.plot([x - 0.25, x + 0.25], [sum(finals) / len(finals)] * 2, color=f"C{x}", lw=2)
        for i in range(len(sweep.seeds)):  # each seed's three runs, joined
            ax.plot(range(len(runs)), [sweep.final(r, lr)[i] for r in runs], color="grey", lw=0.5)
        ax.axhline(sweep.unigram, color="grey", ls="--", lw=1)
        ax.set_xticks(range(len(runs)), [r.replace(", ", "\n") for r in runs], fontsize=7)
        ax.set_title(f"learning rate {lr:g}", fontsize=10)
    axes[0].set_ylabel("final held-out loss (nats)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def _page(sweep: WarmupSweep, command: str, figure: Path) -> str:
    s = sweep.settings
    n = len(sweep.seeds)
    aa = sweep.aa_rate()
    compared = len(sweep.table())
    rate = sweep.false_alarm_rate()
    expected, some = chance_alarms(compared, rate)
    aa_line = (
        f"On the {aa.comparisons} disjoint A/A comparisons (each run again with the same batches "
        "and another initial draw, the run's own seeds against repeat 1: no run in two "
        f"comparisons) the first look fired {aa.alarms} time(s) ({aa.rate:.0%}, 95% interval "
        f"{aa.interval[0]:.0%} to {aa.interval[1]:.0%}; its level is {aa.claimed:.1%}); under a null shaped like those A/A "
        f"differences (centred and resampled, skew included) it fires {sweep.shaped_rate():.1%}."
        if aa
        else ""
    )
    seen = sweep.detectable() or {}
    power_line = "; ".join(
        ", ".join(f"{v:.3f} nats at {k} seeds" for k, v in by_n.items()) + f" (rate {lr})"
        for lr, by_n in seen.items()
    )
    followup = ""
    if sweep.followup is not None:
        n2 = n + len(sweep.followup.seeds)
        followup = (
            f" A comparison the first look leaves undecided is decided once more on {n2} seeds "
            f"(follow-up seeds {', '.join(map(str, sweep.followup.seeds))}, the mean beyond "
            f"{t_quantile(n2, sweep.level):.2f} SE), a plan declared before the follow-up ran."
        )
    return f"""# Lesson 5, C5.7: warm-up, learning rate, post- and pre-norm (the sweep)

Written by `{command}` (`tools/warmup_sweep.py`; not run in CI), which also wrote
`helpers/data/warmup_sweep.json` (the data lesson 5 loads). It took {sweep.seconds:.0f} s wall
({sweep.cpu_seconds:.0f} s of CPU time), one CPU thread, float64.

**Declared before it ran** (`helpers.warmup.SWEEP`): d_model {s["d_model"]}, {s["n_layers"]}
blocks, {s["n_heads"]} heads, context {s["block_size"]}, batches of {s["batch_size"]}, lesson 5's
text (58 characters), {s["steps"]} steps of AdamW (betas 0.9, 0.98, no gradient clipping),
learning rates {", ".join(f"{x:g}" for x in sweep.lrs)}, seeds {", ".join(map(str, sweep.seeds))};
the runs: {"; ".join(WARMUP_RUNS)} (warm-up: a linear ramp over the first {s["warmup_steps"]}
steps). The three runs of one seed share the batches and the initial draw.

**The rule.** A paired t-test on the mean of the {n} paired differences (other minus reference,
seed by seed) at level {sweep.level:.1%}: decided when the mean is beyond
{t_quantile(n, sweep.level):.2f} standard errors (it tests the mean, not whether the seeds agree
in sign).{followup} Its false-alarm rate per comparison is {rate:.1%} (Gaussian noise), so
{compared} comparisons give {expected:.2f} chance alarms on average (at least one with probability
{some:.0%}) if nothing differed. {aa_line} With the A/A spread at each rate it detects at 80% power
a true mean difference of {power_line}; smaller ones are mostly "cannot tell apart". "Every seed" says
what holds for the first {n} seeds. Unigram baseline
on the held-out text: {sweep.unigram:.3f} nats (uniform: {sweep.uniform:.3f}).

{sweep.finals_markdown()}

{sweep.markdown()}

![final held-out loss of each run, one point per seed, a bar at the mean, each seed's three runs joined, one panel per learning rate; dashed: the unigram baseline]({figure.name})

{LITERATURE}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SWEEP["seeds"]))
    parser.add_argument("--lrs", type=float, nargs="+", default=list(SWEEP["lrs"]))
    parser.add_argument("--steps", type=int, default=SWEEP["steps"])
    parser.add_argument("--warmup-steps", type=int, default=SWEEP["warmup_steps"])
    parser.add_argument("--aa", type=int, default=SWEEP["aa"])
    parser.add_argument("--data-dir", type=Path, default=None, help="default: helpers/data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "WARMUP_SWEEP.md")
    parser.add_argument("--no-doc", dest="doc", action="store_const", const=None)
    parser.add_argument("--raw", type=Path, default=None, help="also save the sweep here")
    parser.add_argument("--from-raw", type=Path, default=None, help="write outputs from --raw")
    parser.add_argument(
        "--followup-from-raw",
        type=Path,
        default=None,
        help="with --from-raw: the follow-up seeds' sweep from this raw file (new seeds)",
    )
    args = parser.parse_args(argv)
    if args.from_raw is not None:
        sweep = WarmupSweep.from_dict(json.loads(args.from_raw.read_text()))
        if args.followup_from_raw is not None:
            more = WarmupSweep.from_dict(json.loads(args.followup_from_raw.read_text()))
            sweep = sweep.with_followup(more)
    else:
        sweep = warmup_sweep(
            seeds=args.seeds,
            lrs=args.lrs,
            steps=args.steps,
            warmup_steps=args.warmup_steps,
            aa=args.aa,
        )
        if args.raw is not None:
            args.raw.write_text(json.dumps(sweep.to_dict()))
    data = save_warmup_sweep(sweep, folder=args.data_dir)
    command = experiment_command(
        "tools/warmup_sweep.py", argv if argv is not None else sys.argv[1:]
    )
    if args.doc is not None:
        figure = args.doc.with_name("warmup_sweep.png")
        _figure(sweep, figure)
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(_page(sweep, command, figure))
    print(sweep.finals_markdown())
    print(sweep.markdown())
    print(f"comparisons: {len(SWEEP_COMPARISONS)} per rate; wrote {data.name}")
    print(f"{sweep.seconds:.0f} s wall, {sweep.cpu_seconds:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
