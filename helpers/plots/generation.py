"""Lesson 9 plots: the next-token distribution, with the tokens top-k keeps shaded."""

from __future__ import annotations

import numpy as np
import torch

from ..figures import describe, listing
from ..printing import fmt
from ._common import PALETTE
from ._common import axes as _axes

__all__ = [
    "KEPT",
    "DROPPED",
    "DROPPED_HATCH",
    "char_label",
    "top_tokens",
    "plot_next_token_distribution",
    "style_bars",
    "describe_distribution",
]

#: Bar colours: a token top-k keeps (it can be drawn), one it drops (probability set to 0); a
#: dropped bar is hatched too, so kept and dropped differ without colour.
KEPT, DROPPED = PALETTE[0], "lightgray"
DROPPED_HATCH = "////"


def char_label(c: str) -> str:
    """A character as a tick label: a space as ``␣``, a newline as ``\\n``, others themselves."""
    return {" ": "␣", "\n": "\\n", "\t": "\\t"}.get(c, c)


def top_tokens(probs: torch.Tensor, n: int) -> torch.Tensor:
    """The ids of the ``n`` most likely tokens of ``probs`` [vocab_size], most likely first (on
    a tie the lowest id first)."""
    if not isinstance(probs, torch.Tensor) or probs.dim() != 1:
        raise TypeError("probs must be a 1-D torch.Tensor [vocab_size]")
    n = min(int(n), probs.shape[0])
    order = torch.argsort(-probs.to(torch.float64), stable=True)  # descending, ties by id
    return order[:n]


def plot_next_token_distribution(
    probs: torch.Tensor, kept: torch.Tensor, labels: list[str], ax=None, n: int = 20
):
    """Lesson 9 (C9.2). Bars of the ``n`` most likely next tokens' probabilities ``probs``
    [vocab_size] (softmax(logits / T)), those in ``kept`` [vocab_size] (bool: top-k keeps them)
    in :data:`KEPT`, the others in :data:`DROPPED`; ``labels`` names each token id.

    Returns ``(bars, ids)``: the bar container (an explorer updates it in place with
    ``set_height`` and ``set_color``) and the ids shown, most likely first."""
    if not isinstance(kept, torch.Tensor) or kept.shape != probs.shape:
        raise TypeError("kept must be a bool tensor of the shape of probs [vocab_size]")
    if len(labels) != probs.shape[0]:
        raise ValueError(f"labels must name all {probs.shape[0]} tokens, got {len(labels)}")
    ax = _axes(ax, (6, 2.4))
    ids = top_tokens(probs, n)
    heights = probs[ids].to(torch.float64).numpy()
    x = np.arange(len(ids))
    bars = ax.bar(x, heights)
    style_bars(bars, [bool(kept[i]) for i in ids.tolist()])
    ax.set_xticks(x, [char_label(labels[i]) for i in ids.tolist()])
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, max(float(heights.max()), 1e-9) * 1.15)
    ax.set_ylabel("p(next character)")
    describe_distribution(ax, probs, kept, labels, ids)
    return bars, ids


def style_bars(bars, kept) -> None:
    """Lesson 9. Colour and hatch each bar: :data:`KEPT` when top-k keeps its token, else
    :data:`DROPPED` and hatched."""
    for bar, keep in zip(bars, kept, strict=True):
        bar.set_facecolor(KEPT if keep else DROPPED)
        bar.set_hatch("" if keep else DROPPED_HATCH)
        bar.set_edgecolor("none" if keep else "0.45")


def describe_distribution(ax, probs, kept, labels, ids, what: str = "") -> str:
    """Lesson 9. Describe the bars of :func:`plot_next_token_distribution` (the three most
    likely characters with their probabilities, how many bars top-k keeps); returns the text."""
    top = [
        f"'{char_label(labels[i])}' {fmt(float(probs[i]), decimals=2)}" for i in ids[:3].tolist()
    ]
    n_kept = int(sum(bool(kept[i]) for i in ids.tolist()))
    text = (
        f"Probability of each of the {len(ids)} most likely next characters{what}, most likely "
        f"first: {listing(top)}; "
        + (
            "every bar is kept (solid)"
            if n_kept == len(ids)
            else f"top-k keeps the first {n_kept} (solid), the other {len(ids) - n_kept} are "
            "dropped (grey, hatched)"
        )
        + "."
    )
    describe(ax, text)
    return text
