"""K1's second question: *which* position mechanism an attention sublayer has, by experiment.

When an attention sublayer sees order by itself (:mod:`.k1_position`), the audit names what it
observed on a float64 copy of that sublayer, replayed (:func:`.probe.replay`) on inputs it makes
itself, at the length of a probe of its own (32 positions, or the audit's probe when the model
refuses that length). Three observations, none of which reads a name or a configuration:

1. **Which earlier positions it sees.** Position j's input is replaced by another vector; output
   position p *sees* j if it moves. Every distance p - j >= w unseen and every nearer one seen: a
   local attention window of w positions (GPT-Neo's local layers, Mistral's sliding window).
2. **Whether the position effect depends on the content.** Every position gets the same vector
   c. The content part of the scores is then the same for every key, so the derivative of output
   p in input j is ``D_pj = sum_h a_h(p, j) W_O^h W_V^h``, where ``a_h(p, j)`` is the weight head h
   gives key j (the derivative of the weights themselves multiplies values that are all equal, and
   the weights sum to 1). A bias on the scores that depends on positions only (ALiBi, T5) leaves
   ``a_h`` the same for every c; rotary's ``(R_p q_p)·(R_j k_j)`` changes with c, whether or not
   q and k have biases (shrinking the input would leave ``(R_p b_q)·(R_j b_k)``, a distance bias:
   why this probe compares contents rather than scales). ``D`` is taken by autograd.
3. **The shape of the weights over the distance k = p - j**, content fixed:
   *relative* if every row p gives the same functions of k up to each head's normalization (the
   columns ``D_{p, p-k}``, k = 0..K-1, span the same space for every p); *geometric* in k for
   every head, ``a_h ∝ r_h^k`` with 0 < r_h <= 1, i.e. a bias linear in the distance,
   ``-m_h k`` with ``m_h = -ln r_h``: ALiBi (the sequence ``D_{p, p-k}`` then obeys one linear
   recurrence whose roots are the r_h); *equal at neighbouring distances*: distances that share a
   bias, as T5's log-spaced buckets do; *equal over the window*: no bias, only the window.

So: content-dependent and relative is rotary; content-independent, relative and geometric is
ALiBi; content-independent, relative and not geometric is a learned bias per distance (T5's
relative bias); content-independent with equal weights is a window only; a position effect that
is not relative is named as position by absolute index. Where an observation cannot be made (the
copy cannot be replayed in float64, too few distances to test a shape) the report says the probe
cannot tell, and why, instead of guessing. A relative scheme that mixes content and distance in
another way than rotation (Transformer-XL's) would also be named rotary by this probe: rotary is
the one in current decoders (Llama, Mistral, Falcon, GPT-NeoX).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from ..printing import fmt
from .probe import _FMT_DTYPES, Call, Layout, replay

__all__ = ["Mechanism", "observe_mechanism", "LONG_N"]

#: The length of the audit's own probe for naming a mechanism (the checks' probe has 8 positions).
LONG_N = 32
# The derivatives come from autograd on a float64 copy, but what the copy is handed may be rounded
# (a half-precision model's rotary tables and masks) or a model may compute parts in float32
# inside (Bloom's softmax): measured on the test models, "equal" quantities then differ by up to
# 2e-8 (float32 parts) and 2.4e-5 (bfloat16 rotary tables), while the effects that tell the
# mechanisms apart are 1.8e-3 and more (content changes) and 0.44 and more (shapes off the
# shared span, recurrence misfits). The thresholds sit between, with a factor of 40 or more.
_MOVED = 1e-9  # a change below this fraction of the largest change is rounding (masks give 0)
_SAME = 1e-5  # relative difference under which two derivatives count as equal
_RANK = 1e-5  # singular values below this fraction of the largest count as zero
_FIT = 1e-3  # relative residual under which a shared span or a linear recurrence fits


@dataclass
class Mechanism:
    """What :func:`observe_mechanism` saw in one attention sublayer.

    ``kind``: "rotary", "ALiBi", "T5", "window" (a local window and nothing else), "absolute"
    (position by its index, not by distance) or "cannot tell"; ``window``: w when positions w or
    more back are not seen; ``slopes``: ALiBi's per-head slopes as measured; ``shared``: runs of
    distances that share one bias (T5's buckets); ``n``: the probe's length; ``notes``: the
    observations, as sentences."""

    kind: str
    window: int | None = None
    slopes: list[float] = field(default_factory=list)
    shared: list[tuple[int, int]] = field(default_factory=list)
    n: int = 0
    notes: list[str] = field(default_factory=list)
    measured: dict[str, float] = field(default_factory=dict)

    def label(self) -> str:
        """The mechanism in a few words, for the check's finding."""
        base = {
            "rotary": "rotary",
            "ALiBi": "ALiBi: a bias on the scores linear in the distance",
            "T5": "T5-style relative bias: a learned bias on the scores for each distance",
            "window": f"a local attention window of {self.window} positions",
            "absolute": "position by its absolute index, not by distance",
            "cannot tell": "a position mechanism the probe cannot name",
        }[self.kind]
        if self.window is not None and self.kind != "window":
            base += f", within a local window of {self.window} positions"
        return base


def _fmt(x: float, dtype, digits: int = 2) -> str:
    """A measured number for a note, stating the precision its inputs came in (``num``'s rule:
    the copy computes in float64, but what it was handed was recorded in the model's dtype)."""
    return fmt(float(x), digits, computed_in=dtype if dtype in _FMT_DTYPES else torch.float32)


def _span(m: np.ndarray) -> np.ndarray:
    """An orthonormal basis [K, rank] of the column space of ``m`` [K, dim]."""
    u, s, _ = np.linalg.svd(m, full_matrices=False)
    if not s.size or s[0] <= 0:
        return u[:, :0]
    return u[:, s > _RANK * s[0]]


def _outside(basis: np.ndarray, m: np.ndarray) -> float:
    """How much of ``m`` lies outside the span of ``basis``, relative to ``m``."""
    rest = m - basis @ (basis.T @ m)
    return float(np.linalg.norm(rest) / max(np.linalg.norm(m), 1e-300))


class _Replayer:
    """A float64 copy of the sublayer and its recorded call: ``out(x_bn)`` -> [B, n, d]."""

    def __init__(self, module, call: Call, layout: Layout, residual):
        self.module = copy.deepcopy(module).double()
        self.call, self.layout = call, layout
        self.others = {
            id(t): t.detach().double() for t in call.tensors() if t is not call.x
        }  # masks, rotary tables, position biases: the same, in float64
        self.residual = residual

    def out(self, x_bn: torch.Tensor, grad: bool = False) -> torch.Tensor:
        x = self.layout.from_bn(x_bn, self.call.x)
        y = replay(self.call, x, self.others, module=self.module, grad=grad)
        if self.residual is not None:  # residual + f(x): look at f(x)
            y = y - self.others.get(id(self.residual), self.residual.double()).reshape(y.shape)
        return self.layout.to_bn(y).double()


def _unit_rows(t: torch.Tensor) -> torch.Tensor:
    return t / t.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-12)


def _seen(r: _Replayer, x: torch.Tensor, gen: torch.Generator) -> np.ndarray:
    """seen[p, j]: output position p moves when input position j is replaced."""
    B, n, d = x.shape
    y0 = r.out(x)
    change = np.zeros((n, n))
    for j in range(n):
        xj = x.clone()
        xj[:, j] = _unit_rows(torch.randn(B, d, generator=gen, dtype=torch.float64))
        change[:, j] = (r.out(xj) - y0).abs().amax(dim=(0, 2)).numpy()
    return change > _MOVED * max(change.max(), 1e-300)


def _derivatives(r: _Replayer, c: torch.Tensor, u: torch.Tensor) -> np.ndarray:
    """D[p, j] = u_b^T (d out_p / d in_j) for each sequence b (one direction u_b each), every
    position at content c, by autograd on the float64 copy; [n, n, B * d]."""
    B, n, d = u.shape[0], r.layout.n, u.shape[-1]
    x = c.expand(B, n, d).clone().requires_grad_(True)
    y = r.out(x, grad=True)  # [B, n, d]
    out = np.zeros((n, n, B * d))
    for p in range(n):
        (g,) = torch.autograd.grad((y[:, p] * u).sum(), x, retain_graph=p < n - 1)
        out[p] = g.detach().transpose(0, 1).reshape(n, B * d).numpy()
    return out


def _rows_by_distance(D: np.ndarray, K: int) -> list[np.ndarray]:
    """For each row p >= K - 1: the matrix [K, dim] of D[p, p - k], k = 0..K-1."""
    n = D.shape[0]
    return [np.stack([D[p, p - k] for k in range(K)]) for p in range(K - 1, n)]


def _geometric(rows: list[np.ndarray], q: int):
    """The linear recurrence G[k + q] = sum_i c_i G[k + i] of order q (the number of heads seen)
    that fits every row best: (its roots, relative misfit), or (None, nan) when the probe has
    fewer than two shifts to fit it on (a fit would prove nothing)."""
    K = rows[0].shape[0]
    if K - q < 2:
        return None, float("nan")
    lhs = np.concatenate([g[q:].reshape(-1) for g in rows])
    cols = [np.concatenate([g[i : K - q + i].reshape(-1) for g in rows]) for i in range(q)]
    A = np.stack(cols, axis=1)
    coef, *_ = np.linalg.lstsq(A, lhs, rcond=None)
    misfit = float(np.linalg.norm(A @ coef - lhs) / max(np.linalg.norm(lhs), 1e-300))
    return np.roots(np.concatenate([[1.0], -coef[::-1]])), misfit


def observe_mechanism(
    module, call: Call, layout: Layout, residual=None, seed: int = 0
) -> Mechanism:
    """Lesson 10 (K1, C4.8). Name the position mechanism of one attention sublayer ``module``
    from its recorded ``call`` (the stream in ``layout``; ``residual`` the argument it adds to its
    own output, if any). See the module's docstring for the three observations."""
    n = layout.n
    dt = call.x.dtype  # what the copy was handed was recorded in this precision
    try:
        r = _Replayer(module, call, layout, residual)
        gen = torch.Generator().manual_seed(seed)
        B, d = layout.B, call.x.shape[-1]
        x = _unit_rows(layout.to_bn(call.x.detach()).double())
        seen = _seen(r, x, gen)
        c1, c2 = (_unit_rows(torch.randn(d, generator=gen, dtype=torch.float64)) for _ in "12")
        u = _unit_rows(torch.randn(B, d, generator=gen, dtype=torch.float64))
        D1, D2 = _derivatives(r, c1, u), _derivatives(r, c2, u)
    except Exception as e:  # noqa: BLE001 - a copy that cannot be replayed in float64
        return Mechanism(
            "cannot tell",
            n=n,
            notes=[
                f"a float64 copy of it could not be replayed ({type(e).__name__}: {e}), so the "
                "probe cannot tell which mechanism it is"
            ],
        )
    m = Mechanism("cannot tell", n=n)
    p_idx, j_idx = np.indices((n, n))
    earlier = j_idx < p_idx
    unseen = earlier & ~seen
    if unseen.any():
        dist = (p_idx - j_idx)[earlier]
        w = int((p_idx - j_idx)[unseen].min())
        if (~seen[earlier] == (dist >= w)).all():
            m.window = w
            m.notes.append(
                f"with one input position replaced at a time, output position p does not move "
                f"for inputs {w} or more positions back and moves for every nearer one: a local "
                f"window of {w} positions"
            )
        else:
            m.notes.append(
                f"with one input position replaced at a time, {int(unseen.sum())} (position, "
                f"earlier position) pairs do not move, in no window pattern"
            )
            return m
    K = m.window if m.window is not None else n // 2
    scale = np.abs(D1).max()
    content = float(np.abs(D1 - D2).max() / max(scale, 1e-300))
    rows = _rows_by_distance(D1, K)
    basis = _span(rows[0])
    rank = basis.shape[1]
    relative = None
    m.measured = {"content change": content, "heads seen": rank, "distances": K}
    if rank < K:  # every row's functions of the distance in the span of the last-but-all row's
        off = max(_outside(basis, g) for g in rows[1:]) if len(rows) > 1 else 0.0
        m.measured["off the shared span"] = off
        relative = off <= _FIT
    at = f"every position given the same vector (two such vectors, {n} positions)"
    if content > _SAME:
        if relative:
            m.kind = "rotary"
            m.notes.append(
                f"with {at}, the weights it gives each distance change with that vector (relative "
                f"change {_fmt(content, dt)}), and depend on the distance p - j only: position acts "
                f"through the content of q and k, as rotary's rotation of q and k by position (RoPE) does"
            )
        elif relative is False:
            m.kind = "absolute"
            m.notes.append(
                f"with {at}, the weights change with that vector (relative change "
                f"{_fmt(content, dt)}) and are not a function of the distance p - j: position enters "
                f"by its index, not as rotary or a distance bias does"
            )
        else:
            m.notes.append(
                f"with {at}, the weights change with that vector (relative change "
                f"{_fmt(content, dt)}), as rotary's do; the probe sees too few distances ({K}, with "
                f"{rank} heads seen) to check that they depend on the distance only, so it cannot "
                f"tell"
            )
        return m
    same_vector = f"with {at}, the weights it gives each distance are the same for both vectors"
    if relative is False:
        m.kind = "absolute"
        m.notes.append(
            f"{same_vector}, but not a function of the distance p - j: a bias on the scores by "
            f"absolute position"
        )
        return m
    flat = all(np.abs(g - g[:1]).max() <= _SAME * max(np.abs(g).max(), 1e-300) for g in rows)
    if flat:
        if m.window is not None:
            m.kind = "window"
            m.notes.append(
                f"{same_vector}, and equal for every position inside the window: no bias on the "
                f"scores, only the window"
            )
        else:
            m.notes.append(
                f"{same_vector} and all equal, yet order matters: the probe cannot tell why"
            )
        return m
    if relative is None:
        m.notes.append(
            f"{same_vector} (a bias on the scores that does not depend on the content); the probe "
            f"sees too few distances ({K}, with {rank} heads seen) to tell a bias linear in the "
            f"distance (ALiBi) from a learned one (T5)"
        )
        return m
    roots, misfit = _geometric(rows, rank)
    m.measured["recurrence misfit"] = misfit
    if roots is None:
        m.notes.append(
            f"{same_vector} and depend on the distance p - j only (a bias on the scores by "
            f"distance); the probe sees too few distances ({K}, with {rank} heads seen) to tell a "
            f"bias linear in the distance (ALiBi) from a learned one (T5)"
        )
        return m
    why = f"no linear recurrence of order {rank} fits, misfit {_fmt(misfit, dt)}"
    if misfit <= _FIT:
        real = np.abs(roots.imag).max() < 1e-6
        r_ = roots.real
        shown = ", ".join(_fmt(complex(v).real, dt) for v in roots)
        why = f"the recurrence that fits has roots outside (0, 1]: {shown}"
        if real and (r_ > 0).all() and (r_ <= 1 + 1e-6).all():
            m.kind = "ALiBi"
            m.slopes = sorted((float(-np.log(min(v, 1.0))) for v in r_), reverse=True)
            m.notes.append(
                f"{same_vector}, depend on the distance k = p - j only, and fall geometrically "
                f"with it in each head (one linear recurrence of order {rank}, the number of "
                f"heads seen, fits every row): a bias linear in the distance, -m k, as ALiBi "
                f"adds; slopes m = " + ", ".join(_fmt(s, dt, 3) for s in m.slopes)
            )
            return m
    shared, start = [], None
    for k in range(K - 1):
        eq = all(
            np.abs(g[k] - g[k + 1]).max() <= _SAME * max(np.abs(g[k]).max(), 1e-300) for g in rows
        )
        if eq and start is None:
            start = k
        if not eq and start is not None:
            shared.append((start, k))
            start = None
    if start is not None:
        shared.append((start, K - 1))
    m.kind, m.shared = "T5", shared
    runs = "; ".join(f"distances {a}-{b} share one" for a, b in shared)
    m.notes.append(
        f"{same_vector} and depend on the distance p - j only, but do not fall geometrically "
        f"with it ({why}): a bias learned for each distance, not ALiBi's linear one, as T5's "
        f"relative bias is" + (f" ({runs}, as T5's log-spaced buckets do)" if shared else "")
    )
    return m
