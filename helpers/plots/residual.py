"""Lesson 5 pictures: per-layer figures (gradient norms, activation scales) of a deep stack, and
the "which curve is post-norm?" puzzle of exercise 3.

Each function draws on the ``ax`` it is given, or on a new pyplot figure when ``ax`` is None (for a
notebook cell, which then calls ``plt.show()``), and returns the artists it made so that the lesson
5 explorer can update them in place.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from ..figures import describe, listing, ranking, trend
from ._common import PALETTE, PURPLE
from ._common import axes as _axes

__all__ = ["plot_per_layer", "plot_mystery_curves"]

#: One marker and line style per curve, so no curve is told apart by its colour alone.
_STYLES = [
    dict(marker="o", ls="-"),
    dict(marker="s", ls="--"),
    dict(marker="^", ls="-."),
    dict(marker="D", ls=":"),
    dict(marker="v", ls=(0, (5, 1, 1, 1, 1, 1))),
]


def _values(name: str, values) -> np.ndarray:
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
        raise TypeError(
            f"{name} must be a sequence of numbers (one per layer), got {type(values).__name__}"
        )
    if len(values) == 0:
        raise ValueError(f"{name} must hold at least one number (one per layer), got none")
    if not all(isinstance(v, numbers.Real) and math.isfinite(v) for v in values):
        raise ValueError(f"{name} must hold finite numbers, got {list(values)!r}")
    return np.asarray(values, dtype=float)


def plot_per_layer(
    curves: Mapping[str, Sequence[float]],
    ax=None,
    log: bool = True,
    ylabel: str = "‖∂L/∂W2‖",
    first_layer: int = 1,
    title: str | None = None,
):
    """Lesson 5 (C5.2, C5.3, C5.6). One line per named curve: value against layer index.

    ``curves`` maps a label to one number per layer; layers are numbered from ``first_layer``
    (1 for per-block gradients, 0 for activation scales h_0 .. h_L). ``log=True`` uses a log
    y-axis, so that a factor of 10 looks the same anywhere. Returns the list of Line2D artists.
    """
    if not isinstance(curves, Mapping) or not curves:
        raise TypeError("curves must be a non-empty dict {label: one number per layer}")
    ax = _axes(ax, (6, 3))
    lines = []
    trends, finals = [], {}
    for i, ((label, values), style) in enumerate(
        zip(curves.items(), _STYLES * len(curves), strict=False)
    ):
        y = _values(f"curves[{label!r}]", values)
        x = np.arange(first_layer, first_layer + len(y))
        color = PALETTE[i % len(PALETTE)]
        (line,) = ax.plot(x, y, lw=1.5, ms=4, label=str(label), color=color, **style)
        lines.append(line)
        trends.append(f"'{label}' {trend(y)}")
        finals[label] = y[-1]
    last = first_layer + max(len(_values("curves", v)) for v in curves.values()) - 1
    describe(
        ax,
        f"{ylabel} against layer {first_layer} to {last}"
        + (" on a log scale" if log else "")
        + f": {listing(trends)}"
        + (f"; at the last layer {ranking(finals, lowest=False)}" if len(curves) > 1 else "")
        + ".",
    )
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small")
    return lines


def plot_mystery_curves(curve_a: Sequence[float], curve_b: Sequence[float], ax=None):
    """Lesson 5, exercise 3. Two per-layer gradient curves, drawn unlabelled as "curve A" and
    "curve B" in the order given (this module does not know which placement either shows).

    Returns the two Line2D artists, A first.
    """
    lines = plot_per_layer(
        {"curve A": curve_a, "curve B": curve_b},
        ax=ax,
        log=False,
        title="Two models at initialization: which one is post-norm?",
    )
    # colours used by no other plot of the lesson, so that they give nothing away
    for line, color in zip(lines, (PURPLE, PALETTE[3]), strict=True):
        line.set_color(color)
    lines[0].axes.legend(fontsize="small")
    return lines
