"""Lesson 4 pictures of C4.7 (and 04b's comparison of schemes): the held-out loss at each position
of windows longer than the training length.

Draws on the ``ax`` it is given, or on a new pyplot figure when ``ax`` is None (for a notebook
cell, which then calls ``plt.show()``), describes what it drew (``helpers.figures.describe``,
computed from the data) and returns the artists it made.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as check
from ..figures import describe
from ..printing import fmt
from ._common import PALETTE, STYLES
from ._common import axes as _axes

__all__ = ["plot_loss_by_position"]

#: At most this many curve sets: one colour of the course's palette and one line style each, so
#: that no two are told apart by colour alone.
MAX_SETS = 4


def _curves(name, runs) -> np.ndarray:
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__len__") or len(runs) == 0:
        raise TypeError(
            f"curves[{name!r}] must be a non-empty list of per-position losses (one list per "
            f"seed), got {runs!r}"
        )
    try:
        table = np.array([[float(v) for v in run] for run in runs], dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"curves[{name!r}] must hold lists of numbers (one loss per position), got {runs!r}"
        ) from None
    if table.ndim != 2 or table.shape[1] < 2:
        raise ValueError(
            f"curves[{name!r}] must be lists of the same length >= 2 (one loss per position)"
        )
    return table


def plot_loss_by_position(curves: dict, train_len: int, ax=None):
    """Lesson 4 (C4.7). The held-out loss at each position of long windows, for models trained on
    windows of ``train_len`` tokens. ``curves`` maps a label (a position scheme) to one list of
    per-position losses per seed (``helpers.length.loss_by_position``); each seed is a thin line,
    the mean over seeds a thick one, a dotted vertical line marks ``train_len``. Returns the list of
    the mean lines (Line2D), in the order of ``curves``.
    """
    if not isinstance(curves, dict) or not curves:
        raise TypeError(
            "curves must be a dict {label: [per-position losses, one list per seed]}, "
            f"got {type(curves).__name__}"
        )
    if len(curves) > MAX_SETS:
        raise ValueError(f"curves may hold at most {MAX_SETS} labels, got {len(curves)}")
    tables = {str(name): _curves(name, runs) for name, runs in curves.items()}
    lengths = {t.shape[1] for t in tables.values()}
    if len(lengths) != 1:
        raise ValueError(f"every curve must cover the same positions, got lengths {lengths}")
    n = lengths.pop()
    train_len = check.positive_int("train_len", train_len, minimum=1)
    if train_len >= n:
        raise ValueError(f"train_len must be below the number of positions {n}, got {train_len}")
    ax = _axes(ax, (7, 3.0))
    positions = np.arange(n)
    means, parts = [], []
    for i, (name, table) in enumerate(tables.items()):
        colour, style = PALETTE[i], STYLES[i]["ls"]
        for run in table:
            ax.plot(positions, run, color=colour, ls=style, lw=0.5, alpha=0.35)
        mean = table.mean(axis=0)  # [n]
        (line,) = ax.plot(positions, mean, color=colour, ls=style, lw=2.0, label=name)
        means.append(line)
        seen, unseen = mean[:train_len].mean(), mean[train_len:].mean()
        word = "higher" if unseen > seen else "lower" if unseen < seen else "the same"
        parts.append(f"{name} {fmt(seen, 3)} then {fmt(unseen, 3)} ({word})")
    ax.axvline(train_len - 0.5, color="gray", lw=1.0, ls=":")
    ax.set_xlabel("position in the window")
    ax.set_ylabel("held-out loss (nats)")
    ax.legend(loc="lower right", fontsize="small")
    seeds = {t.shape[0] for t in tables.values()}
    seeds_text = f"{seeds.pop()} seeds" if len(seeds) == 1 else "several seeds"
    describe(
        ax,
        f"Held-out loss at each position 0 to {n - 1} of long windows, for models trained on "
        f"{train_len} tokens ({seeds_text} thin, their mean thick, a dotted line at position "
        f"{train_len}); the mean loss at positions 0 to {train_len - 1}, then at {train_len} to "
        f"{n - 1}: " + "; ".join(parts) + ".",
    )
    return means
