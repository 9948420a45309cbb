"""Lesson 6 exercise checks: count the block's parameters, write its forward pass, find where
ReLU and GELU differ most, and find the "feed-forward" blocks that mix positions (a transfer
exercise: C6.4's experiment applied to code the student has not seen run). Each prints
``✓ ...`` or raises :class:`ExerciseFailed`."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..feedforward import FeedForward, gelu, relu
from ..params import count_parameters
from ..printing import fmt
from ._core import (
    ExerciseFailed,
    as_number,
    as_tensor,
    call,
    call_described,
    expect_close,
    fail,
    passed,
)

__all__ = [
    "check_parameter_count",
    "check_ffn_forward",
    "check_most_different_input",
    "check_mixes_positions",
    "suspects",
]

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


def check_ffn_forward(ffn_forward) -> None:
    """Exercise 2. ``ffn_forward(x, W1, b1, W2, b2)`` with x [n, d_model], W1 [d_model, d_ff],
    b1 [d_ff], W2 [d_ff, d_model], b2 [d_model] must return max(0, x W1 + b1) W2 + b2,
    [n, d_model].

    A weight used transposed (``x @ W1.T``, nn.Linear's layout) is named, whether it raises a
    shape error (d_model != d_ff) or silently computes something else (d_model == d_ff)."""
    ex = "Exercise 2 (the block's forward pass)"
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
        expect_close(ex, got, want, name="ffn_forward(x, W1, b1, W2, b2)")
    passed(ex, "max(0, x W1 + b1) W2 + b2, [n, d_model] -> [n, d_ff] -> [n, d_model].")


_ARGMAX = 0.7517916  # solves Phi(-x) = x phi(x): where x Phi(-x) = relu(x) - gelu(x) peaks
_WITHIN = 5e-3  # the place asked for, to two decimals (0.75): a grid step of 0.01 or finer finds it


def _gap(x: float) -> float:
    t = torch.tensor(x, dtype=torch.float64)
    return float((relu(t) - gelu(t)).abs())


def _coarse_grids(x: float, most: int = 20001) -> list[int]:
    """The sizes N <= ``most`` of the grids ``linspace(-4, 4, N)`` that have ``x`` as their best point.

    Only grids whose step is at least x's distance to the peak can: with a smaller step, the next
    grid point toward the peak lies between x and the peak, where the gap is larger (it rises
    monotonically up to the peak on each side)."""
    off = abs(abs(x) - _ARGMAX)
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
    """Exercise 3. ``most_different_input()`` must return the input x (a number in [-4, 4]) where
    |ReLU(x) - GELU(x)| is largest, to within 0.005 (the place to two decimals, 0.75). There are
    two such inputs, ±0.7518 (the gap is an even function: relu(x) - gelu(x) = x Phi(-x) for
    x > 0 and -x Phi(x) for x < 0); either is right.

    The gap is flat near its peak, so a coarse grid stops short of it: an answer that is the
    best point of such a grid is told so, with the grid's step and how far it is from the peak."""
    ex = "Exercise 3 (where ReLU and GELU differ most)"
    got = call(ex, most_different_input, name="most_different_input")
    x = as_number(ex, got, name="most_different_input()")
    best = _gap(_ARGMAX)  # the maximum of |relu - gelu|, about 0.16997
    peak, minus_peak = fmt(_ARGMAX, decimals=3), fmt(-_ARGMAX, decimals=3)
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
    off = abs(abs(x) - _ARGMAX)
    if off <= _WITHIN:
        passed(
            ex,
            f"|ReLU(x) - GELU(x)| peaks at {fmt(best, decimals=4)}, at x = {peak} and "
            f"x = {minus_peak} alike "
            "(relu(x) - gelu(x) is an even function); your answer is one of them.",
        )
        return
    if off > 0.1 or _gap(x) < 0.9 * best:  # far from either peak: the search itself went wrong
        fail(
            ex,
            f"at x = {x:.4g}, |ReLU(x) - GELU(x)| = {fmt(_gap(x), decimals=5)}, but it reaches "
            f"{fmt(best, decimals=5)} elsewhere in [-4, 4]: take the absolute difference "
            "|relu - gelu| on a fine grid and return the grid point at its argmax.",
        )
    # near the peak in value, not in place: the curve is flat there and a coarse grid stops short
    grids = _coarse_grids(x)[:3]
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
        f"x = {x:.4g} is {off:.3g} from the peak at x = ±{peak} (to 3 decimals); the difference is "
        f"{fmt(_gap(x), decimals=5)} there against {fmt(best, decimals=5)} at the peak, so flat "
        f"that a coarse grid stops short.{grid} Use a step of 0.01 or finer (8001 points give "
        "0.001) to land within 0.005 of it.",
    )


# --- Exercise 4: which of these "feed-forward blocks" mix positions? (transfer: C6.4) -----------

_SUSPECT_D_MODEL = 8


def suspects() -> list[tuple[str, object, bool, str]]:
    """Exercise 4. The functions ``check_mixes_positions`` judges the student's test on.

    Each is ``(name, f, mixes, what)``: ``f`` maps x [n, 8] (n >= 2 positions, any float dtype) to
    [n, 8] float64 through one seeded ``FeedForward(8, 32)``; ``mixes`` is whether some output
    row depends on an input row other than its own; ``what`` says what ``f`` does. Two are traps
    for a permutation test: ``centred`` commutes with permuting positions yet mixes them, and
    ``scaled_by_position`` treats positions differently yet mixes nothing.
    """
    with torch.random.fork_rng():  # seeded, leaving the notebook's random state as it was
        torch.manual_seed(6)
        ffn = FeedForward(_SUSPECT_D_MODEL, 32).double()

    def prepared(x):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[-1] != _SUSPECT_D_MODEL:
            shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"each suspect takes x of shape [n, {_SUSPECT_D_MODEL}] (n positions, "
                f"d_model = {_SUSPECT_D_MODEL}), got {shape}"
            )
        return x.to(torch.float64)  # [n, 8]

    def plain(x):
        return ffn(prepared(x))  # [n, 8]

    def centred(x):
        x = prepared(x)
        return ffn(x - x.mean(dim=0))  # [n, 8]: the mean over positions

    def running_sum(x):
        return ffn(prepared(x).cumsum(dim=0))  # [n, 8]: row i sees rows 0..i

    def scaled_by_position(x):
        x = prepared(x)
        scale = torch.arange(1, x.shape[0] + 1, dtype=x.dtype)[:, None]  # [n, 1]
        return ffn(x) * scale  # [n, 8]

    def reversed_rows(x):
        return ffn(prepared(x).flip(0))  # [n, 8]: row i comes from input row n - 1 - i

    def softmax_over_positions(x):
        x = prepared(x)
        return ffn(x * torch.softmax(x, dim=0))  # [n, 8]: softmax down the sequence axis

    def squared(x):
        return ffn(prepared(x) ** 2)  # [n, 8]: nonlinear, but per position

    return [
        ("plain", plain, False, "applies one feed-forward block to each row on its own"),
        (
            "centred",
            centred,
            True,
            "subtracts the mean over positions before the block, so every input row moves every "
            "output row; it commutes with permuting positions, so a permutation test cannot see "
            "it: change one position and look at the other rows",
        ),
        (
            "running_sum",
            running_sum,
            True,
            "feeds row i the sum of input rows 0..i (a causal mix): changing the last position "
            "moves no other row, changing the first moves them all, so try every position",
        ),
        (
            "scaled_by_position",
            scaled_by_position,
            False,
            "multiplies output row i by (i + 1): it treats positions differently (so it does not "
            "commute with permutations), but row i depends on input row i only: it does not mix",
        ),
        (
            "reversed_rows",
            reversed_rows,
            True,
            "reads its input backwards: output row i comes from input row n - 1 - i, another "
            "position",
        ),
        (
            "softmax_over_positions",
            softmax_over_positions,
            True,
            "takes a softmax down the sequence axis (dim 0) instead of along a vector, so each "
            "row is weighted by all the others",
        ),
        (
            "squared",
            squared,
            False,
            "squares each entry before the block: nonlinear, but each row on its own",
        ),
    ]


def _as_bool(ex: str, value, name: str) -> bool:
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, bool):
        return value
    if value is None:
        fail(ex, f"{name} is None: did you forget to `return` True or False?")
    if isinstance(value, torch.Tensor):
        got = f"a tensor of shape {list(value.shape)} and dtype {value.dtype}"
    else:
        got = f"{value!r} ({type(value).__name__})"
    fail(ex, f"{name} should return True or False (a bool), got {got}.")


def check_mixes_positions(mixes_positions) -> None:
    """Exercise 4. ``mixes_positions(f)`` must return True when some output row of ``f`` (a
    function from x [n, 8] to [n, 8]) depends on an input row other than its own, False when
    each output row depends on its own input row only. It is tried on :func:`suspects`; the
    verdict names the first suspect it misjudges and what that suspect does."""
    ex = "Exercise 4 (find the blocks that mix positions)"
    cases = suspects()
    wrong = []
    for name, f, mixes, what in cases:
        got = call_described(ex, mixes_positions, (f,), name="mixes_positions", shown=name)
        got = _as_bool(ex, got, name=f"mixes_positions({name})")
        if got != mixes:
            wrong.append((name, mixes, what))
    if wrong:
        name, mixes, what = wrong[0]
        said = "mixes positions" if not mixes else "does not mix positions"
        more = (
            f" ({len(wrong) - 1} more of the {len(cases)} suspects misjudged.)"
            if len(wrong) > 1
            else ""
        )
        fail(ex, f"your test says `{name}` {said}, but `{name}` {what}.{more}")
    passed(
        ex,
        f"all {len(cases)} suspects judged right. Mixing means that one position's input moves "
        "another position's output: `centred` mixes although it commutes with permutations, and "
        "`scaled_by_position` treats positions differently without mixing them.",
    )
