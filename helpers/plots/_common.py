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


#: The course's line and bar colours, in order (Okabe and Ito's colour-universal-design set:
#: blue, orange, black, sky blue, vermillion): every pair stays at least 15 apart in CAM02-UCS
#: under simulated deuteranopia and protanopia (tests/test_figure_colours.py). Lines of one
#: figure also differ in style or marker (:data:`STYLES`), so none is told apart by colour alone.
PALETTE = ("#0072B2", "#E69F00", "#000000", "#56B4E9", "#D55E00")
#: A sixth colour for a plot that must not reuse the lesson's other colours (reddish purple).
PURPLE = "#CC79A7"
#: Line style and marker of the i-th line of a figure, with :data:`PALETTE`'s i-th colour.
STYLES = (
    {"ls": "-", "marker": "o"},
    {"ls": "--", "marker": "s"},
    {"ls": "-.", "marker": "^"},
    {"ls": ":", "marker": "D"},
    {"ls": (0, (5, 1, 1, 1, 1, 1)), "marker": "v"},
)


def series_style(i: int, markers: bool = True) -> dict:
    """Colour, line style (and marker) of the ``i``-th series of a figure (all lessons)."""
    style = dict(STYLES[i % len(STYLES)], color=PALETTE[i % len(PALETTE)])
    if not markers:
        style.pop("marker")
    return style
