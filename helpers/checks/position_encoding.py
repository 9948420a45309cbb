"""Lesson 4 exercise checks (the core notebook, 04): which column pair tells two positions apart
(predict, then verify), the offset q - p read off two rows of the table (C4.6 and the
wavelengths), and a probe for permutation-equivariance tried on layers the lesson did not show
(C4.1, transfer). The companion 04b's checks are in :mod:`helpers.checks.position_attention`;
the lessons import both through :mod:`helpers.checks.position`.

Each check calls the student's function on a few inputs, prints ``✓ ...`` when it is right and
otherwise raises :class:`~helpers.checks.ExerciseFailed` with a message that names the mistake:
None returned, not implemented yet, the function raised, wrong shape or dtype, NaN, a column
index for a pair index, an angle not wrapped, the output rows not permuted ...

These are the student's instant feedback, not the grade: the grade comes from hidden tests on
other cases (``helpers.grading``). So nothing here holds an answer: a check tests properties that
a right answer must have (a pair's point on the unit circle, the offset a case was built from, a
layer's behaviour under a swap of two rows), computed inside the check, and no verdict prints an
expected value of a hidden case.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..positional import sinusoidal_encoding_at
from ..printing import fmt
from ._core import call, call_described, fail, passed

__all__ = ["check_best_pair", "check_offset_between", "check_permutation_probe"]

BASE = 10000.0

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
# Exercise 2: read the offset q - p off two rows of the table (C4.6 and the wavelengths)
# --------------------------------------------------------------------------------------------

# (d_model, p, k): offsets k = q - p from 1 to beyond what the second-slowest pair can read, with
# p and q where the slowest pair's angle wraps around; every |k| below half the longest wavelength
_OFFSET_CASES = (
    (16, 0, 3),
    (16, 40, -25),
    (16, 100, 5000),
    (16, 8000, 6000),
    (16, 15000, -9000),
    (8, 3, 3000),
    (64, 500, 1),
    (64, 30000, -20000),
    (512, 7, 12345),
)


def _as_whole_number(ex: str, got, what: str) -> int:
    if got is None:
        fail(ex, f"{what} returned None: did you forget to `return` the offset?")
    size = got.numel() if isinstance(got, torch.Tensor) else np.size(got)
    if isinstance(got, torch.Tensor | np.ndarray) and size != 1:
        fail(ex, f"{what} returned an array of shape {list(got.shape)}: return one whole number.")
    if isinstance(got, torch.Tensor | np.ndarray | np.generic):
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, int | float):
        fail(ex, f"{what} returned {got!r} (a {type(got).__name__}); return a whole number.")
    if isinstance(got, float):
        if not math.isfinite(got):
            fail(ex, f"{what} returned {got}: return a whole number of positions.")
        if not got.is_integer():
            fail(
                ex,
                f"{what} returned {fmt(got, 8)}: an offset is a whole number of positions; "
                f"round your estimate (round(x), not int(x), which cuts 4999.9999 to 4999).",
            )
        got = int(got)
    return got


def _readings(pe_p: torch.Tensor, pe_q: torch.Tensor) -> tuple[list[int], list[int]]:
    """What reading one pair alone gives, for each pair i: the angle turned, wrapped into
    (-pi, pi], over w_i (``wrapped``), and the difference of the two angles without wrapping
    (``unwrapped``), both rounded. Mistakes to recognise, not the answer: the check knows k."""
    d = pe_p.shape[0]
    w = BASE ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)  # [d/2]
    a_p = torch.atan2(pe_p[0::2], pe_p[1::2])  # [d/2]: angle of (sin, cos), in (-pi, pi]
    a_q = torch.atan2(pe_q[0::2], pe_q[1::2])
    turned = torch.remainder(a_q - a_p + math.pi, 2 * math.pi) - math.pi  # [d/2], wrapped
    return [round(float(v)) for v in turned / w], [round(float(v)) for v in (a_q - a_p) / w]


def check_offset_between(fn, cases=_OFFSET_CASES) -> None:
    """Lesson 4, exercise 2 (C4.6). ``fn(pe_p, pe_q)`` gets two rows of the sinusoidal table,
    PE(p) and PE(q) [d_model] in float64, and returns the offset k = q - p, a whole number. By
    C4.6 each pair of PE(q) is the same pair of PE(p) turned by the angle k·w_i; an angle is only
    known modulo 2π, so a pair tells k only modulo its wavelength 2π/w_i. The check builds each
    case from p and k and compares; a wrong answer is matched against what reading a single
    pair gives (with and without wrapping the angle), to name the mistake."""
    ex = "Exercise 2 (the offset between two positions)"
    name = "offset_between"
    for d, p, k in cases:
        q = p + k
        pe = sinusoidal_encoding_at([p, q], d, dtype=torch.float64)  # [2, d]
        what = f"{name}(PE({p}), PE({q})) at d_model = {d}"
        got = _as_whole_number(ex, call(ex, fn, pe[0].clone(), pe[1].clone(), name=name), what)
        if got == k:
            continue
        if got == -k:
            fail(
                ex,
                f"{what} returned {got}: that is p - q; the offset asked for is q - p "
                f"(PE(q) = R_k PE(p) with k = q - p).",
            )
        wrapped, unwrapped = _readings(pe[0], pe[1])
        last = d // 2 - 1
        lam = [2 * math.pi * BASE ** (2 * i / d) for i in range(d // 2)]
        if got == unwrapped[last] and got != wrapped[last]:
            fail(
                ex,
                f"{what} returned {got}, off by the slowest pair's wavelength "
                f"({fmt(lam[last], 5)} positions): its angle at p or q went past ±π, and an "
                f"angle is known only modulo 2π. Wrap the difference of the angles into "
                f"(-π, π] (or take the angle between the two (sin, cos) points directly).",
            )
        for i in range(last - 1, -1, -1):
            if got in (wrapped[i], unwrapped[i]):
                fail(
                    ex,
                    f"{what} returned {got}: that is what pair {i} alone gives, and pair {i} "
                    f"repeats every {fmt(lam[i], 4)} positions, so it cannot tell an offset "
                    f"from one {fmt(lam[i], 4)} larger or smaller. Which pair turns slowly "
                    f"enough to read an offset of this size?",
                )
        fail(
            ex,
            f"{what} returned {got}, which is not q - p: by C4.6 pair i of PE(q) is pair i of "
            f"PE(p) turned by the angle (q - p)·w_i, with w_i = 1/10000^(2i/d_model) and pair i "
            f"= (column 2i: sin, column 2i+1: cos).",
        )
    largest = max(abs(k) for _, _, k in cases)
    passed(
        ex,
        f"all {len(cases)} offsets right, up to {largest:,} positions; at d_model = 16 an offset "
        f"of 5,000 needs the slowest pair (pair 7, wavelength "
        f"{fmt(2 * math.pi * BASE ** (14 / 16), 5)}): pair 6 repeats every "
        f"{fmt(2 * math.pi * BASE ** (12 / 16), 4)} positions.",
    )


# --------------------------------------------------------------------------------------------
# Exercise 3: a probe for permutation-equivariance, tried on layers the lesson did not show
# (C4.1, transfer)
# --------------------------------------------------------------------------------------------


class _Layer(nn.Module):
    """A layer of the check, [1, n, d] -> [1, n, d], named for the verdicts."""

    def __init__(self, name: str, forward, *modules: nn.Module):
        super().__init__()
        self.name = name
        self._forward = forward
        self.parts = nn.ModuleList(modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._forward(x)

    def extra_repr(self) -> str:
        return self.name


def _probe_layers(n: int, d: int) -> list[tuple[_Layer, bool]]:
    """The visible check's layers and whether each is permutation-equivariant (by construction:
    C4.1 for attention without a mask and for anything that treats each row alike; a mask, a
    position vector or a neighbour breaks it for every permutation that is not the identity)."""
    from ..attention import MultiHeadAttention  # noqa: PLC0415 - the check's own layers

    with torch.random.fork_rng(), torch.no_grad():  # the caller's random stream is left alone
        torch.manual_seed(401)  # the layers' weights: the same on every run
        attention = MultiHeadAttention(d, 2).double().eval()
        causal = MultiHeadAttention(d, 2, causal=True).double().eval()
        mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d)).double()
        pe = sinusoidal_encoding_at(range(n), d, dtype=torch.float64)  # [n, d]
        mix = torch.randn(n, n, dtype=torch.float64)  # [n, n]
        mix = 0.5 * (mix - mix.mean(dim=0, keepdim=True))  # each column sums to 0
    return [
        (_Layer("self-attention without a mask", attention, attention), True),
        (_Layer("causal self-attention", causal, causal), False),
        (_Layer("the same two-layer network applied to each row", mlp, mlp), True),
        (_Layer("self-attention after adding PE(p) to row p", lambda x: attention(x + pe)), False),
        (
            _Layer("each row minus the mean of all rows", lambda x: x - x.mean(1, keepdim=True)),
            True,
        ),
        (
            _Layer(
                "each row minus the row before it (row 0 kept)",
                lambda x: torch.cat([x[:, :1], x[:, 1:] - x[:, :-1]], dim=1),
            ),
            False,
        ),
        # two layers whose sum over the rows does not change when the rows are permuted, though
        # they commute with no permutation of the rows (not with a transposition either): a probe
        # that compares sums (or means) over the positions is fooled
        (_Layer("PE(p) added to row p", lambda x: x + pe), False),
        (
            _Layer(
                "each row plus a fixed mix of all the rows (the sum over the rows kept)",
                lambda x: x + torch.einsum("pq,bqd->bpd", mix, x),
            ),
            False,
        ),
    ]


def _as_verdict(ex: str, got, what: str) -> bool:
    if isinstance(got, np.bool_) or (
        isinstance(got, torch.Tensor) and got.dtype == torch.bool and got.numel() == 1
    ):
        got = bool(got)
    if not isinstance(got, bool):
        fail(ex, f"{what} returned {got!r} (a {type(got).__name__}); return True or False.")
    return got


def check_permutation_probe(fn) -> None:
    """Lesson 4, exercise 3 (C4.1, transfer). ``fn(layer, x)`` says (True/False) whether
    ``layer`` ([1, n, d] -> [1, n, d]) is permutation-equivariant, by experiment on ``x``
    [1, n, d] (float64). Tried on eight layers, three equivariant and five not (two of those
    keep the sum over the rows, so a probe comparing sums is refused), most of them not shown in
    the lesson; a wrong verdict is explained from the layer's real behaviour on that ``x``."""
    ex = "Exercise 3 (a probe for permutation-equivariance)"
    name = "is_permutation_equivariant"
    n, d = 6, 8
    g = torch.Generator().manual_seed(7)
    said = []
    for layer, truth in _probe_layers(n, d):
        x = torch.randn(1, n, d, dtype=torch.float64, generator=g)  # [1, n, d]
        what = f"{name}({layer.name}, x)"
        got = _as_verdict(
            ex,
            call_described(ex, fn, (layer, x.clone()), name=name, shown=f"<{layer.name}>, x"),
            what,
        )
        said.append((layer.name, got))
        if got == truth:
            continue
        swap = [1, 0, *range(2, n)]  # positions 0 and 1 exchanged
        with torch.no_grad():
            gap = float((layer(x[:, swap]) - layer(x)[:, swap]).abs().max())
        if truth:
            problem = (
                f"this layer is permutation-equivariant: layer(x[:, order]) equals "
                f"layer(x)[:, order] for every order (here, with positions 0 and 1 swapped, "
                f"they agree {'exactly' if gap == 0 else f'to within {gap:.1e}'}). Did you permute the output rows the same way as the input rows "
                f"before comparing? Compare with a tolerance (torch.allclose): sums taken in "
                f"another order differ in the last digits."
            )
        else:
            with torch.no_grad():
                sums = float((layer(x[:, swap]).sum(1) - layer(x).sum(1)).abs().max())
            problem = (
                f"this layer is not permutation-equivariant: with positions 0 and 1 swapped, "
                f"layer(x[:, order]) and layer(x)[:, order] differ by up to {fmt(gap, 2)}. Does "
                f"your probe really permute something (an order that is not the identity), and "
                f"compare layer(x[:, order]) with layer(x)[:, order]?"
            )
            if sums < 1e-9:
                problem += (
                    " Their sums (and means) over the rows agree, so a probe that compares sums "
                    "over the positions cannot see it: compare the rows themselves."
                )
        fail(ex, f"{what} returned {got}: {problem}")
    shown = "; ".join(f"{layer_name}: {'yes' if got else 'no'}" for layer_name, got in said)
    passed(ex, f"your probe's verdicts: {shown}. Compare them with your predictions.")
