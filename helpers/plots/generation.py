"""Lesson 9 plots: the next-token distribution, with the tokens top-k keeps shaded."""

from __future__ import annotations

import numpy as np
import torch

from ._common import axes as _axes

__all__ = ["KEPT", "DROPPED", "char_label", "top_tokens", "plot_next_token_distribution"]

#: Bar colours: a token top-k keeps (it can be drawn), one it drops (probability set to 0).
KEPT, DROPPED = "tab:blue", "lightgray"


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
    colors = [KEPT if kept[i] else DROPPED for i in ids.tolist()]
    bars = ax.bar(x, heights, color=colors, edgecolor="none")
    ax.set_xticks(x, [char_label(labels[i]) for i in ids.tolist()])
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, max(float(heights.max()), 1e-9) * 1.15)
    ax.set_ylabel("p(next character)")
    return bars, ids
