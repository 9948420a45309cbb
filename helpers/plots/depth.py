"""Lesson 7 plots: parameter count against depth, and the residual stream block by block.

Each helper draws on the ``ax`` it is given (or on a new pyplot figure when ``ax`` is None, for a
notebook cell) and returns the artists it made, so the explorer can update them in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..figures import describe, trend
from ._common import PALETTE
from ._common import axes as _axes

__all__ = ["plot_parameter_count", "plot_residual_stream"]


def _as_array(name: str, values) -> np.ndarray:
    try:
        arr = np.asarray(
            values.detach().cpu() if hasattr(values, "detach") else values, dtype=float
        )
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a sequence of numbers, got {type(values).__name__}"
        ) from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D sequence of numbers, got shape {arr.shape}"
        )
    return arr


def plot_parameter_count(
    depths: Sequence[int],
    counts: Sequence[int],
    shared_counts: Sequence[int] | None = None,
    ax=None,
) -> dict:
    """Lesson 7 (C7.2). ``count(L) = base + L * per_block`` as a line of markers over ``depths``.

    ``shared_counts`` (optional): the counts of a weight-shared stack at the same depths (flat).
    Returns ``{"independent": Line2D,
    "shared": Line2D or None, "marker": Line2D}`` (``marker`` highlights one depth; empty at first).
    """
    x = _as_array("depths", depths)
    y = _as_array("counts", counts)
    if x.shape != y.shape:
        raise ValueError(f"depths and counts must have the same length, got {x.size} and {y.size}")
    ax = _axes(ax)
    (independent,) = ax.plot(x, y, "o-", color=PALETTE[0], ms=4, label="own weights per block")
    shared = None
    if shared_counts is not None:
        s = _as_array("shared_counts", shared_counts)
        if s.shape != x.shape:
            raise ValueError("shared_counts must have one value per depth")
        (shared,) = ax.plot(x, s, "s--", color=PALETTE[1], ms=3, label="one block reused (shared)")
    (marker,) = ax.plot([], [], "o", color="k", ms=8, mfc="none")
    ax.set_xlabel("depth L (blocks)")
    ax.set_ylabel("parameters")
    ax.set_title("parameter count vs depth")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    describe(
        ax,
        f"Parameters against depth L = {int(x[0])} to {int(x[-1])}: own weights per block "
        f"(circles) {trend(y)} from {int(y[0]):,} to {int(y[-1]):,}"
        + (
            f", one block reused (squares, dashed) {trend(s)} at {int(s[-1]):,}"
            if shared is not None
            else ""
        )
        + ".",
    )
    return {"independent": independent, "shared": shared, "marker": marker}


def plot_residual_stream(contribution, stream, ax=None) -> dict:
    """Lesson 7 (C7.3). Per block l: ``mean ||h_l - h_{l-1}||`` (triangles) and ``mean ||h_l||`` (circles).

    ``contribution`` has L values (blocks 1..L), ``stream`` L+1 values (h_0..h_L). Returns
    ``{"contribution": Line2D, "stream": Line2D}``, both drawn against the block index.
    """
    c = _as_array("contribution", contribution)
    s = _as_array("stream", stream)
    if s.size != c.size + 1:
        raise ValueError(
            f"stream must have one value more than contribution (h_0..h_L), got {s.size} and {c.size}"
        )
    ax = _axes(ax)
    (stream_line,) = ax.plot(
        np.arange(s.size), s, "o-", color=PALETTE[0], ms=4, label="stream ||h_l||"
    )
    (contrib_line,) = ax.plot(
        np.arange(1, s.size),
        c,
        "^-",
        color=PALETTE[1],
        ms=4,
        label="block's contribution ||h_l - h_(l-1)||",
    )
    ax.set_xlabel("block l (0 = embeddings)")
    ax.set_ylabel("mean norm per token")
    ax.set_title("the residual stream")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    growing = "grows with every block" if np.all(np.diff(s) > 0) else trend(s)
    describe(
        ax,
        f"Mean norm per token against block 0 to {s.size - 1}: the stream ‖h_l‖ (circles) "
        f"{growing} and each block's contribution (triangles) {trend(c)}.",
    )
    return {"contribution": contrib_line, "stream": stream_line}
