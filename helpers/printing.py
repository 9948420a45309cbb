"""Printing a computed number so that the stored output is the same on every machine.

Every lesson prints numbers that a notebook stores and nbval compares on another machine. A float
computed in float32 differs between CPUs, vector units and thread counts by a few units in the
last place, more after long reductions or many training steps; printed to four digits it shows
the difference whenever it lies near a rounding boundary. The course's rule (CONTRIBUTING.md,
"Numbers in stored outputs") is:

* exact values (counts, shapes, integers, booleans) print as they are;
* a float that a notebook prints is computed in float64 where it is printed, and goes through
  :func:`fmt`, which states the precision it was computed in;
* a float that has to come from float32 (the point is float32 itself, say) is printed with so
  few digits that its distance to the nearest rounding boundary is larger than the error bound of
  its precision (``tools/float_margins.py`` measures that distance for every printed number).

``fmt(x, 4)`` formats to four significant digits (``fmt(x, decimals=3)`` to three decimals). It
refuses NaN and infinities: a lesson that is about to print one has a bug to show, not a number.
When the environment variable ``HELPERS_FLOAT_LOG`` names a file, every call appends one JSON line
with the printed text, the exact value, the precision it was computed in and the relative error
bound, which ``tools/float_margins.py`` turns into a report.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os

import numpy as np
import torch

__all__ = ["fmt", "ERROR_BOUNDS", "rounding_margin"]

#: Relative error bound, across machines, of a number computed in each precision. float32 results
#: of the course's experiments (reductions over thousands of terms, a few hundred training steps)
#: were seen to move by up to a few parts in 10^6 between kernel paths and thread counts; the
#: bound is a hundred times that. float64 gets the same headroom over its unit roundoff.
ERROR_BOUNDS = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-1}

_PRECISIONS = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    np.dtype("float64"): "float64",
    np.dtype("float32"): "float32",
    np.dtype("float16"): "float16",
}


def _value_and_precision(x, name: str, computed_in) -> tuple[float, str]:
    if isinstance(x, torch.Tensor):
        if x.numel() != 1:
            raise ValueError(
                f"{name} must be a single number; got a tensor of shape {tuple(x.shape)}: "
                "format its elements one at a time"
            )
        precision = _PRECISIONS.get(x.dtype, "exact" if not x.is_floating_point() else None)
        value = float(x.detach().reshape(()).to(torch.float64).item())
    elif isinstance(x, np.generic | np.ndarray):
        x = np.asarray(x)
        if x.size != 1:
            raise ValueError(
                f"{name} must be a single number; got an array of shape {x.shape}: "
                "format its elements one at a time"
            )
        precision = _PRECISIONS.get(x.dtype, "exact" if x.dtype.kind in "iub" else None)
        value = float(x.reshape(()))
    elif isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(
            f"{name} must be a number (int, float, or a one-element tensor or array), "
            f"got {x!r} ({type(x).__name__})"
        )
    else:
        precision = "exact" if isinstance(x, numbers.Integral) else "float64"
        value = float(x)
    if computed_in is not None:
        key = computed_in if isinstance(computed_in, str) else _PRECISIONS.get(computed_in)
        if key not in ERROR_BOUNDS:
            raise ValueError(
                f"computed_in must be one of {sorted(ERROR_BOUNDS)} (or the torch dtype), "
                f"got {computed_in!r}"
            )
        precision = key
    if precision is None:
        raise TypeError(f"{name} has a dtype fmt does not know ({x.dtype}); convert it first")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(
            f"{name} is {value}: a NaN or an infinity is not a figure to print; "
            "find where it came from (a division by zero, an overflow, a diverged run)"
        )
    return value, precision


def _format(value: float, digits: int | None, decimals: int | None) -> str:
    if decimals is not None:
        return f"{value:.{decimals}f}"
    return f"{value:.{digits}g}"


def rounding_margin(value: float, printed: str) -> float:
    """Relative distance from ``value`` to the nearest value that would print differently.

    ``printed`` is the text the value was printed as; the rounding boundary is half a unit of its
    last printed digit away from the printed number. Returns ``(half unit - |value - printed|) /
    |value|`` (``inf`` for an exact zero printed as zero).
    """
    text = printed.strip().lower()
    mantissa, _, exponent = text.partition("e")
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (-decimals) * (10.0 ** int(exponent) if exponent else 1.0)
    distance = 0.5 * unit - abs(value - float(text))
    if value == 0:
        return math.inf if distance > 0 else 0.0
    return distance / abs(value)


def fmt(
    x,
    digits: int | None = 4,
    *,
    decimals: int | None = None,
    computed_in=None,
    name: str = "x",
) -> str:
    """Format one computed number for a stored output (the course's rule, CONTRIBUTING.md).

    ``digits`` significant digits (``f"{x:.{digits}g}"``), or ``decimals`` digits after the point
    (``f"{x:.{decimals}f}"``). ``x`` is a Python number, or a one-element tensor or array whose
    dtype says the precision it was computed in; ``computed_in`` states it for a Python float that
    came out of float32 (``computed_in=torch.float32``). NaN and infinities raise ``ValueError``.
    Used in every lesson; the rule is in CONTRIBUTING.md.
    """
    value, precision = _value_and_precision(x, name, computed_in)
    if decimals is not None:
        if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
            raise ValueError(f"decimals must be a whole number >= 0, got {decimals!r}")
    elif isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
        raise ValueError(f"digits must be a whole number >= 1, got {digits!r}")
    text = _format(value, digits, decimals)
    log = os.environ.get("HELPERS_FLOAT_LOG")
    if log:
        _record(log, text, value, precision)
    return text


_current_cell: dict[str, str | None] = {"source": None}


def _remember_cell(info) -> None:
    _current_cell["source"] = info.raw_cell


def _watch_cells() -> None:
    """When logging, note the source of each cell the kernel runs (nbval runs cells without
    history, so execution counts do not tell cells apart; their sources do)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with the course
        return
    shell = get_ipython()
    if shell is not None and _remember_cell not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", _remember_cell)


def _cell() -> str | None:
    source = _current_cell["source"]
    return None if source is None else hashlib.sha1(source.encode("utf-8")).hexdigest()


def _record(log: str, text: str, value: float, precision: str) -> None:
    entry = {
        "printed": text,
        "value": repr(value),
        "precision": precision,
        "bound": 0.0 if precision == "exact" else ERROR_BOUNDS[precision],
        "cell": _cell(),
    }
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


if os.environ.get("HELPERS_FLOAT_LOG"):
    _watch_cells()
