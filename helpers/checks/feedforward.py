"""Lesson 6 exercise checks: collapse the block without its nonlinearity into one affine map
(C6.1, C6.5), find where two activations differ most (C6.3), and find the "feed-forward" blocks that
mix positions (a transfer exercise: C6.4's experiment applied to code the student has not seen
run). Each prints
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
    "check_collapse",
    "check_most_different_input",
    "check_mixes_positions",
]


#: What the grader forbids per exercise (tools/grading/spec.py reads it from here): nothing.
FORBIDDEN: dict[str, tuple[str, ...]] = {}


def _weights(d_model: int = 6, d_ff: int = 24, n: int = 5, seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_model, generator=g, dtype=dtype)  # [n, d_model]
    w1 = torch.randn(d_model, d_ff, generator=g, dtype=dtype) / math.sqrt(d_model)  # [d, d_ff]
    b1 = torch.randn(d_ff, generator=g, dtype=dtype) * 0.5  # [d_ff]
    w2 = torch.randn(d_ff, d_model, generator=g, dtype=dtype) / math.sqrt(d_ff)  # [d_ff, d]
    b2 = torch.randn(d_model, generator=g, dtype=dtype) * 0.5  # [d_model]
    return x, w1, b1, w2, b2


def _pair(ex: str, got, d_model: int, d_ff: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's (M, c) as two floating tensors of shapes [d_model, d_model] and [d_model]."""
    if got is None:
        fail(ex, "collapse returned None: return the pair (M, c), e.g. `return M, c`.")
    if isinstance(got, torch.Tensor) or not isinstance(got, tuple | list) or len(got) != 2:
        kind = (
            f"a tensor of shape {list(got.shape)}"
            if isinstance(got, torch.Tensor)
            else (
                f"a {type(got).__name__}"
                + (f" of {len(got)} items" if isinstance(got, tuple | list) else "")
            )
        )
        fail(ex, f"collapse should return two things, the matrix M and the vector c; got {kind}.")
    M, c = got
    if isinstance(M, torch.Tensor) and tuple(M.shape) == (d_ff, d_ff) and d_ff != d_model:
        fail(
            ex,
            f"M has shape {list(M.shape)} = [d_ff, d_ff]: that is W2 @ W1, the product in the "
            "wrong order. x is [n, d_model], so x @ M must multiply by W1 first, then W2.",
        )
    M = as_tensor(ex, M, name="M", shape=(d_model, d_model), layout="[d_model, d_model]")
    if isinstance(c, torch.Tensor) and c.dim() == 2 and c.shape[-1] == d_model:
        fail(
            ex,
            f"c has shape {list(c.shape)}; it is one vector added to every row, shape "
            f"[d_model] = [{d_model}] (b1 @ W2 is already [d_model] when b1 is [d_ff]).",
        )
    if isinstance(c, torch.Tensor) and tuple(c.shape) == (d_ff,) and d_ff != d_model:
        fail(
            ex,
            f"c has shape {list(c.shape)} = [d_ff]: b1 is added before W2, so it reaches the "
            "output only after passing through W2.",
        )
    c = as_tensor(ex, c, name="c", shape=(d_model,), layout="[d_model]")
    return M, c


def check_collapse(collapse) -> None:
    """Exercise 1 (C6.1, C6.5). Without the nonlinearity the block is ``(x W1 + b1) W2 + b2``;
    ``collapse(W1, b1, W2, b2)`` must return ``(M, c)``, M [d_model, d_model] and c [d_model],
    with ``x M + c`` equal to that map for every x. Compared with the map itself on random inputs
    (float64, several sizes, d_ff above, equal to and below d_model): a property, not a reference
    answer. Nothing is forbidden: probing the map with the identity matrix is an honest way too."""
    ex = "Exercise 1 (the block without its nonlinearity)"
    for d_model, d_ff, seed in [(6, 24, 0), (5, 5, 1), (4, 3, 2)]:
        x, w1, b1, w2, b2 = _weights(d_model, d_ff, 7, seed)
        shown = (
            f"W1 {list(w1.shape)}, b1 {list(b1.shape)}, W2 {list(w2.shape)}, b2 {list(b2.shape)}"
        )
        try:
            got = call_described(ex, collapse, (w1, b1, w2, b2), name="collapse", shown=shown)
        except ExerciseFailed as e:
            if "must match the size" in e.problem or "cannot be multiplied" in e.problem:
                fail(
                    ex,
                    f"{e.problem} Hint: b1 has d_ff entries and b2 has d_model; a vector that "
                    "enters before W2 leaves it multiplied by W2.",
                )
            raise
        M, c = _pair(ex, got, d_model, d_ff)
        want = (x @ w1 + b1) @ w2 + b2  # [n, d_model]: the two layers with nothing between
        out = x.to(M.dtype) @ M + c  # [n, d_model]
        if torch.allclose(out.to(torch.float64), want, atol=1e-5, rtol=1e-4):
            continue
        if torch.allclose(M.to(torch.float64), w1 @ w2, atol=1e-5, rtol=1e-4):
            hint = (
                " M is right; c is not: x M + c must also give the biases' share, and b1 "
                "reaches the output through W2."
            )
            if torch.allclose(c.to(torch.float64), b2, atol=1e-5, rtol=1e-4):
                hint = " M is right, but c holds b2 alone: b1 is added before W2 and comes out as b1 @ W2."
            fail(
                ex,
                f"x @ M + c differs from (x W1 + b1) W2 + b2 (d_model {d_model}, d_ff {d_ff}).{hint}",
            )
        if d_model == d_ff and torch.allclose(M.to(torch.float64), w2 @ w1, atol=1e-5, rtol=1e-4):
            fail(
                ex,
                "M is W2 @ W1, the product in the wrong order (it has the right shape only because "
                "this W1 is square): x @ M must multiply by W1 first, then W2.",
            )
        close = torch.isclose(out.to(torch.float64), want, rtol=1e-4, atol=1e-5)
        fail(
            ex,
            f"x @ M + c differs from (x W1 + b1) W2 + b2 in {int((~close).sum())} of "
            f"{close.numel()} entries (d_model {d_model}, d_ff {d_ff}): expand the product and "
            "collect what multiplies x and what does not.",
        )
    passed(
        ex,
        "x M + c equals the two layers without their nonlinearity, (x W1 + b1) W2 + b2, at "
        "d_ff above, equal to and below d_model.",
    )


_WITHIN = 5e-3  # the tolerance the exercise states: a grid step of 0.01 or finer lands this close


def _silu(t: torch.Tensor) -> torch.Tensor:
    return t * torch.sigmoid(t)


#: the check's own cases: (f, g, lo, hi, how a verdict names them). The second keeps one side of
#: ReLU and GELU's even gap, the third a scaled pair whose peaks are not ReLU and GELU's.
_CASES = (
    (relu, gelu, -4.0, 4.0, "f = relu, g = gelu on [-4, 4]"),
    (relu, gelu, -3.0, 0.5, "f = relu, g = gelu on [-3, 0.5]"),
    (
        lambda t: gelu(2 * t),
        lambda t: _silu(2 * t),
        -1.0,
        3.0,
        "f(x) = gelu(2x), g(x) = silu(2x) on [-1, 3]",
    ),
)


def _gap(f, g, x: float) -> float:
    t = torch.tensor([x], dtype=torch.float64)
    return float((f(t) - g(t)).abs()[0])


def _peaks(f, g, lo: float, hi: float) -> tuple[torch.Tensor, float]:
    """The points of a fine grid on [lo, hi] where |f - g| is largest (every peak of an even gap,
    to a relative 1e-7), and that largest value."""
    fine = torch.linspace(lo, hi, 200001, dtype=torch.float64)  # [200001]
    gaps = (f(fine) - g(fine)).abs()  # [200001]
    best = float(gaps.max())
    return fine[gaps >= best * (1 - 1e-7)], best


def _coarse_grids(
    x: float, f, g, lo: float, hi: float, near: float, most: int = 20001
) -> list[int]:
    """The sizes N <= ``most`` of the grids ``linspace(lo, hi, N)`` that have ``x`` as their best
    point. ``near`` is x's distance to the nearest peak: only grids whose step is at least that
    can (with a smaller step, the next grid point toward the peak is closer to it, and the gap
    rises monotonically up to a peak)."""
    width = hi - lo
    sizes = np.arange(2, min(most, int(width / max(near, 1e-12)) + 1) + 1)  # [candidates]
    steps = width / (sizes - 1)
    on_grid = np.abs(lo + np.round((x - lo) / steps) * steps - x) < 1e-9
    found = []
    for points in sizes[on_grid].tolist():
        grid = torch.linspace(lo, hi, points, dtype=torch.float64)  # [points]
        gaps = (f(grid) - g(grid)).abs()  # [points]
        if _gap(f, g, x) >= float(gaps.max()) * (1 - 1e-12):  # x ties for its best point
            found.append(points)
    return found


def _judge_case(ex: str, most_different_input, f, g, lo: float, hi: float, named: str) -> None:
    got = call(ex, most_different_input, f, g, lo, hi, name="most_different_input")
    x = as_number(ex, got, name=f"most_different_input (for {named})")
    if not lo <= x <= hi:
        if float(x).is_integer() and abs(x) > 10:
            fail(
                ex,
                f"for {named} you return {x:g}, outside the range: is that the index of the "
                "largest difference among your points? Return the input x itself.",
            )
        fail(ex, f"for {named} you return x = {x:g}, outside the range [lo, hi] you were given.")
    peaks, best = _peaks(f, g, lo, hi)
    near = float((peaks - x).abs().min())
    if near <= _WITHIN:
        return
    if abs(x - best) < 1e-3 and abs(_gap(f, g, x) - best) > 1e-3:
        fail(
            ex,
            f"for {named} you return {x:.4g}: that is the size of the largest difference, not "
            "the input x where it happens.",
        )
    if near > 0.1 or _gap(f, g, x) < 0.9 * best:  # the search itself went wrong
        fail(
            ex,
            f"for {named}, |f(x) - g(x)| = {fmt(_gap(f, g, x), decimals=5)} at your x = "
            f"{x:.4g}, but it is larger elsewhere in the range: compare the absolute difference "
            "at enough points of [lo, hi] and return the input where it is largest.",
        )
    # near the peak in value, not in place: the curve is flat there and a coarse grid stops short
    grids = _coarse_grids(x, f, g, lo, hi, near)[:3]
    grid = ""
    if grids:
        sizes = " and ".join(f"{p}-point" for p in grids)
        steps = " and ".join(f"{(hi - lo) / (p - 1):.4g}" for p in grids)
        grid = (
            f" {x:g} is the best point of the {sizes} grid{'s' if len(grids) > 1 else ''} on "
            f"[{lo:g}, {hi:g}] (step {steps}): a grid lands only within half a step of the peak."
        )
    fail(
        ex,
        f"for {named}, x = {x:.4g} is near a peak but not within 0.005 of it: the curve is so "
        f"flat near its peak that a coarse search stops short.{grid} Space your points 0.01 "
        "apart or closer to land within 0.005 of it.",
    )


def check_most_different_input(most_different_input) -> None:
    """Exercise 2 (C6.3). ``most_different_input(f, g, lo, hi)`` must return an input x in
    [lo, hi] (a number) where |f(x) - g(x)| is largest, to within 0.005, as the exercise asks;
    ``f`` and ``g`` act entry by entry on a float64 tensor.

    Tried on ReLU and GELU over [-4, 4] and over [-3, 0.5], and on a scaled GELU and SiLU. The
    verdict never shows where a peak is, nor whether there is more than one: it says whether x
    is within 0.005 of a point where the gap is largest (found on a fine grid here), and
    otherwise what went wrong (an index or a difference returned instead of x, a search that
    went astray, or a search too coarse for a curve this flat). Graded by hidden tests on other
    pairs and ranges."""
    ex = "Exercise 2 (where two activations differ most)"
    for f, g, lo, hi, named in _CASES:
        _judge_case(ex, most_different_input, f, g, lo, hi, named)
    passed(
        ex,
        f"in each of the {len(_CASES)} cases tried (ReLU and GELU on [-4, 4] among them) your x "
        "is within 0.005 of a point where |f(x) - g(x)| is largest.",
    )


# --- Exercise 3: which of these "feed-forward blocks" mix positions? (transfer: C6.4) -----------
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
    """Exercise 3. ``mixes_positions(f)`` must return True when some output row of ``f`` (a
    function from x [n, 8] to [n, 8]) depends on an input row other than its own, False when
    each output row depends on its own input row only.

    Tried here on the two functions the lesson has measured (the feed-forward block itself and
    self-attention) and on two that only some positions reach (each row plus the last row, a
    running mean), which a test copied from C6.4's single nudged position gets wrong; the
    suspects are graded by hidden tests."""
    ex = "Exercise 3 (find the blocks that mix positions)"
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

    def plus_last_row(x):
        x = prepared(x)
        return ffn(x + x[-1:])  # [n, 8]: row i + the last row

    def running_mean(x):
        x = prepared(x)
        steps = torch.arange(1, x.shape[0] + 1, dtype=torch.float64)[:, None]  # [n, 1]
        return ffn(x.cumsum(dim=0) / steps)  # [n, 8]: row i from rows 0..i

    one_position = (
        " A test that changes one position only misses it: change each position in turn, and "
        "look at every other row."
    )
    for label, f, mixes, why in [
        ("the feed-forward block itself", feed_forward, False, "maps each row on its own (C6.4)"),
        (
            "self-attention",
            self_attention,
            True,
            "makes every output row a weighted average of all the value rows (C6.5)",
        ),
        (
            "the block applied to each row plus the last row",
            plus_last_row,
            True,
            "moves every output row when the last input row changes, and no other row when "
            "any other input row changes." + one_position,
        ),
        (
            "the block applied to the running mean of the rows",
            running_mean,
            True,
            "makes output row i from input rows 0..i: changing row j moves every later row, "
            "and changing the last row moves no other." + one_position,
        ),
    ]:
        got = call_described(ex, mixes_positions, (f,), name="mixes_positions", shown=label)
        got = _as_bool(ex, got, name=f"mixes_positions({label})")
        if got != mixes:
            said = "mixes positions" if got else "does not mix positions"
            fail(ex, f"your test says {label} {said}, but {label} {why}.")
    passed(
        ex,
        "your test answers False for the feed-forward block and True for self-attention and "
        "for two functions that mix only some positions. The suspects are graded by hidden "
        "tests: run mixes_positions on plain, centred and scaled_by_position and compare with "
        "your prediction.",
    )
