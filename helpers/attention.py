"""Attention, the sublayer that mixes positions (used from lesson 4 on, built out in lesson 7).

Scaled dot-product attention (Vaswani et al. 2017, section 3.2.1)::

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Multi-head attention projects x to Q, K, V with three learned matrices, splits d_model into
n_heads heads of size d_k = d_model / n_heads, attends in each head, concatenates the heads and
projects back with W_O, so it maps [batch, n, d_model] to [batch, n, d_model].

Position can enter here instead of being added to the embeddings (C4.8; the sheet's K1 rules it
out): ``positional="rotary"`` turns each head's queries and keys the way RoFormer and Llama do
before the scores, ``positional="alibi"`` adds ``-m_h |p - q|`` to the scores of head h::

    rotary:  softmax((R_(-p) q_p)·(R_(-q) k_q) / sqrt(d_k))       (R_p: lesson 4's rotation)
    alibi:   softmax(q_p·k_q / sqrt(d_k) - m_h |p - q|)          (m_h: the slope of head h)
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn
from torch.nn import functional as F

from . import _validate as check
from .positional import alibi_bias, apply_rotary, rotary_in_pass

__all__ = [
    "ATTENTION_POSITIONAL",
    "attention_weights",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
]

#: What attention itself does with position: nothing (the sheet's design), rotary or ALiBi (C4.8).
ATTENTION_POSITIONAL = ("none", "rotary", "alibi")


def _broadcast(*shapes) -> tuple[int, ...] | None:
    """The shape broadcasting gives ``shapes`` (torch's and numpy's rule: aligned from the last
    axis, each size 1 or the same), or None when they do not broadcast. Plain Python: under a
    torch function mode (the grader's) ``torch.broadcast_shapes`` goes through torch's symbolic
    shapes and imports sympy, about 5 s the first time in a grading kernel."""
    out = []
    for sizes in itertools.zip_longest(*(reversed(tuple(s)) for s in shapes), fillvalue=1):
        other = {n for n in sizes if n != 1}
        if len(other) > 1:
            return None
        out.append(other.pop() if other else 1)
    return tuple(reversed(out))


def _check_bias(bias, scores: torch.Tensor) -> torch.Tensor:
    """A bias to add to ``scores`` [..., n, m], or a clear error."""
    check.tensor("bias", bias, layout="[..., n, m]")
    n, m = scores.shape[-2:]
    dtype = scores.dtype
    if bias.dim() < 2 or tuple(bias.shape[-2:]) != (n, m):
        raise ValueError(
            f"bias must end in [n, m] = [{n}, {m}] (one number per query and key), "
            f"got shape {list(bias.shape)}"
        )
    if _broadcast(bias.shape, scores.shape) != tuple(scores.shape):
        raise ValueError(
            f"bias {list(bias.shape)} must broadcast to the scores {list(scores.shape)} "
            f"(for example [n_heads, n, m] against [batch, n_heads, n, m])"
        )
    if bias.dtype != dtype:
        raise TypeError(f"bias must have the dtype of q and k ({dtype}), got {bias.dtype}")
    return bias


def attention_weights(
    q: torch.Tensor, k: torch.Tensor, causal: bool = False, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Lesson 4/7. ``softmax(q k^T / sqrt(d_k) + bias)`` over the last axis; rows sum to 1.

    q: [..., n, d_k], k: [..., m, d_k] -> [..., n, m]. With ``causal=True`` position i gives
    weight 0 to every later position j > i. ``bias`` (default none) is added to the scores,
    broadcast from [..., n, m]: ALiBi's ``-m_h |p - q|`` (C4.8, :func:`helpers.alibi_bias`).
    """
    for name, t in (("q", q), ("k", k)):
        check.tensor(name, t)
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions [..., n, d_k] (one row per position), "
                f"got shape {list(t.shape)}"
            )
        if not t.is_floating_point():
            raise TypeError(
                f"{name} must hold floating-point numbers (torch.float32), got dtype {t.dtype}"
            )
    if q.dtype != k.dtype:
        raise TypeError(f"q and k must have the same dtype, got {q.dtype} and {k.dtype}")
    if _broadcast(q.shape[:-2], k.shape[:-2]) is None:
        raise ValueError(
            f"q and k must have the same leading (batch, head) dimensions, got shapes "
            f"{list(q.shape)} and {list(k.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}"
        )
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [..., n, m]
    if bias is not None:
        scores = scores + _check_bias(bias, scores)  # [..., n, m]
    if causal:
        n, m = scores.shape[-2:]
        future = torch.ones(n, m, dtype=torch.bool, device=q.device).triu(1)  # [n, m], j > i
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1)  # [..., n, m]


def scaled_dot_product_attention(q, k, v, causal: bool = False, bias=None):
    """Lesson 4/7. ``softmax(q k^T / sqrt(d_k) + bias) v``; returns (output [..., n, d_v], weights [..., n, m]).

    Once the weights are computed, the output is linear in ``v`` (C6.5). ``bias`` as in
    :func:`attention_weights` (none by default).
    """
    check.tensor("v", v)
    weights = attention_weights(q, k, causal, bias)  # [..., n, m]
    if v.dim() < 2:
        raise ValueError(
            f"v must have at least 2 dimensions [..., m, d_v] (one row per key), got shape {list(v.shape)}"
        )
    if v.shape[-2] != weights.shape[-1]:
        raise ValueError(
            f"v must have one row per key: k has {weights.shape[-1]} rows, v has {v.shape[-2]}"
        )
    if v.dtype != weights.dtype:
        raise TypeError(f"v must have the dtype of q and k ({weights.dtype}), got {v.dtype}")
    if _broadcast(weights.shape[:-2], v.shape[:-2]) is None:
        raise ValueError(
            f"v must have the leading (batch, head) dimensions of q and k, got shapes "
            f"{list(q.shape)}, {list(k.shape)} and {list(v.shape)}"
        )
    return weights @ v, weights  # [..., n, d_v], [..., n, m]


def _fused_attention(q, k, v, causal: bool, bias) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d_k) + bias) v`` by torch's fused kernel, on checked inputs:
    the causal mask as ``is_causal`` (or, with a bias, -inf above the diagonal of the bias)."""
    if bias is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if causal:
        n, m = bias.shape[-2:]
        future = torch.ones(n, m, dtype=torch.bool, device=q.device).triu(1)  # [n, m], j > i
        bias = bias.masked_fill(future, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


class MultiHeadAttention(nn.Module):
    """Lesson 7 (used in lesson 4 without position: C4.1 unmasked, C4.9 causal). Multi-head
    self-attention.

    ``MHA(x) = concat(head_1..head_h) W_O + b_O``, ``head_j = Attention(x W_Q^j, x W_K^j, x W_V^j)``.
    Parameters: 4 * (d_model^2 + d_model) with biases, as GPT-2 has.
    After each forward pass the attention weights are kept in ``self.last_weights``
    ([batch, n_heads, n, n]) for plots and for claim C6.5.

    ``positional`` is what attention itself does with position (C4.8): ``"none"`` (the default,
    the sheet's design: position, if any, was added to the embeddings), ``"rotary"`` (each head's
    q and k turned by R_(-p) with :func:`helpers.apply_rotary`, so d_head must be even)
    or ``"alibi"`` (``-m_h |p - q|`` added to head h's scores, :func:`helpers.alibi_bias`; any
    n_heads). Neither adds a parameter.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        causal: bool = False,
        bias: bool = True,
        *,
        positional: str = "none",
        rotary_base: float = 10000.0,
    ):
        super().__init__()
        self.d_model = check.positive_int("d_model", d_model)
        self.n_heads = check.positive_int("n_heads", n_heads)
        if d_model % n_heads:
            divisors = [h for h in range(1, d_model + 1) if d_model % h == 0 and h <= 64]
            raise ValueError(
                f"n_heads must divide d_model so every head gets d_model / n_heads features: "
                f"d_model={d_model} is not divisible by n_heads={n_heads}; allowed n_heads here: {divisors}"
            )
        self.d_head = d_model // n_heads
        self.positional = check.choice("positional", positional, ATTENTION_POSITIONAL)
        self.rotary_base = check.positive_float("rotary_base", rotary_base)
        if self.positional == "rotary" and self.d_head % 2:
            evens = [
                h for h in range(1, d_model + 1) if d_model % h == 0 and (d_model // h) % 2 == 0
            ]
            raise ValueError(
                f"rotary position turns the columns of each head in pairs, so d_head = "
                f"d_model / n_heads must be even: d_model={d_model}, n_heads={n_heads} give "
                f"d_head={self.d_head}; n_heads with an even d_head here: {evens[:12] or 'none'}"
            )
        self.causal = bool(causal)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_Q for all heads at once
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)  # W_K
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)  # W_V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O
        self.last_weights: torch.Tensor | None = None

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.n_heads, self.d_head).transpose(1, 2)  # [B, h, n, d_head]

    #: Inside a model's pass (:func:`helpers._validate.model_pass`) attention is computed by
    #: torch's fused ``F.scaled_dot_product_attention`` and the weights are not formed, so
    #: ``last_weights`` is None; set ``keep_weights = True`` (on the module or the class) to
    #: compute them from the formula there too. Called on its own the layer always keeps them.
    keep_weights = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [batch, n, d_model] -> [batch, n, d_model]. Called on its own: checks x, computes
        ``softmax(q k^T / sqrt(d_k) + bias) v`` from the formula and keeps the weights. Inside a
        model's pass (checked at its entry): torch's fused attention, with ``is_causal`` for the
        causal mask, ALiBi's bias (masked) as ``attn_mask``, rotary applied to q and k before it;
        the explicit weights only if ``keep_weights``."""
        fused = not check.checking() and not self.keep_weights
        if check.checking():
            check.tensor("x", x, ndim=3, last_dim=self.d_model, layout="[batch, n, d_model]")
            check.floating_like("x", x, self.q_proj.weight.dtype)
        b, n, d = x.shape
        q = self._split(self.q_proj(x))  # [B, h, n, d_head]
        k = self._split(self.k_proj(x))  # [B, h, n, d_head]
        v = self._split(self.v_proj(x))  # [B, h, n, d_head]
        bias = None
        if self.positional == "rotary":  # C4.8: q_p -> R_(-p) q_p, k_q -> R_(-q) k_q, each head
            turn = rotary_in_pass if fused else apply_rotary  # the same numbers; fused: unchecked
            q = turn(q, base=self.rotary_base)  # [B, h, n, d_head]
            k = turn(k, base=self.rotary_base)  # [B, h, n, d_head]
        elif self.positional == "alibi":  # C4.8: -m_h |p - q| on head h's scores
            bias = alibi_bias(self.n_heads, n, dtype=q.dtype, device=q.device)  # [h, n, n]
        if fused:
            out = _fused_attention(q, k, v, self.causal, bias)  # [B, h, n, d_head]
            self.last_weights = None
        else:
            out, weights = scaled_dot_product_attention(q, k, v, self.causal, bias)
            self.last_weights = weights.detach()  # [B, h, n, n]
        out = out.transpose(1, 2).reshape(b, n, d)  # [B, n, d_model]: heads concatenated
        return self.out_proj(out)  # [B, n, d_model]

    def extra_repr(self) -> str:
        text = f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}"
        return text + (f", positional={self.positional!r}" if self.positional != "none" else "")
