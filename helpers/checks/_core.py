"""The machinery every exercise check shares.

A check prints a one-line verdict that starts with a tick when the answer is right, and raises
:class:`ExerciseFailed` when it is not. ``ExerciseFailed`` is an ``AssertionError`` (so nbgrader's
autograder, which looks for an error in the cell, takes the points away) that IPython displays as
its message alone, without a traceback (``_render_traceback_``). Whatever the student's code does
(return None, the wrong shape or dtype, NaN, raise), the check catches it and says what is wrong.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

__all__ = [
    "ExerciseFailed",
    "passed",
    "fail",
    "call",
    "call_described",
    "as_tensor",
    "expect_close",
    "as_number",
]


class ExerciseFailed(AssertionError):
    """A wrong answer to an exercise; displays as one red line naming the problem."""

    def __init__(self, exercise: str, problem: str):
        self.exercise = exercise
        self.problem = " ".join(str(problem).split())  # one line, even with a tensor's repr in it
        super().__init__(f"{exercise}: {self.problem}")

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"\x1b[1;31m✗ {self.exercise} is not right yet:\x1b[0m {self.problem}"]


def passed(exercise: str, message: str = "") -> None:
    """Print the verdict for a right answer."""
    print(f"✓ {exercise} passed" + (f": {message}" if message else "."))


def fail(exercise: str, problem: str):
    raise ExerciseFailed(exercise, problem)


def call(exercise: str, fn, *args, name: str = "your function", **kwargs):
    """Call the student's ``fn``; turn anything that goes wrong into a verdict."""
    return call_described(exercise, fn, args, kwargs, name=name)


def call_described(
    exercise: str,
    fn,
    args=(),
    kwargs=None,
    *,
    name: str = "your function",
    shown: str | None = None,
):
    """:func:`call` with the arguments given as a tuple and a dict; ``shown`` names them in a
    verdict where their repr would be too long (a model's repr takes many lines)."""
    kwargs = kwargs or {}
    if fn is None:
        fail(
            exercise,
            f"{name} is None: write it in the exercise cell above, run that cell, then this one.",
        )
    if not callable(fn):
        fail(exercise, f"{name} should be a function, got a {type(fn).__name__}.")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(
            exercise,
            f"{name} is not implemented yet (it raises NotImplementedError): replace that line.",
        )
    except ExerciseFailed:
        raise
    except Exception as e:  # noqa: BLE001 - every student error becomes a verdict
        if shown is None:
            shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
            shown = " ".join(shown.split())  # one line: a tensor's repr spans several
            if len(shown) > 80:
                shown = shown[:77] + "..."
        fail(exercise, f"calling {name}({shown}) raised {type(e).__name__}: {e}")


def as_tensor(
    exercise: str, value, name: str = "your answer", shape=None, layout: str = ""
) -> torch.Tensor:
    """Check the student's value is a finite floating tensor (numpy arrays are accepted) of ``shape``."""
    if value is None:
        fail(exercise, f"{name} is None: did you forget to `return` it?")
    if isinstance(value, np.ndarray):
        # a copy where torch.from_numpy refuses the layout (negative strides: np.flip, a[::-1]),
        # as the grade's recorder takes it
        value = torch.from_numpy(value if value.flags.c_contiguous else np.ascontiguousarray(value))
    if not isinstance(value, torch.Tensor):
        fail(exercise, f"{name} should be a torch.Tensor, got a {type(value).__name__}.")
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(
            exercise,
            f"{name} has shape {list(value.shape)}, expected {list(shape)} {layout}".rstrip() + ".",
        )
    if not (value.is_floating_point() or value.is_complex()):
        fail(
            exercise,
            f"{name} has dtype {value.dtype}; it should hold floating-point numbers (torch.float32).",
        )
    if value.numel() and not torch.isfinite(value).all():
        bad = "NaN" if torch.isnan(value).any() else "infinite values"
        fail(exercise, f"{name} contains {bad}.")
    return value


def expect_close(
    exercise: str,
    got: torch.Tensor,
    want: torch.Tensor,
    name: str = "your answer",
    atol: float = 1e-4,
    rtol: float = 1e-4,
) -> None:
    """Fail with the place and size of the largest difference when ``got`` != ``want``."""
    got64, want64 = got.detach().to(torch.float64), want.detach().to(torch.float64)
    if torch.allclose(got64, want64, atol=atol, rtol=rtol):
        return
    diff = (got64 - want64).abs()
    where = tuple(int(i) for i in np.unravel_index(int(diff.argmax()), tuple(diff.shape)))
    fail(
        exercise,
        f"{name} differs from the expected values; the largest difference is {float(diff.max()):.3g} at index "
        f"{list(where)}: got {float(got64[where]):.6g}, expected {float(want64[where]):.6g}.",
    )


def as_number(exercise: str, value, name: str = "your answer", integer: bool = False):
    """Check the student's value is a (finite) number; ``integer`` requires a whole number."""
    if value is None:
        fail(exercise, f"{name} is None: set it to a number.")
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(exercise, f"{name} should be a number, got a {type(value).__name__}.")
    if not math.isfinite(value):
        fail(exercise, f"{name} is {value}, not a finite number.")
    if integer:
        if isinstance(value, float) and not value.is_integer():
            fail(exercise, f"{name} should be a whole number, got {value}.")
        value = int(value)
    return value
