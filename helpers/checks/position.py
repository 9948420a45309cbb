"""Lesson 4 exercise checks: which column pair tells two positions apart (a predict-then-verify
exercise), the wavelength of a column pair, the rotation R_k, which positions a learned
table can answer for, rotary position in Llama's half-split layout (C4.8, a transfer exercise)
and ALiBi's bias for any number of heads (C4.8, predict then verify).

Each check calls the student's function on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` with a message that names the mistake:
None returned, not implemented yet, the function raised, wrong shape or dtype, NaN, a column
index for a pair index, the angle rate for the wavelength, the transposed rotation ...

These are the student's instant feedback, not the grade: the grade comes from hidden tests on
other cases (``helpers.grading``). So nothing here holds an answer: a check tests properties that
a right answer must have (a pair's point on the unit circle, one full turn, PE(p + k) = R PE(p),
what a real table accepts), computed inside the check, and no verdict prints an expected value.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..positional import LearnedPositionalEmbedding, PositionOutOfRange, sinusoidal_encoding_at
from ..printing import fmt
from ._core import as_number, as_tensor, call, fail, passed
from .generation import call_refusing

__all__ = [
    "check_best_pair",
    "check_wavelength",
    "check_rotation",
    "check_has_rows",
    "check_rotary_half_split",
    "check_alibi_bias",
    "FORBIDDEN",
]

BASE = 10000.0

#: The course functions exercises 5 and 6 may not call (the grader's lists in
#: tools/grading/spec.py are these): they compute the answer outright.
FORBIDDEN = {
    "l4_ex5": ("helpers.positional.apply_rotary", "helpers.positional.rotation_matrix"),
    "l4_ex6": ("helpers.positional.alibi_bias", "helpers.positional.alibi_slopes"),
}


# --------------------------------------------------------------------------------------------
# Exercise 1: which pair tells two positions apart (predict, then verify)
# --------------------------------------------------------------------------------------------

# (p, q, d_model): inputs chosen so that the best pair beats the second best by a wide margin
_BEST_PAIR_CASES = (
    (0, 1000, 16),
    (7, 1007, 16),
    (0, 1, 16),
    (0, 6, 16),
    (0, 50, 16),
    (0, 100, 32),
    (5, 12, 64),
    (0, 2000, 32),
)


def _as_pair_index(ex: str, got, what: str, d: int) -> int:
    if got is None:
        fail(ex, f"{what} returned None: did you forget to `return` the pair index?")
    size = got.numel() if isinstance(got, torch.Tensor) else np.size(got)
    if isinstance(got, torch.Tensor | np.ndarray) and size != 1:
        fail(
            ex,
            f"{what} returned an array of shape {list(got.shape)}: return one pair index "
            f"(an int), e.g. int(distances.argmax()), not the distances themselves.",
        )
    if isinstance(got, torch.Tensor | np.ndarray | np.generic):
        got = got.item()  # one element: a Python int, float or bool
    if isinstance(got, bool) or not isinstance(got, int | float):
        fail(
            ex, f"{what} returned {got!r} (a {type(got).__name__}); return the pair index, an int."
        )
    if isinstance(got, float):
        if not (math.isfinite(got) and got.is_integer()):
            shown = fmt(got, 4) if math.isfinite(got) else str(got)
            fail(
                ex,
                f"{what} returned the float {shown}: return the index i of the pair (an int "
                f"between 0 and d_model/2 - 1 = {d // 2 - 1}), not a distance or an angle.",
            )
        got = int(got)
    return got


def check_best_pair(fn, cases=_BEST_PAIR_CASES) -> None:
    """Lesson 4, exercise 1 (predict, then verify). ``fn(p, q, d_model)`` returns the index i of
    a column pair (columns 2i, 2i+1). The check measures, for every pair, how far its point
    (sin, cos) moves between positions p and q, and tells the student whether the returned pair
    is the one that moves farthest (and, if not, what the returned pair does)."""
    ex = "Exercise 1 (which pair tells two positions apart)"
    first = None  # the student's (right) answer to the first case, for the ✓ line
    for p, q, d in cases:
        what = f"best_pair({p}, {q}, {d})"
        got = _as_pair_index(ex, call(ex, fn, p, q, d, name="best_pair"), what, d)
        pe = sinusoidal_encoding_at([p, q], d, dtype=torch.float64)  # [2, d]
        moved = (pe[0] - pe[1]).reshape(d // 2, 2).norm(dim=1)  # [d/2]: one distance per pair
        if 0 <= got < d // 2 and float(moved[got]) >= float(moved.max()) - 1e-9:
            if first is None:
                first = (p, q, d, got, moved)
            continue

        def dist(i, moved=moved):
            return fmt(moved[i], decimals=3)

        farthest = int(moved.argmax())
        if not 0 <= got < d // 2:
            problem = f"there are only d_model/2 = {d // 2} pairs, numbered 0..{d // 2 - 1}."
            if got < d:
                problem += " Did you return a column index? Pair i is columns 2i and 2i+1."
        elif got // 2 == farthest and got > 1:
            problem = (
                f"pair {got} moves {dist(got)}, and another pair farther; did you return a column "
                f"index? Pair i is columns 2i and 2i+1: return i."
            )
        elif got == 0:
            turned = float(q - p)  # pair 0 turns by 1 rad per position (w_0 = 1)
            problem = (
                f"pair 0 turns fastest, but over q - p = {q - p} positions it turns by "
                f"{fmt(turned, 4)} rad, which is {math.floor(turned / (2 * math.pi))} full turns "
                f"plus {fmt(math.fmod(turned, 2 * math.pi), 3)} rad: its point ends up a distance "
                f"{dist(0)} from where it started, and another pair moves farther. What counts "
                f"is the angle modulo 2π."
            )
        elif got == d // 2 - 1:
            problem = (
                f"the slowest pair barely moves over {q - p} positions (distance {dist(got)}); "
                f"a faster pair moves farther."
            )
        elif got == int(moved.argmin()):
            problem = (
                f"pair {got} is the one that tells them apart worst (distance {dist(got)}): "
                f"you want the largest distance."
            )
        elif got - 1 == farthest:
            problem = (
                f"pair {got} moves {dist(got)}, and another pair farther: pairs are numbered from "
                f"0 (pair 0 is columns 0 and 1)."
            )
        elif got == int(pe[:, 0::2].diff(dim=0).abs().argmax()):
            problem = (
                f"pair {got} has the largest change of its sin column, but a pair is the point "
                f"(sin, cos): compare both columns (pair {got} moves {dist(got)}, and another "
                f"pair farther)."
            )
        else:
            problem = (
                f"pair {got} moves {dist(got)} between positions {p} and {q}, and another pair "
                f"farther: measure the distance of each pair's (sin, cos) point."
            )
        fail(ex, f"{what} returned {got}: {problem}")
    p, q, d, got, moved = first
    turned = float(q - p)  # pair 0's angle, w_0 = 1
    passed(
        ex,
        f"best_pair({p}, {q}, {d}) = {got}: pair {got} moves "
        f"{fmt(moved[got], decimals=3)} (of at most 2); the fastest pair 0 moves only "
        f"{fmt(moved[0], decimals=3)}: it has turned {fmt(turned, 4)} rad, "
        f"{math.floor(turned / (2 * math.pi))} full turns plus "
        f"{fmt(math.fmod(turned, 2 * math.pi), 2)} rad.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 2: the wavelength of pair i
# --------------------------------------------------------------------------------------------

# Typical wrong formulas, to name the mistake (none of them is the wavelength).
_WAVELENGTH_MISTAKES = [
    (
        lambda i, d: BASE ** (2 * i / d),
        "you returned 1/w_i, the positions per radian; one full period is 2π radians.",
    ),
    (
        lambda i, d: BASE ** (-2 * i / d),
        "you returned the angle rate w_i (radians per position), not the wavelength "
        "(positions per full turn).",
    ),
    (
        lambda i, d: 2 * math.pi * BASE ** (-2 * i / d),
        "you returned 2π·w_i, which is largest for the fastest pair; a slow wave has a long "
        "wavelength (positions per full turn, not radians per position).",
    ),
    (
        lambda i, d: 2 * math.pi * BASE ** (i / d),
        "the exponent uses i where it needs 2i: the rate of pair i is w_i = 1/10000^(2i/d_model).",
    ),
    (
        lambda i, d: 2 * math.pi * BASE ** (4 * i / d),
        "the exponent is 4i/d_model: i is the pair index (columns 2i and 2i+1), "
        "and the rate of pair i is w_i = 1/10000^(2i/d_model).",
    ),
    (
        lambda i, d: math.pi * BASE ** (2 * i / d),
        "you returned half the wavelength: one full period is 2π radians, not π.",
    ),
]


def check_wavelength(
    fn, cases=((100, 512), (1, 512), (255, 512), (3, 16), (7, 16), (0, 512))
) -> None:
    """Lesson 4, exercise 2. ``fn(i, d_model)`` returns a number of positions. The check reads
    from the encoding itself how far pair i turns per position, and tells the student whether
    pair i makes exactly one full turn over that many positions."""
    ex = "Exercise 2 (the wavelength of pair i)"
    got_at = {}
    for i, d in cases:
        what = f"wavelength({i}, {d})"
        got = as_number(ex, call(ex, fn, i, d, name="wavelength"), name=what)
        got_at[i, d] = got
        pe_1 = sinusoidal_encoding_at([1.0], d, dtype=torch.float64)[0]  # position 1, [d]
        per_position = math.atan2(float(pe_1[2 * i]), float(pe_1[2 * i + 1]))  # rad, in (0, 1]
        turns = got * per_position / (2 * math.pi)  # full turns of pair i over `got` positions
        if math.isclose(turns, 1.0, rel_tol=1e-4):
            continue
        for formula, problem in _WAVELENGTH_MISTAKES:
            if math.isclose(got, formula(i, d), rel_tol=1e-4):
                fail(ex, f"{what} = {fmt(got, 6)}: {problem}")
        if got <= 0:
            fail(ex, f"{what} = {fmt(got, 6)}: a wavelength is a positive number of positions.")
        fail(
            ex,
            f"{what} = {fmt(got, 6)}: over that many positions pair {i} turns "
            f"{'less' if turns < 1 else 'more'} than once; the wavelength is the number of "
            f"positions of exactly one full turn (2π radians).",
        )
    shown = []
    if (0, 512) in got_at:
        shown.append(f"pair 0 is the fastest (wavelength(0, 512) = {fmt(got_at[0, 512], 4)} = 2π)")
    if (255, 512) in got_at:
        shown.append(f"pair 255 of d_model 512 the slowest ({fmt(got_at[255, 512], 5)} positions)")
    passed(ex, ", ".join(shown) + "." if shown else "one full turn of the pair every time.")


# --------------------------------------------------------------------------------------------
# Exercise 3: the rotation R_k
# --------------------------------------------------------------------------------------------


def check_rotation(fn, cases=((3, 16), (1, 8), (10, 64), (0, 8))) -> None:
    """Lesson 4, exercise 3. ``fn(k, d_model)`` returns a float matrix [d_model, d_model]. The
    check tests the properties the exercise asks for: zero outside the 2×2 blocks on the
    diagonal (one per column pair), orthogonal, and ``PE(p + k) = R @ PE(p)`` at many positions
    p with the same R (together they leave one matrix)."""
    ex = "Exercise 3 (the rotation R_k)"
    name = "rotation_for_offset"
    positions = torch.tensor([0.0, 1, 5, 17, 100, 1234, 20000])
    for k, d in cases:
        what = f"{name}({k}, {d})"
        got = call(ex, fn, k, d, name=name)
        if isinstance(got, torch.Tensor) and not (got.is_floating_point() or got.is_complex()):
            fail(
                ex,
                f"{what} has dtype {got.dtype}; a rotation holds cos and sin values, "
                f"use a floating-point tensor (torch.float64).",
            )
        got = as_tensor(ex, got, name=what, shape=(d, d), layout="[d_model, d_model]")
        r = got.detach().to(torch.float64)
        eye = torch.eye(d, dtype=torch.float64)
        pe_p = sinusoidal_encoding_at(positions, d, dtype=torch.float64)  # [m, d]
        pe_pk = sinusoidal_encoding_at(positions + k, d, dtype=torch.float64)  # [m, d]
        moved = pe_p @ r.T  # [m, d]: row j is R @ PE(p_j)
        if torch.allclose(moved, pe_pk, rtol=0, atol=1e-5) and torch.allclose(
            r @ r.T, eye, rtol=0, atol=1e-5
        ):
            continue
        if k and torch.allclose(r, eye, atol=1e-6):
            fail(ex, f"{what} is the identity: R_k must turn pair i by the angle k·w_i.")
        pe_back = sinusoidal_encoding_at(positions - k, d, dtype=torch.float64)  # [m, d]
        if k and torch.allclose(moved, pe_back, rtol=0, atol=1e-5):
            fail(
                ex,
                f"{what} is R_(-k), the transpose: it moves PE back by k positions "
                f"(R_(-k) PE(p) = PE(p - k)). Swap the signs of the two sin entries of each block.",
            )
        pair = torch.arange(d) // 2  # [d]: the pair of each row and column
        outside = (pair[:, None] != pair[None, :]) & (r.abs() > 1e-6)  # [d, d]
        if outside.any():
            row, col = (int(v) for v in outside.nonzero()[0])
            fail(
                ex,
                f"{what} has a nonzero entry at row {row}, column {col}, outside the 2×2 blocks: "
                f"pair i only mixes its own columns 2i and 2i+1, every other entry is 0.",
            )
        if not torch.allclose(r @ r.T, eye, rtol=0, atol=1e-5):
            fail(
                ex,
                f"{what} is not orthogonal (R Rᵀ ≠ I): a rotation keeps every vector's length. "
                f"Each 2×2 block holds cos kw_i and ±sin kw_i of one angle.",
            )
        bad = (moved - pe_pk).abs().amax(dim=1)  # [m]
        j = int(bad.argmax())
        col = int((moved[j] - pe_pk[j]).abs().argmax())
        fail(
            ex,
            f"{what} @ PE({int(positions[j])}) differs from PE({int(positions[j]) + k}) by "
            f"{fmt(bad[j], 3)} at column {col} (pair {col // 2}): check the angle k·w_i of "
            f"that pair, w_i = 1/10000^(2i/d_model).",
        )
    passed(ex, "PE(p + k) = R_k PE(p) at every position tried, with the same R_k.")


# --------------------------------------------------------------------------------------------
# Exercise 4: what a learned table can answer for
# --------------------------------------------------------------------------------------------


def check_has_rows(
    fn,
    cases=(
        (32, 32, 0),
        (32, 33, 0),
        (32, 31, 0),
        (32, 1, 31),
        (32, 1, 32),
        (32, 10, 25),
        (8, 3, 5),
    ),
) -> None:
    """Lesson 4, exercise 4. ``fn(max_len, n_tokens, offset)`` says (True/False) whether a
    learned position table with ``max_len`` rows can serve ``n_tokens`` tokens from position
    ``offset`` on. Each case is put to a real :class:`~helpers.LearnedPositionalEmbedding`, and
    the student's answer is compared with what it does."""
    ex = "Exercise 4 (what a learned table can answer for)"
    for max_len, n_tokens, offset in cases:
        what = f"has_rows(max_len={max_len}, n_tokens={n_tokens}, offset={offset})"
        got = call(ex, fn, max_len, n_tokens, offset, name="has_rows")
        if got is None:
            fail(ex, f"{what} returned None: did you forget to `return` True or False?")
        if isinstance(got, np.bool_) or (
            isinstance(got, torch.Tensor) and got.dtype == torch.bool and got.numel() == 1
        ):
            got = bool(got)
        if not isinstance(got, bool):
            fail(ex, f"{what} returned {got!r} ({type(got).__name__}); return True or False.")
        try:
            LearnedPositionalEmbedding(max_len, 2).encoding(n_tokens, offset)
            served = True
        except PositionOutOfRange:
            served = False
        if got == served:
            continue
        last = offset + n_tokens - 1
        if served:
            problem = (
                f"the table has rows 0..{max_len - 1}, and the last position needed is {last}: "
                f"every position {offset}..{last} has a row."
            )
            if last == max_len - 1:
                problem = (
                    f"the last position needed is {last} = max_len - 1, the table's last row: "
                    f"a table with max_len rows holds a sequence of exactly max_len tokens. "
                    f"Is your comparison off by one?"
                )
        else:
            problem = (
                f"the last position needed is {last}, but the table only has rows "
                f"0..{max_len - 1}: it has no row for position {last}."
            )
            if last == max_len:
                problem += " (Position max_len itself is already one too many: rows start at 0.)"
            if offset and n_tokens <= max_len:
                problem += f" The sequence starts at position {offset}: did you forget the offset?"
        fail(ex, f"{what} returned {got}: {problem}")
    passed(ex, "a learned table serves positions 0..max_len-1 and nothing beyond.")


# --------------------------------------------------------------------------------------------
# Exercise 5: rotary position in the half-split layout (C4.8, transfer)
# --------------------------------------------------------------------------------------------


def _rates(d: int) -> torch.Tensor:
    """w_i = 10000^(-2i/d), i = 0..d/2-1, float64 (the exercise states it)."""
    return BASE ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)  # [d/2]


def _rotary_output(ex, fn, x, positions, name):
    what = f"{name}(x of shape {list(x.shape)}, positions)"
    got = call_refusing(ex, fn, (x.clone(), positions.clone()), FORBIDDEN["l4_ex5"], name=name)
    got = as_tensor(ex, got, name=what, shape=tuple(x.shape), layout="[n, d], like x")
    return got.detach().to(torch.float64), what


def check_rotary_half_split(fn) -> None:
    """Lesson 4, exercise 5 (C4.8, transfer). ``fn(x, positions)`` turns row p of ``x`` [n, d]
    in Llama's half-split layout: pair i is columns (i, i + d/2), turned by the angle
    ``positions[p] * w_i``: ``out[i] = c x[i] - s x[i + d/2]``, ``out[i + d/2] = s x[i] + c x[i + d/2]``.

    Tested by properties: the shape is kept, every row keeps its length, position 0 changes
    nothing, the unit vector on column i (and on column i + d/2) lands where the rotation of
    pair i sends it, a random row x of any length comes out as R_p x (kept length, and the sum
    of x_c times the answer's own turned unit vectors: a rotation is linear), and the score of
    a query at p and a key at q depends only on p - q. Calling the course's ``apply_rotary`` or
    ``rotation_matrix`` is refused (:data:`FORBIDDEN`)."""
    ex = "Exercise 5 (rotary position, half-split layout)"
    name = "rotary_half_split"
    for d, n in ((8, 6), (16, 5), (4, 7)):
        half = d // 2
        positions = torch.tensor([0, 1, 3, 10, 57, 400, 2025][:n])  # [n]
        # every unit vector e_c, c = 0..d-1, at every position: x has one row per (position, c)
        eye = torch.eye(d, dtype=torch.float64)  # [d, d]
        for c in range(d):
            x = eye[c].expand(n, d).clone()  # [n, d]: e_c at each position
            got, what = _rotary_output(ex, fn, x, positions, name)
            lengths = got.norm(dim=1)  # [n]
            if not torch.allclose(lengths, torch.ones(n, dtype=torch.float64), atol=1e-6):
                fail(
                    ex,
                    f"{what}: a unit vector on column {c} came out with length "
                    f"{fmt(lengths[(lengths - 1).abs().argmax()], 4)}: a rotation keeps every "
                    f"vector's length (cos² + sin² = 1).",
                )
            if not torch.allclose(got[0], eye[c], atol=1e-6) and int(positions[0]) == 0:
                fail(
                    ex, f"{what}: at position 0 the vector changed: the angle 0·w_i is 0, R_0 = I."
                )
            i = c % half  # the pair of column c
            partner = c + half if c < half else c - half
            outside = [j for j in range(d) if j not in (c, partner)]
            leak = got[:, outside].abs().amax() if outside else torch.tensor(0.0)
            if float(leak) > 1e-6:
                row, col = (int(v) for v in (got[:, outside].abs() > 1e-6).nonzero()[0])
                col = outside[col]
                interleaved = col == (c ^ 1)
                fail(
                    ex,
                    f"{what}: column {c} leaked into column {col} at position "
                    f"{int(positions[row])}; in the half-split layout column {c} is paired with "
                    f"column {partner} only"
                    + (
                        " (you paired columns 2i, 2i+1: the interleaved layout)."
                        if interleaved
                        else "."
                    ),
                )
            angle = positions.double() * _rates(d)[i]  # [n]
            cos, sin = torch.cos(angle), torch.sin(angle)
            own, other = got[:, c], got[:, partner]  # [n] each
            # e_i -> (c, s) on (i, i+d/2); e_(i+d/2) -> (-s, c) on (i, i+d/2)
            want_other = sin if c < half else -sin
            if torch.allclose(own, cos, atol=1e-6) and torch.allclose(other, want_other, atol=1e-6):
                continue
            if torch.allclose(own, cos, atol=1e-6) and torch.allclose(
                other, -want_other, atol=1e-6
            ):
                fail(
                    ex,
                    f"{what}: pair {i} turns the wrong way (the transposed rotation): Llama's is "
                    f"out[i] = c·x[i] - s·x[i+d/2], out[i+d/2] = s·x[i] + c·x[i+d/2].",
                )
            j = int(((own - cos).abs() + (other - want_other).abs()).argmax())
            fail(
                ex,
                f"{what}: pair {i} (columns {min(c, partner)}, {max(c, partner)}) at position "
                f"{int(positions[j])} is not turned by the angle position·w_{i}, "
                f"w_i = 1/10000^(2i/d) with d = {d}: check the angle of that pair.",
            )
    # random rows of other lengths than 1 (float64): the unit vectors above fix the answer on a
    # basis only, and f(|x|)·R_p x (x normalized first, say) passes them all; R_p x keeps each
    # length and is linear, R_p x = sum_c x_c R_p e_c, with R_p e_c the answer's own (checked)
    d, positions = 16, torch.tensor([0, 1, 3, 10, 57])  # [n]: d and positions tried above
    n = len(positions)
    g = torch.Generator().manual_seed(5)
    lengths = torch.tensor([0.05, 0.7, 2.5, 40.0, 3.3], dtype=torch.float64)  # [n]
    x = torch.randn(n, d, dtype=torch.float64, generator=g)  # [n, d]
    x = x / x.norm(dim=1, keepdim=True) * lengths[:, None]  # [n, d]: row p has length lengths[p]
    got, what = _rotary_output(ex, fn, x, positions, name)
    kept = got.norm(dim=1) / lengths  # [n]: 1 for a rotation
    if not torch.allclose(kept, torch.ones_like(kept), rtol=0, atol=1e-5):
        p = int((kept - 1).abs().argmax())
        normalized = torch.allclose(got.norm(dim=1), torch.ones(n, dtype=torch.float64), atol=1e-5)
        fail(
            ex,
            f"{what}: a random row of length {fmt(lengths[p], 3)} came out with length "
            f"{fmt(got.norm(dim=1)[p], 3)}: a rotation keeps every vector's length"
            + (
                "; every row came out with length 1: do not normalize x, turn x itself."
                if normalized
                else ": turn x itself, do not rescale it."
            ),
        )
    eye = torch.eye(d, dtype=torch.float64)  # [d, d]
    turned = torch.stack(
        [_rotary_output(ex, fn, eye[c].expand(n, d).clone(), positions, name)[0] for c in range(d)]
    )  # [d, n, d]: row p of turned[c] is R_p e_c (the answer's own, checked above)
    linear = torch.einsum("pc,cpj->pj", x, turned)  # [n, d]: sum_c x_c R_p e_c
    wrong = (got - linear).norm(dim=1) > 1e-5 * lengths  # [n]
    if wrong.any():
        p = int(wrong.nonzero()[0])
        fail(
            ex,
            f"{what}: a random row x at position {int(positions[p])} did not come out as R_p x: "
            "a rotation is linear, R_p x = sum over c of x_c·R_p e_c (each unit vector turned, "
            "scaled by x_c, added up); the output must depend on x only through that.",
        )
    # the relative property, on random q and k (a consequence; a last line of defence)
    g = torch.Generator().manual_seed(0)
    d = 16
    q, k = torch.randn(2, d, dtype=torch.float64, generator=g)  # [d] each
    p = torch.arange(0, 300, 13)  # [m]
    spreads = []
    for delta in (0, 1, 5, -7):
        qp, _ = _rotary_output(ex, fn, q.expand(len(p), d).clone(), p, name)
        kq, _ = _rotary_output(ex, fn, k.expand(len(p), d).clone(), p + delta, name)
        score = (qp * kq).sum(dim=1)  # [m]: q_p·k_(p+delta)
        spreads.append(float(score.max() - score.min()))
    if max(spreads) > 1e-4:  # float32 answers move by ~1e-5 here; a wrong layout by ~1
        fail(
            ex,
            "the score q_p·k_q changes along a fixed offset p - q: it must depend only on p - q.",
        )
    passed(
        ex,
        "each pair (i, i + d/2) turns by position·w_i, lengths are kept, and q_p·k_q was the same "
        "for every p at each offset tried.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 6: ALiBi's bias for any number of heads (C4.8, predict then verify)
# --------------------------------------------------------------------------------------------


def _alibi_slopes_of(ex, fn, n_heads: int, n: int = 5) -> torch.Tensor:
    """The student's bias for (n_heads, n), checked to be -m_h |p - q|; returns the m_h."""
    name = "alibi_bias_for"
    what = f"{name}({n_heads}, {n})"
    got = call_refusing(ex, fn, (n_heads, n), FORBIDDEN["l4_ex6"], name=name)
    got = as_tensor(ex, got, name=what, shape=(n_heads, n, n), layout="[n_heads, n, n]")
    b = got.detach().to(torch.float64)
    idx = torch.arange(n)
    distance = (idx[:, None] - idx[None, :]).abs().double()  # [n, n]
    if b.diagonal(dim1=1, dim2=2).abs().max() > 1e-9:
        fail(ex, f"{what}: the diagonal (p = q, distance 0) must be 0: the bias is -m·|p - q|.")
    if not torch.allclose(b, b.transpose(1, 2), atol=1e-9):
        fail(ex, f"{what} is not symmetric in p and q: the bias depends on the distance |p - q|.")
    slopes = -b[:, 0, 1]  # [h]: minus the bias at distance 1
    if not torch.allclose(b, -slopes[:, None, None] * distance, rtol=1e-6, atol=1e-9):
        fail(
            ex,
            f"{what}: within a head the bias must fall by the same m_h per position of distance "
            f"(-m_h·|p - q|, a straight line in the distance).",
        )
    if (slopes <= 0).any():
        fail(
            ex, f"{what}: a slope m_h is <= 0; ALiBi penalises distance: -m_h·|p - q| with m_h > 0."
        )
    return slopes


def check_alibi_bias(fn) -> None:
    """Lesson 4, exercise 6 (C4.8). ``fn(n_heads, n)`` returns ALiBi's bias [n_heads, n, n],
    ``-m_h |p - q|``. Tested by properties: the shape, a zero diagonal, symmetry, a straight line
    in the distance; for a power of two, slopes ``m_h = 2^(-8h/n_heads)`` (the geometric sequence
    of the paper); for any other count, the paper's recipe read against the student's own answers:
    the slopes of the closest power of two N below, then every other slope of 2N heads. Calling
    the course's ``alibi_bias`` or ``alibi_slopes`` is refused (:data:`FORBIDDEN`)."""
    ex = "Exercise 6 (ALiBi's bias for any number of heads)"
    for h in (1, 2, 4, 8, 16):
        m = _alibi_slopes_of(ex, fn, h)
        first = 2.0 ** (-8.0 / h)
        ratios = m[1:] / m[:-1]
        if abs(float(m[0]) - first) > 1e-6 * first or not torch.allclose(
            ratios, torch.full_like(ratios, first), rtol=1e-6
        ):
            fail(
                ex,
                f"alibi_bias_for({h}, 5): for {h} heads (a power of two) the slopes are "
                f"m_h = 2^(-8h/{h}), h = 1..{h}: a geometric sequence that starts at 2^(-8/{h}) "
                f"and ends at 2^-8.",
            )
    for h in (3, 5, 6, 12):
        m = _alibi_slopes_of(ex, fn, h)
        closest = 2 ** int(math.floor(math.log2(h)))  # N
        own = _alibi_slopes_of(ex, fn, closest)  # the student's slopes for N heads
        double = _alibi_slopes_of(ex, fn, 2 * closest)  # ... and for 2N heads
        naive = 2.0 ** (-8.0 * torch.arange(1, h + 1, dtype=torch.float64) / h)
        if torch.allclose(m, naive, rtol=1e-6):
            fail(
                ex,
                f"alibi_bias_for({h}, 5): you used 2^(-8h/{h}) for {h} heads, which is not a "
                f"power of two; the paper's recipe takes the {closest} slopes of {closest} heads "
                f"first, then every other slope of {2 * closest} heads.",
            )
        if not torch.allclose(m[:closest], own, rtol=1e-6):
            fail(
                ex,
                f"alibi_bias_for({h}, 5): its first {closest} slopes must be those of "
                f"{closest} heads (the closest power of two below {h}), in the same order.",
            )
        extra = m[closest:]
        if torch.allclose(extra, double[1::2][: h - closest], rtol=1e-6):
            fail(
                ex,
                f"alibi_bias_for({h}, 5): the extra slopes are the 2nd, 4th, ... of "
                f"{2 * closest} heads, which are the ones of {closest} heads again; take the 1st, "
                f"3rd, 5th, ...",
            )
        if not torch.allclose(extra, double[0::2][: h - closest], rtol=1e-6):
            fail(
                ex,
                f"alibi_bias_for({h}, 5): after the first {closest}, the slopes must be every "
                f"other slope of {2 * closest} heads (the 1st, 3rd, ...), {h - closest} of them.",
            )
    m6 = _alibi_slopes_of(ex, fn, 6)
    shown = ", ".join(f"1/{2 ** round(-math.log2(float(v)))}" for v in m6)  # powers of 2
    passed(ex, f"the slopes for 6 heads are {shown}: compare with your prediction.")
