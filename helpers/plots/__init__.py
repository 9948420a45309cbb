"""Named plot helpers, one module per lesson (``helpers.plots.position`` for lesson 4 ...).

Each helper draws on an ``ax`` it is given (or makes a pyplot figure when none is given, for a
notebook cell) and returns the artists it made, so explorers can update them in place. Each
describes what it drew (``helpers.figures.describe``) and uses :data:`PALETTE` with a line style
per series (:func:`series_style`), so no figure relies on colour alone.
"""

from ._common import PALETTE, PURPLE, STYLES, series_style

__all__ = ["PALETTE", "PURPLE", "STYLES", "series_style"]
