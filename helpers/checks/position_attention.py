"""Lesson 4's companion 04b (Going further) exercise checks: rotary position in Llama's
half-split layout (C4.8, transfer) and ALiBi's bias for any number of heads (C4.8, predict then
verify). The core lesson 4's checks are in :mod:`helpers.checks.position_encoding`; the lessons
import both through :mod:`helpers.checks.position`.

Each check calls the student's function on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` with a message that names the mistake
(None returned, the function raised, wrong shape or dtype, NaN, the interleaved layout for the
half-split one, the transposed rotation, the naive slopes ...). Nothing here holds an answer:
a check tests properties a right answer must have, and calling the course's own functions that
compute the answer is refused (:data:`FORBIDDEN`).
"""

from __future__ import annotations

import math

import torch

from ..printing import fmt
from ._core import as_tensor, fail, passed
from .generation import call_refusing
from .position_encoding import BASE

__all__ = ["check_rotary_half_split", "check_alibi_bias", "FORBIDDEN"]

#: The course functions 04b's exercises 1 and 2 may not call (the grader's lists in
#: tools/grading/spec.py are these): they compute the answer outright.
FORBIDDEN = {
    "l4b_ex1": (
        "helpers.positional.apply_rotary",
        "helpers.positional.rotary_in_pass",  # the model's unchecked apply_rotary
        "helpers.positional._turn",  # what both turn with
        "helpers.positional.rotation_matrix",
    ),
    "l4b_ex2": ("helpers.positional.alibi_bias", "helpers.positional.alibi_slopes"),
}


# --------------------------------------------------------------------------------------------
# 04b, exercise 1: rotary position in the half-split layout (C4.8, transfer)
# --------------------------------------------------------------------------------------------


def _rates(d: int) -> torch.Tensor:
    """w_i = 10000^(-2i/d), i = 0..d/2-1, float64 (the exercise states it)."""
    return BASE ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)  # [d/2]


def _rotary_output(ex, fn, x, positions, name):
    what = f"{name}(x of shape {list(x.shape)}, positions)"
    got = call_refusing(ex, fn, (x.clone(), positions.clone()), FORBIDDEN["l4b_ex1"], name=name)
    got = as_tensor(ex, got, name=what, shape=tuple(x.shape), layout="[n, d], like x")
    return got.detach().to(torch.float64), what


def check_rotary_half_split(fn) -> None:
    """Lesson 4, Going further (04b), exercise 1 (C4.8, transfer). ``fn(x, positions)`` turns row p of ``x`` [n, d]
    in Llama's half-split layout: pair i is columns (i, i + d/2), turned by the angle
    ``positions[p] * w_i``: ``out[i] = c x[i] - s x[i + d/2]``, ``out[i + d/2] = s x[i] + c x[i + d/2]``.

    Tested by properties: the shape is kept, every row keeps its length, position 0 changes
    nothing, the unit vector on column i (and on column i + d/2) lands where the rotation of
    pair i sends it, a random row x of any length comes out as R_p x (kept length, and the sum
    of x_c times the answer's own turned unit vectors: a rotation is linear), and the score of
    a query at p and a key at q depends only on p - q. Calling the course's ``apply_rotary`` or
    ``rotation_matrix`` is refused (:data:`FORBIDDEN`)."""
    ex = "Exercise 1 (rotary position, half-split layout)"
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
    p = torch.arange(7, 307, 13)  # [m]: positions, and p - 7 too, are never negative
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
# 04b, exercise 2: ALiBi's bias for any number of heads (C4.8, predict then verify)
# --------------------------------------------------------------------------------------------


def _alibi_slopes_of(ex, fn, n_heads: int, n: int = 5) -> torch.Tensor:
    """The student's bias for (n_heads, n), checked to be -m_h |p - q|; returns the m_h."""
    name = "alibi_bias_for"
    what = f"{name}({n_heads}, {n})"
    got = call_refusing(ex, fn, (n_heads, n), FORBIDDEN["l4b_ex2"], name=name)
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
    """Lesson 4, Going further (04b), exercise 2 (C4.8). ``fn(n_heads, n)`` returns ALiBi's bias [n_heads, n, n],
    ``-m_h |p - q|``. Tested by properties: the shape, a zero diagonal, symmetry, a straight line
    in the distance; for a power of two, slopes ``m_h = 2^(-8h/n_heads)`` (the geometric sequence
    of the paper); for any other count, the paper's recipe read against the student's own answers:
    the slopes of the closest power of two N below, then every other slope of 2N heads. Calling
    the course's ``alibi_bias`` or ``alibi_slopes`` is refused (:data:`FORBIDDEN`)."""
    ex = "Exercise 2 (ALiBi's bias for any number of heads)"
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
