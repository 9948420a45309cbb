"""Exercise checks, one module per lesson; each check prints a verdict or raises ExerciseFailed.

Import the lesson's module in its notebook, for example ``from helpers.checks import position``.
"""

from ._core import ExerciseFailed

__all__ = ["ExerciseFailed"]
