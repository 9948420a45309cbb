"""Lesson 6 exercise checks: count the block's parameters, write its forward pass, and find where
ReLU and GELU differ most. Each prints ``✓ ...`` or raises :class:`ExerciseFailed`."""

from __future__ import annotations

import math

import torch

from ..feedforward import FeedForward, gelu, relu
from ..params import count_parameters
from ._core import as_number, as_tensor, call, expect_close, fail, passed

__all__ = ["check_parameter_count", "check_ffn_forward", "check_most_different_input"]

# (d_model, d_ff) pairs the student's formula is tried on; the first is the paper's.
_SIZES = [(512, 2048), (8, 32), (10, 7), (3, 1)]


def check_parameter_count(count_ffn_parameters) -> None:
    """Exercise 1. ``count_ffn_parameters(d_model, d_ff)`` must return the number of parameters of
    the ReLU block FFN(x) = max(0, x W1 + b1) W2 + b2, biases included, for any sizes."""
    ex = "Exercise 1 (count the parameters)"
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
    passed(ex, "2·d_model·d_ff + d_ff + d_model, e.g. 2,099,712 at 512 -> 2048.")


def _weights(d_model: int = 6, d_ff: int = 24, n: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_model, generator=g)  # [n, d_model]
    w1 = torch.randn(d_model, d_ff, generator=g) / math.sqrt(d_model)  # [d_model, d_ff]
    b1 = torch.randn(d_ff, generator=g) * 0.5  # [d_ff]
    w2 = torch.randn(d_ff, d_model, generator=g) / math.sqrt(d_ff)  # [d_ff, d_model]
    b2 = torch.randn(d_model, generator=g) * 0.5  # [d_model]
    return x, w1, b1, w2, b2


def check_ffn_forward(ffn_forward) -> None:
    """Exercise 2. ``ffn_forward(x, W1, b1, W2, b2)`` with x [n, d_model], W1 [d_model, d_ff],
    b1 [d_ff], W2 [d_ff, d_model], b2 [d_model] must return max(0, x W1 + b1) W2 + b2,
    [n, d_model]."""
    ex = "Exercise 2 (the block's forward pass)"
    for d_model, d_ff, n, seed in [(6, 24, 5, 0), (4, 7, 1, 1)]:
        x, w1, b1, w2, b2 = _weights(d_model, d_ff, n, seed)
        want = torch.clamp(x @ w1 + b1, min=0) @ w2 + b2  # [n, d_model]
        got = call(ex, ffn_forward, x, w1, b1, w2, b2, name="ffn_forward")
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (n, d_ff):
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
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            for problem, wrong in mistakes.items():
                if torch.allclose(got, wrong, atol=1e-4, rtol=1e-4):
                    fail(ex, problem + ".")
        expect_close(ex, got, want, name="ffn_forward(x, W1, b1, W2, b2)")
    passed(ex, "max(0, x W1 + b1) W2 + b2, [n, d_model] -> [n, d_ff] -> [n, d_model].")


_ARGMAX = 0.7517916  # solves Phi(-x) = x phi(x): where x Phi(-x) = relu(x) - gelu(x) peaks


def _gap(x: float) -> float:
    t = torch.tensor(x, dtype=torch.float64)
    return float((relu(t) - gelu(t)).abs())


def check_most_different_input(most_different_input) -> None:
    """Exercise 3. ``most_different_input()`` must return the input x (a number in [-4, 4]) where
    |ReLU(x) - GELU(x)| is largest. There are two such inputs, ±0.7518 (the gap is an even
    function: relu(x) - gelu(x) = x Phi(-x) for x > 0 and -x Phi(x) for x < 0); either is right."""
    ex = "Exercise 3 (where ReLU and GELU differ most)"
    got = call(ex, most_different_input, name="most_different_input")
    x = as_number(ex, got, name="most_different_input()")
    best = _gap(_ARGMAX)  # the maximum of |relu - gelu|, about 0.16997
    if not -4.0 <= x <= 4.0:
        if float(x).is_integer():
            fail(
                ex,
                f"you return {x:g}, outside [-4, 4]: is that the index of the largest "
                "difference in your grid? Return the input x at that index.",
            )
        fail(ex, f"you return x = {x:g}, outside the range [-4, 4] the exercise asks about.")
    if abs(x - best) < 1e-3 and abs(_gap(x) - best) > 1e-3:
        fail(
            ex,
            f"you return {x:.4g}: that is the size of the largest difference, not the input x "
            "where it happens.",
        )
    if _gap(x) < best - 1e-4:
        fail(
            ex,
            f"at x = {x:.4g}, |ReLU(x) - GELU(x)| = {_gap(x):.4f}; somewhere in [-4, 4] the "
            "difference is larger. Take the absolute difference on a fine grid and its argmax.",
        )
    if abs(abs(x) - _ARGMAX) > 5e-3:  # the gap is flat near its peak: ask for the place itself
        fail(
            ex,
            f"x = {x:.4g} is near the peak but not at it (the difference there is {_gap(x):.5f}); "
            "use a finer grid, with a step of 0.001 or less.",
        )
    passed(
        ex,
        f"|ReLU(x) - GELU(x)| peaks at {best:.4f}, at x = {_ARGMAX:.3f} and x = -{_ARGMAX:.3f} "
        "alike (relu(x) - gelu(x) is an even function); your answer is one of them.",
    )
