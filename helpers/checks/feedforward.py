"""Lesson 6 exercise checks: count the block's parameters, write its forward pass, find where
ReLU and GELU differ most, and find the "feed-forward" blocks that mix positions (a transfer
exercise: C6.4's experiment applied to code the student has not seen run). Each prints
``✓ ...`` or raises :class:`ExerciseFailed`.

These are the visible checks, for instant feedback. Grades come from the notebook's hidden tests
(``helpers.grading.record``), judged outside the student's kernel; nothing here holds an answer:
each check tests properties of the answer or compares it with a computation made inline, and no
verdict shows an expected value."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..attention import scaled_dot_product_attention
from ..feedforward import FeedForward, gelu, relu
from ..grading import CallNames
from ..params import count_parameters
from ..printing import fmt
from ._core import (
    ExerciseFailed,
    as_number,
    as_tensor,
    call,
    call_described,
    fail,
    passed,
)

__all__ = [
    "check_parameter_count",
    "check_ffn_forward",
    "check_most_different_input",
    "check_mixes_positions",
]


# Torch functions an answer must not call, as TorchFunctionMode names them (the grader refuses the
# same: tools/grading/spec.py). Exercise 1 counts from the shapes, so it builds no tensor or
# block and reads no size; exercise 2 writes the formula with @ and +, not a library layer.
_BUILT = tuple(
    f"{name}.{overload}" if overload else name
    for name, overloads in (
        ("empty", "memory_format"),
        ("empty_strided", "default"),
        ("zeros", "default"),
        ("ones", "default"),
        ("full", "default"),
        ("rand", "default"),
        ("randn", "default"),
        ("tensor", ""),
        ("as_tensor", ""),
        ("kaiming_uniform_", ""),
        ("numel", "default"),
        ("nelement", ""),
        ("size", "int default"),
        ("__get__", ""),
    )
    for overload in ("", *overloads.split())
)
_LIBRARY_LINEAR = ("linear", "linear.default", "addmm", "addmm.default")
#: What the grader forbids per exercise (tools/grading/spec.py reads it from here).
FORBIDDEN = {"l6_ex1": _BUILT, "l6_ex2": _LIBRARY_LINEAR}

# (d_model, d_ff) pairs the student's formula is tried on; the first is the paper's.
_SIZES = [(512, 2048), (8, 32), (10, 7), (3, 1)]


def check_parameter_count(count_ffn_parameters) -> None:
    """Exercise 1. ``count_ffn_parameters(d_model, d_ff)`` must return the number of parameters of
    the ReLU block FFN(x) = max(0, x W1 + b1) W2 + b2, biases included, for any sizes, from the
    shapes (building the block and counting its parameters is refused, here and when graded)."""
    ex = "Exercise 1 (count the parameters)"
    if callable(count_ffn_parameters):
        names = CallNames()
        try:
            with names:
                count_ffn_parameters(8, 32)
        except Exception:  # noqa: BLE001 - a probe: call() below names the student's error
            pass
        if names.names & set(_BUILT):
            fail(
                ex,
                "count_ffn_parameters builds tensors or a block and counts them: the exercise "
                "asks for the count from the shapes (a formula); a graded answer that builds "
                "them scores 0.",
            )
    for d_model, d_ff in _SIZES:
        got = call(ex, count_ffn_parameters, d_model, d_ff, name="count_ffn_parameters")
        got = as_number(ex, got, name=f"count_ffn_parameters({d_model}, {d_ff})", integer=True)
        want = count_parameters(FeedForward(d_model, d_ff, "relu"))
        if got == want:
            continue
        weights = 2 * d_model * d_ff
        hint = ""
        if got == weights:
            hint = (
                " That is the two weight matrices alone: the biases b1 and b2 are parameters too."
            )
        elif got in (weights + d_ff, weights + d_model):
            hint = " One bias is missing: b1 has d_ff entries and b2 has d_model."
        elif got == d_model * d_ff + d_ff + d_model:
            hint = " Only one matrix is counted: W1 and W2 both hold d_model x d_ff numbers."
        elif got == 2 * (d_model + d_ff):
            hint = " Each matrix holds d_model x d_ff numbers (a product), not d_model + d_ff."
        fail(
            ex,
            f"for d_model={d_model}, d_ff={d_ff} you return {got:,}; that is not the count.{hint}",
        )
    passed(ex, f"your count is right for all {len(_SIZES)} sizes tried, 512 -> 2048 among them.")


def _weights(d_model: int = 6, d_ff: int = 24, n: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_model, generator=g)  # [n, d_model]
    w1 = torch.randn(d_model, d_ff, generator=g) / math.sqrt(d_model)  # [d_model, d_ff]
    b1 = torch.randn(d_ff, generator=g) * 0.5  # [d_ff]
    w2 = torch.randn(d_ff, d_model, generator=g) / math.sqrt(d_ff)  # [d_ff, d_model]
    b2 = torch.randn(d_model, generator=g) * 0.5  # [d_model]
    return x, w1, b1, w2, b2


def _shapes(x, w1, b1, w2, b2) -> str:
    return (
        f"x {list(x.shape)}, W1 {list(w1.shape)}, b1 {list(b1.shape)}, "
        f"W2 {list(w2.shape)}, b2 {list(b2.shape)}"
    )


# Which weights a student's code transposes, tried by handing it the transposed weights: code
# that computes x @ W1.T gets W1.T and so computes x @ W1 (None: the code transposes none).
_ORIENTATIONS = [("W1", (True, False)), ("W2", (False, True)), ("W1 and W2", (True, True))]


def _transposed_weights(ffn_forward, x, w1, b1, w2, b2, want) -> str | None:
    """The weights ``ffn_forward`` uses transposed, if handing it their transposes makes it right."""
    for label, (t1, t2) in _ORIENTATIONS:
        try:
            got = ffn_forward(x, w1.T if t1 else w1, b1, w2.T if t2 else w2, b2)
        except Exception:  # noqa: BLE001 - a probe: the student's code fails this way too
            continue
        if (
            isinstance(got, torch.Tensor)
            and got.shape == want.shape
            and got.is_floating_point()
            and torch.allclose(got.to(want.dtype), want, atol=1e-4, rtol=1e-4)
        ):
            return label
    return None


def _orientation_verdict(label: str, d_model: int, d_ff: int) -> str:
    one = label in ("W1", "W2")
    layout = {
        "W1": f"W1 is [d_model, d_ff] = [{d_model}, {d_ff}]",
        "W2": f"W2 is [d_ff, d_model] = [{d_ff}, {d_model}]",
    }
    given = layout[label] if one else f"{layout['W1']} and {layout['W2']}"
    return (
        f"your code uses {label} transposed ({label.replace(' and ', '.T and ')}.T). The weights are "
        f"given in the formula's layout: {given}, so x @ W1 is [n, d_ff] and (...) @ W2 is "
        "[n, d_model] with no .T; the transpose belongs to nn.Linear's stored weights "
        "(ffn.w1.weight is W1.T), not to the formula's W1 and W2."
    )


def _calls_linear(ffn_forward) -> bool:
    """Whether ``ffn_forward`` calls ``F.linear`` (``nn.Linear``, ``FeedForward``) or ``addmm``."""
    x, w1, b1, w2, b2 = _weights(4, 9, 2, 3)
    names = CallNames()
    try:
        with names:
            ffn_forward(x, w1, b1, w2, b2)
    except Exception:  # noqa: BLE001 - a probe: the verdicts below name the student's error
        pass
    return bool(names.names & set(_LIBRARY_LINEAR))


def check_ffn_forward(ffn_forward) -> None:
    """Exercise 2. ``ffn_forward(x, W1, b1, W2, b2)`` with x [n, d_model], W1 [d_model, d_ff],
    b1 [d_ff], W2 [d_ff, d_model], b2 [d_model] must return max(0, x W1 + b1) W2 + b2,
    [n, d_model], with ``@``, ``+`` and ``torch.clamp`` (or ``torch.relu``): an answer that calls
    ``F.linear`` (so ``nn.Linear`` or ``FeedForward``) is refused, here and when graded.

    A weight used transposed (``x @ W1.T``, nn.Linear's layout) is named, whether it raises a
    shape error (d_model != d_ff) or silently computes something else (d_model == d_ff)."""
    ex = "Exercise 2 (the block's forward pass)"
    if callable(ffn_forward) and _calls_linear(ffn_forward):
        fail(
            ex,
            "ffn_forward calls F.linear (nn.Linear or FeedForward do) or addmm: the exercise asks "
            "for the formula itself, with @, + and torch.clamp; a graded answer that calls them "
            "scores 0.",
        )
    for d_model, d_ff, n, seed in [(6, 24, 5, 0), (4, 7, 1, 1), (5, 5, 3, 2)]:
        x, w1, b1, w2, b2 = _weights(d_model, d_ff, n, seed)
        want = torch.clamp(x @ w1 + b1, min=0) @ w2 + b2  # [n, d_model]
        if callable(ffn_forward):
            try:
                ffn_forward(x, w1, b1, w2, b2)
            except (NotImplementedError, ExerciseFailed):
                pass  # call() below gives the verdict
            except Exception as e:  # noqa: BLE001 - every student error becomes a verdict
                label = _transposed_weights(ffn_forward, x, w1, b1, w2, b2, want)
                if label is not None:
                    fail(ex, _orientation_verdict(label, d_model, d_ff))
                hint = ""
                if "shape" in str(e) or "size" in str(e):
                    hint = (
                        " Check each product against the shapes: x W1 is [n, d_model] x "
                        "[d_model, d_ff] and the hidden layer times W2 is [n, d_ff] x [d_ff, d_model]."
                    )
                fail(
                    ex,
                    f"calling ffn_forward({_shapes(x, w1, b1, w2, b2)}) raised "
                    f"{type(e).__name__}: {e}.{hint}",
                )
        got = call(ex, ffn_forward, x, w1, b1, w2, b2, name="ffn_forward")
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (n, d_ff) and d_ff != d_model:
            fail(
                ex,
                f"ffn_forward returns shape {list(got.shape)} = [n, d_ff]: that is the hidden layer. "
                "Project it back down with W2 and add b2, to get [n, d_model].",
            )
        got = as_tensor(
            ex,
            got,
            name="ffn_forward(x, W1, b1, W2, b2)",
            shape=(n, d_model),
            layout="[n, d_model]",
        )
        if got.dtype != x.dtype:
            fail(ex, f"ffn_forward returns dtype {got.dtype}; x is {x.dtype}, keep it.")
        mistakes = {
            "there is no nonlinearity: max(0, .) must be applied to x W1 + b1": (x @ w1 + b1) @ w2
            + b2,
            "the ReLU is applied after W2; it belongs between the two layers": torch.clamp(
                (x @ w1 + b1) @ w2 + b2, min=0
            ),
            "b2 is missing (added after the second matrix)": torch.clamp(x @ w1 + b1, min=0) @ w2,
            "b1 is missing (added before the ReLU)": torch.clamp(x @ w1, min=0) @ w2 + b2,
            "b1 is added after the ReLU; it goes inside: max(0, x W1 + b1)": (
                torch.clamp(x @ w1, min=0) + b1
            )
            @ w2
            + b2,
        }
        if d_model == d_ff:  # square weights: a transpose raises nothing, it computes another block
            for label, (t1, t2) in _ORIENTATIONS:
                m1, m2 = (w1.T if t1 else w1), (w2.T if t2 else w2)
                mistakes[_orientation_verdict(label, d_model, d_ff)[:-1]] = (
                    torch.clamp(x @ m1 + b1, min=0) @ m2 + b2
                )
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            for problem, wrong in mistakes.items():
                if torch.allclose(got, wrong, atol=1e-4, rtol=1e-4):
                    fail(ex, problem + ".")
        close = torch.isclose(got.detach().to(torch.float64), want.to(torch.float64), 1e-4, 1e-4)
        if not close.all():  # how many entries differ, never what they should be
            fail(
                ex,
                f"ffn_forward(x, W1, b1, W2, b2) is not max(0, x W1 + b1) W2 + b2: "
                f"{int((~close).sum())} of its {close.numel()} entries differ (for x "
                f"{list(x.shape)}, d_ff = {d_ff}).",
            )
    passed(ex, "max(0, x W1 + b1) W2 + b2, [n, d_model] -> [n, d_ff] -> [n, d_model].")


_WITHIN = 5e-3  # the tolerance the exercise states: a grid step of 0.01 or finer lands this close


def _gap(x: float) -> float:
    t = torch.tensor(x, dtype=torch.float64)
    return float((relu(t) - gelu(t)).abs())


def _coarse_grids(x: float, peak: float, most: int = 20001) -> list[int]:
    """The sizes N <= ``most`` of the grids ``linspace(-4, 4, N)`` that have ``x`` as their best point.

    ``peak`` is where the gap peaks (the caller computes it). Only grids whose step is at least
    x's distance to the peak can: with a smaller step, the next grid point toward the peak lies
    between x and the peak, where the gap is larger (it rises monotonically up to the peak on
    each side)."""
    off = abs(abs(x) - peak)
    sizes = np.arange(2, min(most, int(8.0 / max(off, 1e-12)) + 1) + 1)  # [candidates]
    steps = 8.0 / (sizes - 1)
    on_grid = np.abs(-4.0 + np.round((x + 4.0) / steps) * steps - x) < 1e-9
    found = []
    for points in sizes[on_grid].tolist():
        grid = torch.linspace(-4, 4, points, dtype=torch.float64)  # [points]
        best = float(grid[(relu(grid) - gelu(grid)).abs().argmax()])
        if abs(abs(best) - abs(x)) < 1e-9:
            found.append(points)
    return found


def check_most_different_input(most_different_input) -> None:
    """Exercise 3. ``most_different_input()`` must return an input x (a number in [-4, 4]) where
    |ReLU(x) - GELU(x)| is largest, to within 0.005, as the exercise asks.

    The verdict never shows where the peak is: it says whether x is within 0.005 of a maximiser
    found on a fine grid here, and otherwise what went wrong (an index or a difference returned
    instead of x, a search that went astray, or a grid too coarse for a curve this flat, with the
    grid's size and step). Graded by hidden tests."""
    ex = "Exercise 3 (where ReLU and GELU differ most)"
    got = call(ex, most_different_input, name="most_different_input")
    x = as_number(ex, got, name="most_different_input()")
    if not -4.0 <= x <= 4.0:
        if float(x).is_integer():
            fail(
                ex,
                f"you return {x:g}, outside [-4, 4]: is that the index of the largest "
                "difference in your grid? Return the input x at that index.",
            )
        fail(ex, f"you return x = {x:g}, outside the range [-4, 4] the exercise asks about.")
    fine = torch.linspace(-4, 4, 80001, dtype=torch.float64)  # [80001], step 1e-4
    gaps = (relu(fine) - gelu(fine)).abs()  # [80001]
    peak, best = abs(float(fine[gaps.argmax()])), float(gaps.max())
    if abs(x - best) < 1e-3 and abs(_gap(x) - best) > 1e-3:
        fail(
            ex,
            f"you return {x:.4g}: that is the size of the largest difference, not the input x "
            "where it happens.",
        )
    if abs(abs(x) - peak) <= _WITHIN:
        passed(
            ex,
            f"|ReLU(x) - GELU(x)| = {fmt(_gap(x), decimals=4)} at your x = {fmt(x, decimals=3)}, "
            f"its largest value on [-4, 4]; and at x = {fmt(-x, decimals=3)} too "
            "(relu(x) - gelu(x) is an even function), so either is right.",
        )
        return
    if abs(abs(x) - peak) > 0.1 or _gap(x) < 0.9 * best:  # the search itself went wrong
        fail(
            ex,
            f"at x = {x:.4g}, |ReLU(x) - GELU(x)| = {fmt(_gap(x), decimals=5)}, but it is larger "
            "elsewhere in [-4, 4]: take the absolute difference |relu - gelu| on a fine grid and "
            "return the grid point at its argmax.",
        )
    # near the peak in value, not in place: the curve is flat there and a coarse grid stops short
    grids = _coarse_grids(x, peak)[:3]
    grid = ""
    if grids:
        sizes = " and ".join(f"{p}-point" for p in grids)
        steps = " and ".join(f"{8 / (p - 1):.4g}" for p in grids)
        grid = (
            f" {x:g} is the best point of the {sizes} grid{'s' if len(grids) > 1 else ''} on "
            f"[-4, 4] (step {steps}): a grid lands only within half a step of the peak."
        )
    fail(
        ex,
        f"x = {x:.4g} is near the peak but not within 0.005 of it: |ReLU(x) - GELU(x)| = "
        f"{fmt(_gap(x), decimals=5)} there, and the curve is so flat near its peak that a coarse "
        f"grid stops short.{grid} Use a step of 0.01 or finer to land within 0.005 of it.",
    )


# --- Exercise 4: which of these "feed-forward blocks" mix positions? (transfer: C6.4) -----------
#
# The suspects that grade this exercise live in the notebook's hidden tests, never here. The
# visible check only makes sure the test answers True or False and gets right the two functions
# the lesson has already measured: the feed-forward block itself (C6.4: each row on its own) and
# self-attention (C6.5: every output row a weighted average of all the value rows).

_D_MODEL = 8


def _as_bool(ex: str, value, name: str) -> bool:
    if type(value) is bool:
        return value
    if value is None:
        fail(ex, f"{name} is None: did you forget to `return` True or False?")
    if isinstance(value, torch.Tensor | np.bool_) and getattr(value, "dtype", None) in (
        torch.bool,
        np.bool_,
    ):
        shape = list(value.shape) if isinstance(value, torch.Tensor) else []
        fail(
            ex,
            f"{name} returns a {type(value).__name__} of shape {shape}, not True or False: wrap "
            "it in bool(...) (a graded answer must be a Python bool).",
        )
    if isinstance(value, torch.Tensor):
        got = f"a tensor of shape {list(value.shape)} and dtype {value.dtype}"
    else:
        got = f"{value!r} ({type(value).__name__})"
    fail(ex, f"{name} should return True or False (a bool), got {got}.")


def check_mixes_positions(mixes_positions) -> None:
    """Exercise 4. ``mixes_positions(f)`` must return True when some output row of ``f`` (a
    function from x [n, 8] to [n, 8]) depends on an input row other than its own, False when
    each output row depends on its own input row only.

    Tried here on the two functions the lesson has measured (the feed-forward block itself and
    self-attention); the suspects are graded by hidden tests."""
    ex = "Exercise 4 (find the blocks that mix positions)"
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(6)
        ffn = FeedForward(_D_MODEL, 32).double()
    g = torch.Generator().manual_seed(7)
    w_q, w_k, w_v = (
        torch.randn(_D_MODEL, _D_MODEL, generator=g, dtype=torch.float64) / math.sqrt(_D_MODEL)
        for _ in range(3)
    )  # [8, 8] each

    def prepared(x):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[-1] != _D_MODEL:
            shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"each function takes x of shape [n, {_D_MODEL}] (n positions, "
                f"d_model = {_D_MODEL}), got {shape}"
            )
        return x.to(torch.float64)  # [n, 8]

    def feed_forward(x):
        return ffn(prepared(x))  # [n, 8]

    def self_attention(x):
        x = prepared(x)
        return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)[0]  # [n, 8]

    for label, f, mixes, why in [
        ("the feed-forward block itself", feed_forward, False, "maps each row on its own (C6.4)"),
        (
            "self-attention",
            self_attention,
            True,
            "makes every output row a weighted average of all the value rows (C6.5)",
        ),
    ]:
        got = call_described(ex, mixes_positions, (f,), name="mixes_positions", shown=label)
        got = _as_bool(ex, got, name=f"mixes_positions({label})")
        if got != mixes:
            said = "mixes positions" if got else "does not mix positions"
            fail(ex, f"your test says {label} {said}, but {label} {why}.")
    passed(
        ex,
        "your test answers False for the feed-forward block and True for self-attention. The "
        "suspects are graded by hidden tests: run mixes_positions on plain, centred and "
        "scaled_by_position and compare with your prediction.",
    )
