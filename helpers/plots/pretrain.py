"""Lesson 9 plots of training: a run's curves against the baselines (C9.1), and the side-by-side
grid's curves (C9.3)."""

from __future__ import annotations

from ..figures import describe, listing, trend
from ..pretrain import Pretraining
from ..side_by_side import SideBySide
from ._common import PALETTE
from ._common import axes as _axes

__all__ = ["plot_losses", "plot_side_by_side", "plot_differences"]

#: The choices of one panel differ in line style and marker as well as in colour.
_STYLES = [
    dict(ls="-", marker="o", ms=3),
    dict(ls="--", marker="s", ms=3),
    dict(ls="-.", marker="^", ms=3),
    dict(ls=":", marker="D", ms=3),
]


def _lowest(finals: dict) -> str:
    """The choice that ends lowest, or the two best when within 1% (too close to call)."""
    (v1, n1), (v2, n2) = sorted((float(v), str(k)) for k, v in finals.items())[:2]
    return f"'{n1}' and '{n2}' within 1%" if v2 - v1 <= 0.01 * abs(v2) else f"'{n1}'"


def plot_losses(run: Pretraining, ax=None):
    """Lesson 9 (C9.1). The training loss of every step (thin), the held-out loss (dots), and
    the baselines as horizontal lines. Returns the axes."""
    if not isinstance(run, Pretraining):
        raise TypeError(f"run must be a Pretraining, got {type(run).__name__}")
    ax = _axes(ax, figsize=(6.5, 3.2))
    r = run.result
    ax.plot(
        range(1, len(r.train_losses) + 1),
        r.train_losses,
        lw=0.8,
        alpha=0.6,
        color=PALETTE[0],
        label="training batch",
    )
    ax.plot(r.val_steps, r.val_losses, "o-", ms=4, color=PALETTE[1], label="held-out")
    styles = {"uniform": ":", "unigram": "--", "bigram": "-."}
    for name, value in run.baselines.items():
        ax.axhline(value, color="grey", ls=styles[name], lw=1, label=f"{name} baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("next-character loss (nats)")
    ax.legend(fontsize=8, ncol=2)
    final = r.val_losses[-1]
    below = [n for n, v in run.baselines.items() if final < v]
    above = [n for n, v in run.baselines.items() if final >= v]
    where = (
        f"ends below the {listing(below)} baseline{'s' if len(below) > 1 else ''}"
        if below
        else "ends above every baseline"
    ) + (f" and above the {listing(above)} one" if below and above else "")
    describe(
        ax,
        f"Next-character loss against step 1 to {len(r.train_losses)}: the training batch loss "
        f"(thin line) {trend(r.train_losses)} and the held-out loss (dots) "
        f"{trend(r.val_losses)} and {where} (grey lines: dotted uniform, dashed unigram, "
        "dash-dot bigram).",
    )
    return ax


def plot_side_by_side(grid: SideBySide, axes=None):
    """Lesson 9 (C9.3). One panel per factor: the held-out curve of each choice, the mean over
    the seeds (line) and each seed (faint). Returns the array of axes."""
    if not isinstance(grid, SideBySide):
        raise TypeError(f"grid must be a SideBySide, got {type(grid).__name__}")
    factors = grid.factors()
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(
            1, len(factors), figsize=(3.2 * len(factors), 2.8), layout="constrained", sharey=True
        )
    axes = list(axes.flat) if hasattr(axes, "flat") else list(axes)
    if len(axes) < len(factors):
        raise ValueError(f"axes must hold {len(factors)} axes (one per factor), got {len(axes)}")
    ends = []
    for ax, factor in zip(axes, factors, strict=False):
        finals = {}
        for i, ((_, choice), runs) in enumerate(
            (key, runs) for key, runs in grid.runs.items() if key[0] == factor
        ):
            steps = runs[0].val_steps
            mean = [sum(r.val_losses[k] for r in runs) / len(runs) for k in range(len(steps))]
            finals[choice] = mean[-1]
            (line,) = ax.plot(
                steps, mean, label=choice, color=PALETTE[i % len(PALETTE)], **_STYLES[i % 4]
            )
            for r in runs:
                ax.plot(r.val_steps, r.val_losses, color=line.get_color(), alpha=0.25, lw=0.8)
        ax.axhline(grid.baselines["unigram"], color="grey", ls=":", lw=1)
        ax.set_title(factor, fontsize=10)
        ends.append(f"{factor} {_lowest(finals)}")
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("held-out loss (nats)")
    describe(
        axes[0].get_figure(root=True),  # the figure, also when the panels sit in a subfigure
        f"Held-out loss against step, one panel per factor, each choice's seed mean a line "
        f"(seeds faint, unigram baseline dotted); lowest at the end: {'; '.join(ends)}.",
    )
    return axes


def plot_differences(grid: SideBySide, ax=None):
    """Lesson 9 (C9.3). The paired differences of every compared choice (its final held-out loss
    minus its factor's first choice's, one point per seed, the mean as a bar with two standard
    errors either side), and below them the A/A comparisons' differences (the base model against
    itself under another initial draw, same batches): what "no difference" looks like here. Each
    row's verdict is written at its end. Returns the axes."""
    if not isinstance(grid, SideBySide):
        raise TypeError(f"grid must be a SideBySide, got {type(grid).__name__}")
    rows = [r for r in grid.table() if r["differences"] is not None]
    labels = [f"{r['factor']}: {r['choice']}" for r in rows]
    series = [r["differences"] for r in rows]
    notes = [r["verdict"] for r in rows]
    aa = grid.aa_differences()
    if aa:
        labels.append(f"A/A ({len(aa)} comparisons)")
        series.append([d for comparison in aa for d in comparison])
        rate = grid.aa_rate()
        notes.append(f"{rate.alarms} of {rate.comparisons} fired" if rate else "")
    ax = _axes(ax, figsize=(7.5, 0.42 * len(labels) + 1.2))
    y = list(range(len(labels)))[::-1]
    widest = max((abs(d) for ds in series for d in ds), default=1.0)
    for yi, ds, note in zip(y, series, notes, strict=True):
        ax.plot(ds, [yi] * len(ds), "o", ms=4, color="black", alpha=0.7)
        mean = sum(ds) / len(ds)
        ax.plot([mean, mean], [yi - 0.3, yi + 0.3], color="C3", lw=2)
        if len(ds) >= 2:
            sd = (sum((d - mean) ** 2 for d in ds) / (len(ds) - 1)) ** 0.5
            two_se = 2 * sd / len(ds) ** 0.5
            ax.plot([mean - two_se, mean + two_se], [yi, yi], color="C3", lw=1)
        ax.text(1.02 * widest * 1.15, yi, note, va="center", fontsize=7)
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlim(-1.15 * widest, 1.15 * widest)
    ax.set_xlabel("final held-out loss minus the factor's first choice (nats)")
    decided = [f"{r['choice']} {r['verdict']}" for r in rows if r["verdict"] in ("lower", "higher")]
    describe(
        ax,
        f"Paired differences of final held-out loss, one point per seed ({len(grid.seeds)} "
        f"seeds), for {len(rows)} choices"
        + (f" and {len(aa)} A/A comparisons" if aa else "")
        + ": "
        + (", ".join(decided) if decided else "no choice")
        + " decided by the rule, the others cannot be told apart.",
    )
    return ax
