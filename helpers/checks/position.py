"""Lesson 4 exercise checks: which column pair tells two positions apart (a predict-then-verify
exercise), the sinusoidal encoding, the wavelength of a column pair, the rotation R_k, and which
positions a learned table can answer for.

Each check calls the student's function on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` with a message that names the mistake:
None returned, not implemented yet, the function raised, wrong shape (or positions and dimensions
transposed), wrong dtype, NaN, sin and cos swapped, the concatenated layout instead of the
interleaved one, i instead of 2i in the exponent, the wrong base, positions counted from 1 ...
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..positional import (
    LearnedPositionalEmbedding,
    PositionOutOfRange,
    angle_rates,
    rotation_matrix,
    sinusoidal_encoding_at,
    wavelengths,
)
from ..printing import fmt
from ._core import as_number, as_tensor, call, expect_close, fail, passed

__all__ = [
    "check_best_pair",
    "check_encoding",
    "check_wavelength",
    "check_rotation",
    "check_has_rows",
]

BASE = 10000.0


# --------------------------------------------------------------------------------------------
# Exercise 1: which pair tells two positions apart (predict, then verify)
# --------------------------------------------------------------------------------------------


def pair_gaps(p, q, d_model: int) -> torch.Tensor:
    """Lesson 4. For each column pair i, the distance between the points
    (PE(p, 2i), PE(p, 2i+1)) and (PE(q, 2i), PE(q, 2i+1)) on the unit circle:
    ``2 |sin((q - p) w_i / 2)|``. Returns a float64 tensor [d_model // 2]."""
    pe = sinusoidal_encoding_at([p, q], d_model, dtype=torch.float64)  # [2, d_model]
    return (pe[0] - pe[1]).reshape(d_model // 2, 2).norm(dim=1)  # [d_model/2]


# (p, q, d_model): chosen so that the best pair beats the second best by a wide margin
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
    """Lesson 4, exercise 1 (predict, then verify). ``fn(p, q, d_model)`` must return the index
    i of the column pair (columns 2i, 2i+1) whose point (sin, cos) moves farthest between
    positions p and q, the pair that tells p and q apart best. Not always the fastest pair:
    pair i has turned by (q - p)·w_i, and only that angle modulo 2π counts."""
    ex = "Exercise 1 (which pair tells two positions apart)"
    for p, q, d in cases:
        what = f"best_pair({p}, {q}, {d})"
        got = _as_pair_index(ex, call(ex, fn, p, q, d, name="best_pair"), what, d)
        gaps = pair_gaps(p, q, d)  # [d/2], float64
        want = int(gaps.argmax())
        if got == want:
            continue
        turned = (q - p) * float(angle_rates(d)[0])

        def gap(i, gaps=gaps):
            return fmt(gaps[i], decimals=3)

        if got in (2 * want, 2 * want + 1) and not 0 <= got < d // 2:
            problem = (
                f"{got} is a column index; return the pair index i (pair i is columns 2i and 2i+1), "
                f"here {got} // 2."
            )
        elif got in (2 * want, 2 * want + 1):
            problem = (
                f"pair {got} moves {gap(got)}, pair {want} moves {gap(want)}; did you return a "
                f"column index? Pair i is columns 2i and 2i+1: return i."
            )
        elif not 0 <= got < d // 2:
            problem = f"there are only d_model/2 = {d // 2} pairs, numbered 0..{d // 2 - 1}."
        elif got == 0:
            problem = (
                f"pair 0 turns fastest, but over q - p = {q - p} positions it turns by "
                f"{fmt(turned, 4)} rad, which is {math.floor(turned / (2 * math.pi))} full turns "
                f"plus {fmt(math.fmod(turned, 2 * math.pi), 3)} rad: its point ends up a distance "
                f"{gap(0)} from where it started. Pair {want} moves {gap(want)}. The distance is "
                f"2|sin((q-p)·w_i/2)|: what counts is the angle modulo 2π."
            )
        elif got == d // 2 - 1:
            problem = (
                f"the slowest pair barely moves over {q - p} positions (distance {gap(got)}); "
                f"pair {want} moves {gap(want)}."
            )
        elif got == int(gaps.argmin()):
            problem = (
                f"pair {got} is the one that tells them apart worst (distance {gap(got)}): "
                f"you want the largest distance, pair {want} ({gap(want)})."
            )
        elif got == want + 1:
            problem = (
                f"pair {got} moves {gap(got)}, pair {want} moves {gap(want)}: pairs are numbered "
                f"from 0 (pair 0 is columns 0 and 1)."
            )
        else:
            sin_gap = (sinusoidal_encoding_at([p, q], d, dtype=torch.float64)[:, 0::2]).diff(dim=0)
            if got == int(sin_gap.abs().argmax()):
                problem = (
                    f"pair {got} has the largest change of its sin column, but a pair is the point "
                    f"(sin, cos): compare both columns (pair {got} moves {gap(got)}, "
                    f"pair {want} {gap(want)})."
                )
            else:
                problem = (
                    f"pair {got} moves {gap(got)} between positions {p} and {q}, pair {want} "
                    f"moves {gap(want)}: measure the distance of each pair's (sin, cos) point."
                )
        fail(ex, f"{what} returned {got}: {problem}")
    p, q, d = cases[0]
    gaps = pair_gaps(p, q, d)
    want = int(gaps.argmax())
    turned = (q - p) * float(angle_rates(d)[0])  # pair 0's angle, w_0 = 1
    passed(
        ex,
        f"positions {p} and {q} at d_model {d} are told apart best by pair {want} "
        f"(distance {fmt(gaps[want], decimals=3)} of at most 2); the fastest pair 0 moves only "
        f"{fmt(gaps[0], decimals=3)}: it has turned {fmt(turned, 4)} rad, "
        f"{math.floor(turned / (2 * math.pi))} full turns plus "
        f"{fmt(math.fmod(turned, 2 * math.pi), 2)} rad.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 1: the encoding
# --------------------------------------------------------------------------------------------


def _table(
    n: int, d: int, *, base=BASE, exponent=lambda i, d: 2 * i / d, start=0, layout="interleaved"
):
    """A float64 table [n, d] built with a (possibly wrong) recipe, to recognise mistakes."""
    pos = torch.arange(start, start + n, dtype=torch.float64)[:, None]  # [n, 1]
    i = torch.arange(d // 2, dtype=torch.float64)[None, :]  # [1, d/2]
    angles = pos / base ** exponent(i, d)  # [n, d/2]
    pe = torch.empty(n, d, dtype=torch.float64)  # [n, d]
    if layout == "interleaved":
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    elif layout == "swapped":
        pe[:, 0::2], pe[:, 1::2] = torch.cos(angles), torch.sin(angles)
    else:  # "concatenated": all sin columns first, then all cos columns
        pe[:, : d // 2], pe[:, d // 2 :] = torch.sin(angles), torch.cos(angles)
    return pe


_ENCODING_MISTAKES = [
    (
        dict(layout="swapped"),
        "sin and cos are swapped: even columns 2i must hold sin(pos·w_i), odd columns 2i+1 "
        "cos(pos·w_i).",
    ),
    (
        dict(layout="concatenated"),
        "you put all the sin columns first and all the cos columns after them; the paper "
        "interleaves them: column 2i is sin, column 2i+1 is cos of the same angle "
        "(write into pe[:, 0::2] and pe[:, 1::2]).",
    ),
    (
        dict(exponent=lambda i, d: i / d),
        "the exponent uses i where it needs 2i: the angle rate of pair i is 1/10000^(2i/d_model) "
        "(with i = 0, 1, ..., d_model/2 - 1), so your waves slow down too slowly across the pairs.",
    ),
    (
        dict(exponent=lambda i, d: 4 * i / d),
        "the exponent uses the column index 2i where the formula has i: with j = 2i the rate is "
        "1/10000^(j/d_model), not 1/10000^(2j/d_model); your waves slow down twice too fast.",
    ),
    (
        dict(exponent=lambda i, d: -2 * i / d),
        "the angle is pos × 10000^(2i/d_model); it should be pos ÷ 10000^(2i/d_model) "
        "(the higher the pair, the slower the wave).",
    ),
    (
        dict(start=1),
        "the positions start at 1; they start at 0 (row 0 is position 0: sin 0 = 0, cos 0 = 1).",
    ),
]


def _estimated_base(got: torch.Tensor, d: int) -> float | None:
    """If ``got`` is an interleaved sin/cos table with another base, return that base."""
    if got.shape[0] < 2 or d < 4:
        return None
    w1 = math.atan2(float(got[1, 2]), float(got[1, 3]))  # angle of pair 1 at position 1
    if not 0 < w1 < 1:
        return None
    base = w1 ** (-d / 2)  # w_1 = base^(-2/d)
    if not math.isfinite(base) or abs(base - BASE) / BASE < 1e-3:
        return None
    n = got.shape[0]
    if torch.allclose(got.to(torch.float64), _table(n, d, base=base), atol=1e-3):
        return base
    return None


def check_encoding(fn, cases=((50, 16), (7, 8), (33, 128))) -> None:
    """Lesson 4 (formerly exercise 1). ``fn(n_positions, d_model)`` must return the table [n, d_model] of
    ``PE(pos, 2i) = sin(pos / 10000^(2i/d_model))``, ``PE(pos, 2i+1) = cos(same)``."""
    ex = "Exercise 1 (the sinusoidal encoding)"
    name = "my_positional_encoding"
    for n, d in cases:
        got = call(ex, fn, n, d, name=name)
        what = f"{name}({n}, {d})"
        if isinstance(got, torch.Tensor) and got.dim() == 2 and tuple(got.shape) == (d, n):
            fail(
                ex,
                f"{what} has shape [{d}, {n}]: positions and dimensions are transposed. "
                f"One row per position: expected [n_positions, d_model] = [{n}, {d}].",
            )
        if isinstance(got, torch.Tensor) and not (got.is_floating_point() or got.is_complex()):
            fail(
                ex,
                f"{what} has dtype {got.dtype}: sin and cos values need a floating-point tensor "
                f"(torch.float32); an integer tensor rounds them all to 0, 1 or -1.",
            )
        got = as_tensor(ex, got, name=what, shape=(n, d), layout="[n_positions, d_model]")
        want = _table(n, d)
        if torch.allclose(got.to(torch.float64), want, atol=1e-4):
            continue
        first = slice(0, min(d, 6))  # pairs 0-2: small angles, exact even in float32
        for recipe, problem in _ENCODING_MISTAKES:
            mistake = _table(n, d, **recipe)
            if torch.allclose(got[:, first].to(torch.float64), mistake[:, first], atol=1e-3):
                fail(ex, f"{what}: {problem}")
        base = _estimated_base(got, d)
        if base is not None:
            fail(
                ex,
                f"{what} uses the base {base:.4g} in 1/base^(2i/d_model); the paper's base is "
                f"10000 (write 10000.0, not 1e-4 or 10_000 ** -1).",
            )
        expect_close(ex, got, want.to(got.dtype), name=what)
    passed(ex, "sin at even columns, cos at odd columns, rate 1/10000^(2i/d_model).")


# --------------------------------------------------------------------------------------------
# Exercise 2: the wavelength of pair i
# --------------------------------------------------------------------------------------------

_WAVELENGTH_MISTAKES = [
    (
        lambda i, d: BASE ** (2 * i / d),
        "you returned 1/w_i = 10000^(2i/d_model), the positions per radian. One full period is "
        "2π radians, so the wavelength is 2π/w_i = 2π·10000^(2i/d_model).",
    ),
    (
        lambda i, d: BASE ** (-2 * i / d),
        "you returned the angle rate w_i (radians per position), not the wavelength "
        "(positions per full turn): the wavelength is 2π/w_i.",
    ),
    (
        lambda i, d: 2 * math.pi * BASE ** (-2 * i / d),
        "you returned 2π·w_i; the wavelength is 2π/w_i = 2π·10000^(2i/d_model) "
        "(a slow wave has a long wavelength).",
    ),
    (
        lambda i, d: 2 * math.pi * BASE ** (i / d),
        "the exponent uses i where it needs 2i: the wavelength of pair i is 2π·10000^(2i/d_model).",
    ),
    (
        lambda i, d: 2 * math.pi * BASE ** (4 * i / d),
        "the exponent is 4i/d_model: i is the pair index (columns 2i and 2i+1), "
        "the exponent is 2i/d_model.",
    ),
    (
        lambda i, d: math.pi * BASE ** (2 * i / d),
        "you returned π·10000^(2i/d_model), half the wavelength: one full period is 2π radians.",
    ),
]


def check_wavelength(
    fn, cases=((100, 512), (1, 512), (255, 512), (3, 16), (7, 16), (0, 512))
) -> None:
    """Lesson 4, exercise 2. ``fn(i, d_model)`` must return the wavelength of pair i, in
    positions: ``2π / w_i = 2π · 10000^(2i/d_model)`` (2π for pair 0, the fastest)."""
    ex = "Exercise 2 (the wavelength of pair i)"
    for i, d in cases:
        what = f"wavelength({i}, {d})"
        got = as_number(ex, call(ex, fn, i, d, name="wavelength"), name=what)
        want = float(wavelengths(d)[i])
        if math.isclose(got, want, rel_tol=1e-4):
            continue
        for formula, problem in _WAVELENGTH_MISTAKES:
            if math.isclose(got, formula(i, d), rel_tol=1e-4):
                fail(ex, f"{what} = {got:.6g}: {problem}")
        fail(ex, f"{what} = {got:.6g}, expected {want:.6g} (2π·10000^(2i/d_model)).")
    passed(
        ex,
        f"pair 0 is the fastest (wavelength 2π ≈ 6.283), pair 255 of d_model 512 the slowest "
        f"({float(wavelengths(512)[-1]):,.0f} positions).",
    )


# --------------------------------------------------------------------------------------------
# Exercise 3: the rotation R_k
# --------------------------------------------------------------------------------------------


def check_rotation(fn, cases=((3, 16), (1, 8), (10, 64), (0, 8))) -> None:
    """Lesson 4, exercise 3. ``fn(k, d_model)`` must return R_k [d_model, d_model] with
    ``PE(p + k) = R_k @ PE(p)`` for every position p: a 2x2 block per pair i,
    ``[[cos kw_i, sin kw_i], [-sin kw_i, cos kw_i]]``."""
    ex = "Exercise 3 (the rotation R_k)"
    name = "rotation_for_offset"
    positions = torch.tensor([0.0, 1, 5, 17, 100, 1234])
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
        r = got.to(torch.float64)
        want = rotation_matrix(k, d)
        if torch.allclose(r, want, atol=1e-6):
            continue
        if k and torch.allclose(r, want.T, atol=1e-6):
            fail(
                ex,
                f"{what} is R_(-k), the transpose: it moves PE back by k positions "
                f"(R_(-k) PE(p) = PE(p - k)). Swap the signs of the two sin entries of each block.",
            )
        if k and torch.allclose(r, torch.eye(d, dtype=torch.float64), atol=1e-6):
            fail(ex, f"{what} is the identity: R_k must turn pair i by the angle k·w_i.")
        pe_p = sinusoidal_encoding_at(positions, d, dtype=torch.float64)  # [m, d]
        pe_pk = sinusoidal_encoding_at(positions + k, d, dtype=torch.float64)  # [m, d]
        moved = pe_p @ r.T  # [m, d]: row j is R_k @ PE(p_j)
        if not torch.allclose(r @ r.T, torch.eye(d, dtype=torch.float64), atol=1e-6):
            fail(
                ex,
                f"{what} is not orthogonal (R Rᵀ ≠ I): a rotation keeps every vector's length. "
                f"Each 2×2 block should be [[cos kw, sin kw], [-sin kw, cos kw]] on columns 2i, 2i+1, "
                f"and zeros elsewhere.",
            )
        bad = (moved - pe_pk).abs().amax(dim=1)  # [m]
        j = int(bad.argmax())
        col = int((moved[j] - pe_pk[j]).abs().argmax())
        fail(
            ex,
            f"{what} @ PE({int(positions[j])}) differs from PE({int(positions[j]) + k}) by "
            f"{float(bad[j]):.3g} at column {col} (pair {col // 2}): check the angle k·w_i of "
            f"that pair, w_i = 1/10000^(2i/d_model).",
        )
    passed(ex, "PE(p + k) = R_k PE(p) at every position tried, with the same R_k.")


# --------------------------------------------------------------------------------------------
# Exercise 4: what a learned table can answer for
# --------------------------------------------------------------------------------------------


def _table_answers(max_len: int, n_tokens: int, offset: int) -> bool:
    """Ask a real LearnedPositionalEmbedding: does it have rows offset..offset+n_tokens-1?"""
    table = LearnedPositionalEmbedding(max_len, 2)
    try:
        table.encoding(n_tokens, offset)
    except PositionOutOfRange:
        return False
    return True


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
    """Lesson 4, exercise 4. ``fn(max_len, n_tokens, offset)`` must say (True/False) whether a
    learned position table with ``max_len`` rows can serve a sequence of ``n_tokens`` tokens that
    starts at position ``offset``, that is whether positions offset..offset+n_tokens-1 all have a
    row. The answer is compared with what :class:`~helpers.LearnedPositionalEmbedding` does."""
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
        want = _table_answers(max_len, n_tokens, offset)
        if got == want:
            continue
        last = offset + n_tokens - 1
        if want:
            problem = (
                f"the table has rows 0..{max_len - 1}, and the last position needed is {last}, "
                f"which has a row: the answer is True."
            )
            if last == max_len - 1:
                problem = (
                    f"the last position needed is {last} = max_len - 1, the table's last row: "
                    f"a table with max_len rows holds a sequence of exactly max_len tokens "
                    f"(check offset + n_tokens <= max_len, not <)."
                )
        else:
            problem = (
                f"the last position needed is {last}, but the table only has rows "
                f"0..{max_len - 1}: it has no row for position {last}, so the answer is False."
            )
            if last == max_len:
                problem += " (Position max_len itself is already one too many: rows start at 0.)"
            if offset and n_tokens <= max_len:
                problem += f" The sequence starts at position {offset}: did you forget the offset?"
        fail(ex, f"{what} returned {got}: {problem}")
    passed(ex, "a learned table serves positions 0..max_len-1 and nothing beyond.")
