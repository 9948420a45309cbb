"""What the plot helpers of every lesson share."""

from __future__ import annotations

from matplotlib.axes import Axes


def axes(ax, figsize=(5.0, 3.0)) -> Axes:
    """``ax`` itself, or, when it is None, the axes of a new pyplot figure for a notebook cell
    (shown and closed by the notebook's inline backend)."""
    if ax is None:
        import matplotlib.pyplot as plt  # only when the caller wants a notebook figure

        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax
