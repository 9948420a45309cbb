"""Lessons 5, 8 and 9: the learning rate of each step of the course's training loop
(:class:`helpers.training.TrainingRun`).

    constant   lr_t = lr                                            (lessons 4, 8 and 9)
    warm-up    lr_t = lr * min(1, (t + 1) / warmup_steps)            (lesson 5, C5.7)
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _validate as check

__all__ = ["SCHEDULES", "Schedule"]

#: The learning-rate schedules :class:`Schedule` knows.
SCHEDULES = ("constant", "warmup")


@dataclass(frozen=True)
class Schedule:
    """The learning rate of each step, ``lr_t = lr * s(t)`` for the steps t = 0, 1, 2, ...

    ``Schedule()`` (``kind="constant"``): s(t) = 1, the rate of lessons 4, 8 and 9.
    ``Schedule("warmup", warmup_steps)``: s(t) = min(1, (t + 1) / warmup_steps), a linear ramp
    from ``lr / warmup_steps`` at step 0 to ``lr`` at step ``warmup_steps - 1``, then constant
    (lesson 5, C5.7; :func:`helpers.warmup.warmup_lr`); ``warmup_steps=0`` is the constant rate.
    A new kind is one more name in :data:`SCHEDULES` and one more case in :meth:`lr`.
    """

    kind: str = "constant"
    warmup_steps: int = 0

    def __post_init__(self):
        check.choice("kind", self.kind, SCHEDULES)
        check.positive_int("warmup_steps", self.warmup_steps, minimum=0)
        if self.kind == "constant" and self.warmup_steps != 0:
            raise ValueError(
                f"warmup_steps is for kind='warmup'; a constant schedule has none, got "
                f"warmup_steps={self.warmup_steps}"
            )

    def lr(self, step: int, lr: float) -> float:
        """The learning rate of step ``step`` (0-based) for the base rate ``lr``."""
        if self.kind == "warmup" and self.warmup_steps > 0:
            return lr * min(1.0, (step + 1) / self.warmup_steps)
        return lr
