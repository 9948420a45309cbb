"""Lesson 9 plots of training: a run's curves against the baselines (C9.1), and the side-by-side
grid's curves (C9.3)."""

from __future__ import annotations

from ..pretrain import Pretraining
from ..side_by_side import SideBySide
from ._common import axes as _axes

__all__ = ["plot_losses", "plot_side_by_side"]


def plot_losses(run: Pretraining, ax=None):
    """Lesson 9 (C9.1). The training loss of every step (thin), the held-out loss (dots), and
    the baselines as horizontal lines. Returns the axes."""
    if not isinstance(run, Pretraining):
        raise TypeError(f"run must be a Pretraining, got {type(run).__name__}")
    ax = _axes(ax, figsize=(6.5, 3.2))
    r = run.result
    ax.plot(
        range(1, len(r.train_losses) + 1), r.train_losses, lw=0.8, alpha=0.6, label="training batch"
    )
    ax.plot(r.val_steps, r.val_losses, "o-", ms=4, label="held-out")
    styles = {"uniform": ":", "unigram": "--", "bigram": "-."}
    for name, value in run.baselines.items():
        ax.axhline(value, color="grey", ls=styles[name], lw=1, label=f"{name} baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("next-character loss (nats)")
    ax.legend(fontsize=8, ncol=2)
    return ax


def plot_side_by_side(grid: SideBySide, axes=None):
    """Lesson 9 (C9.3). One panel per factor: the held-out curve of each choice, the mean over
    the seeds (line) and each seed (faint). Returns the array of axes."""
    if not isinstance(grid, SideBySide):
        raise TypeError(f"grid must be a SideBySide, got {type(grid).__name__}")
    factors = list(dict.fromkeys(f for f, _ in grid.runs))
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(
            1, len(factors), figsize=(3.2 * len(factors), 2.8), layout="constrained", sharey=True
        )
    axes = list(axes.flat) if hasattr(axes, "flat") else list(axes)
    if len(axes) < len(factors):
        raise ValueError(f"axes must hold {len(factors)} axes (one per factor), got {len(axes)}")
    for ax, factor in zip(axes, factors, strict=False):
        for (f, choice), runs in grid.runs.items():
            if f != factor:
                continue
            steps = runs[0].val_steps
            mean = [sum(r.val_losses[k] for r in runs) / len(runs) for k in range(len(steps))]
            (line,) = ax.plot(steps, mean, label=choice)
            for r in runs:
                ax.plot(r.val_steps, r.val_losses, color=line.get_color(), alpha=0.25, lw=0.8)
        ax.axhline(grid.baselines["unigram"], color="grey", ls="--", lw=1)
        ax.set_title(factor, fontsize=10)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("held-out loss (nats)")
    return axes
