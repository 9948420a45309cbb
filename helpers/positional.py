"""Lesson 4: injecting position into the embeddings.

Attention without a mask has no notion of order (claim C4.1; a causal mask already sees order,
C4.9), so position is added to the token embeddings once, before the first block (C4.5). Two
schemes from the sheet:

* sinusoidal (Vaswani et al. 2017, section 3.5), no parameters, defined at every position::

      PE(pos, 2i)   = sin(pos / base^(2i / d_model))
      PE(pos, 2i+1) = cos(pos / base^(2i / d_model))        base = 10000

* learned: a trainable table with one row per position 0..max_len-1, and no row beyond (C4.4).

Defined is not working: a model trained at one length does worse at longer ones (C4.7, measured
with :mod:`helpers.length`).

Position can also enter *inside* attention instead (C4.8), which the sheet's first checklist item
rules out; both are here so that lesson 4 can show what current models do:

* rotary (RoPE, Su et al. 2021): :func:`apply_rotary` turns each query and key at position p the
  way RoFormer and Llama do, by lesson 4's R_p transposed (R_(-p)), so
  ``(R_(-p) q)·(R_(-j) k) = q·R_(p-j) k`` depends only on the offset j - p;
* ALiBi (Press et al. 2022): :func:`alibi_bias` is the penalty ``-m_h |p - q|`` added to the
  scores of head h.
"""

from __future__ import annotations

import functools
import math
import numbers

import torch
from torch import nn

from . import _validate as check

__all__ = [
    "angle_rates",
    "wavelengths",
    "sinusoidal_encoding",
    "sinusoidal_encoding_at",
    "rotation_matrix",
    "apply_rotary",
    "alibi_slopes",
    "alibi_bias",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "PositionOutOfRange",
]


def _even_d_model(d_model) -> int:
    d_model = check.positive_int("d_model", d_model)
    if d_model % 2:
        nearest = f"{d_model + 1} or {d_model - 1}" if d_model > 1 else f"{d_model + 1}"
        raise ValueError(
            f"d_model must be even for the sinusoidal encoding (sin and cos fill columns in pairs "
            f"2i and 2i+1), got {d_model}; use {nearest}"
        )
    return d_model


def _floating_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"dtype must be a floating-point torch dtype such as torch.float32 or torch.float64, "
            f"got {dtype!r}"
        )
    return dtype


def angle_rates(d_model: int, base: float = 10000.0, *, dtype=torch.float64) -> torch.Tensor:
    """Lesson 4. The frequency of each column pair: ``w_i = 1 / base^(2i / d_model)``.

    Returns a tensor of shape [d_model // 2]; pair i fills columns 2i (sin) and 2i+1 (cos).
    """
    d_model = _even_d_model(d_model)
    base = check.positive_float("base", base)
    dtype = _floating_dtype(dtype)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # [d_model/2]: 0, 2, 4, ...
    return torch.exp(-math.log(base) * two_i / d_model).to(dtype)  # base^(-2i/d_model)


def wavelengths(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Lesson 4. Wavelength of pair i in positions: ``2*pi * base^(2i / d_model)``.

    From 2*pi (fastest, columns 0 and 1) up to almost 2*pi*base (slowest), a geometric progression.
    """
    return 2 * math.pi / angle_rates(d_model, base)


def sinusoidal_encoding_at(
    positions, d_model: int, base: float = 10000.0, *, dtype=torch.float32
) -> torch.Tensor:
    """Lesson 4 (C4.2, C4.3). The sinusoidal encoding at arbitrary positions.

    ``positions`` is a 1-D tensor or sequence of numbers (any size, any value, even beyond every
    length seen in training). Returns [len(positions), d_model] with
    ``PE[:, 2i] = sin(pos * w_i)`` and ``PE[:, 2i+1] = cos(pos * w_i)``, computed in float64 and
    cast to ``dtype``.
    """
    d_model = _even_d_model(d_model)
    dtype = _floating_dtype(dtype)
    try:
        pos = torch.as_tensor(positions, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"positions must be a 1-D tensor or a sequence of numbers, got {positions!r} "
            f"({type(positions).__name__})"
        ) from None
    if pos.dim() != 1:
        raise ValueError(f"positions must be one-dimensional, got shape {list(pos.shape)}")
    if pos.device.type != "meta" and not torch.isfinite(pos).all():  # meta: shapes only
        raise ValueError("positions must be finite numbers, got NaN or infinity")
    angles = pos[:, None] * angle_rates(d_model, base)[None, :]  # [n, d_model/2]
    pe = torch.empty(len(pos), d_model, dtype=torch.float64)  # [n, d_model]
    pe[:, 0::2] = torch.sin(angles)  # even columns 2i: sin
    pe[:, 1::2] = torch.cos(angles)  # odd columns 2i+1: cos
    return pe.to(dtype)


def sinusoidal_encoding(
    n_positions: int, d_model: int, base: float = 10000.0, *, dtype=torch.float32
) -> torch.Tensor:
    """Lesson 4 (C4.2). The table PE for positions 0..n_positions-1, shape [n_positions, d_model].

    ``PE(pos, 2i) = sin(pos / base^(2i/d_model))``, ``PE(pos, 2i+1) = cos(pos / base^(2i/d_model))``:
    the paper's interleaved layout (sin at even columns, cos at odd ones). ``d_model`` must be
    even: the columns come in sin/cos pairs, and an odd width is refused with a clear error rather
    than silently truncated. No parameters: the table is a pure function of its arguments (C4.3).
    """
    n_positions = check.positive_int("n_positions", n_positions, minimum=0)
    return sinusoidal_encoding_at(torch.arange(n_positions), d_model, base, dtype=dtype)


def rotation_matrix(
    k: float, d_model: int, base: float = 10000.0, *, dtype=torch.float64
) -> torch.Tensor:
    """Lesson 4 (C4.6). The matrix R_k with ``PE(p + k) = R_k @ PE(p)`` for every position p.

    Block-diagonal, one 2x2 rotation per column pair i, by the angle ``k * w_i``::

        [sin((p+k)w)]   [ cos(kw)  sin(kw)] [sin(pw)]
        [cos((p+k)w)] = [-sin(kw)  cos(kw)] [cos(pw)]

    R_k depends on k only, not on p; it is orthogonal, so PE(p)·PE(q) depends only on p - q.
    ``k`` is any real number (negative k moves back: R_(-k) = R_k^T). Returns [d_model, d_model].
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Real):
        raise TypeError(
            f"k must be a number (the offset in positions), got {k!r} ({type(k).__name__})"
        )
    if not math.isfinite(k):
        raise ValueError(f"k must be a finite number (the offset in positions), got {k}")
    dtype = _floating_dtype(dtype)
    rates = angle_rates(d_model, base)  # [d_model/2]
    c, s = torch.cos(k * rates), torch.sin(k * rates)
    r = torch.zeros(d_model, d_model, dtype=torch.float64)  # [d_model, d_model]
    idx = torch.arange(0, d_model, 2)
    r[idx, idx], r[idx, idx + 1] = c, s
    r[idx + 1, idx], r[idx + 1, idx + 1] = -s, c
    return r.to(dtype)


def _rotary_positions(positions, n: int, device) -> torch.Tensor:
    """``positions`` as a float64 tensor [n] (0..n-1 when None), or a clear error."""
    if positions is None:
        return torch.arange(n, dtype=torch.float64, device=device)  # [n]
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"positions must be a 1-D torch.Tensor of n={n} positions (or None for 0..n-1), "
            f"got {type(positions).__name__}"
        )
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(
            f"positions must hold integer or floating-point positions (torch.long), "
            f"got dtype {positions.dtype}"
        )
    if positions.dim() != 1 or positions.shape[0] != n:
        raise ValueError(
            f"positions must have shape [n] = [{n}], one position per row of x, "
            f"got shape {list(positions.shape)}"
        )
    pos = positions.to(device=device, dtype=torch.float64)  # [n]
    if pos.device.type != "meta" and not torch.isfinite(pos).all():
        raise ValueError("positions must be finite numbers, got NaN or infinity")
    return pos


def apply_rotary(x: torch.Tensor, positions=None, base: float = 10000.0) -> torch.Tensor:
    """Lesson 4 (C4.8, companion 04b). Rotary position (RoPE), in the direction of Su et al. 2021
    (RoFormer, eq. 34) and Meta's Llama: each column pair (2i, 2i+1) of the row of ``x`` at
    position ``pos`` is the complex number ``x[2i] + i x[2i+1]``, multiplied by ``e^(i pos w_i)``,
    ``w_i = base^(-2i/d)``::

        out[2i]   = cos(pos w_i) x[2i] - sin(pos w_i) x[2i+1]
        out[2i+1] = sin(pos w_i) x[2i] + cos(pos w_i) x[2i+1]

    Each 2x2 block [[cos, -sin], [sin, cos]] is RoFormer's. Lesson 4's :func:`rotation_matrix`
    R_p, written for the sin-first sinusoidal table (``PE(p + k) = R_k PE(p)``), has the
    transposed blocks [[cos, sin], [-sin, cos]]; so this turns row p by ``R_p^T = R_(-p)``. For a
    query q at position p and a key k at position j::

        (R_(-p) q)·(R_(-j) k) = q·R_p R_(-j) k = q·R_(p-j) k    depends only on j - p

    which is RoFormer's ``q^T Θ_(j-p) k`` with ``Θ_m = R_(-m)`` its block rotation by m·w_i.

    ``x`` is [..., n, d] with d even (queries or keys of one head, d = d_head); ``positions`` a
    1-D tensor [n] (integer or float), by default 0..n-1. Nothing is learned and nothing is added
    to the embeddings: position only enters the scores q·k. Angles are computed in float64, the
    result has the dtype of ``x``. (Hugging Face's Llama pairs columns (i, i + d/2) instead, the
    half-split layout, and turns each pair the same way: Llama's column i is column 2i here, its
    column i + d/2 is column 2i+1; the tests compare the two through that permutation.)
    """
    check.tensor("x", x, layout="[..., n, d]")
    if x.dim() < 2:
        raise ValueError(
            f"x must have at least 2 dimensions [..., n, d] (one row per position), "
            f"got shape {list(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"x must hold floating-point numbers (torch.float32), got dtype {x.dtype}")
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(
            f"the last dimension d of x must be even for rotary position (columns 2i and 2i+1 "
            f"are turned as a pair), got d={d}; in attention d is d_head = d_model / n_heads"
        )
    if d == 0:
        raise ValueError(f"the last dimension d of x must be at least 2, got shape {list(x.shape)}")
    if positions is None:  # 0..n-1: the table a model's attention uses, made once
        base = check.positive_float("base", base)
        return _turn(x, *_rotary_table(n, d, base, x.dtype, x.device))
    pos = _rotary_positions(positions, n, x.device)  # [n]
    return _turn(x, *_rotary_angles(pos, d, base, x.dtype))


def _rotary_angles(pos: torch.Tensor, d: int, base: float, dtype) -> tuple[torch.Tensor, ...]:
    """cos and sin of ``pos * w_i``, each [n, d/2] in ``dtype`` (angles in float64)."""
    rates = angle_rates(d, base).to(pos.device)  # [d/2]: w_i
    angles = pos[:, None] * rates[None, :]  # [n, d/2]: pos * w_i
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)  # [n, d/2] each


@functools.lru_cache(maxsize=32)
def _rotary_table(n: int, d: int, base: float, dtype, device) -> tuple[torch.Tensor, ...]:
    """:func:`_rotary_angles` at positions 0..n-1, kept: a model turns every batch's q and k by
    the same table. Made outside autograd and inference mode, so any later pass can use it."""
    with torch.inference_mode(False), torch.no_grad():
        return _rotary_angles(torch.arange(n, dtype=torch.float64, device=device), d, base, dtype)


def _turn(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """x [..., n, d] turned pair by pair by the angles whose cos and sin are c, s [n, d/2]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]  # [..., n, d/2]: columns 2i and 2i+1
    even = c * x1 - s * x2  # [..., n, d/2]: real part of (x1 + i x2)·e^(i pos w)
    odd = s * x1 + c * x2  # [..., n, d/2]: imaginary part
    return torch.stack([even, odd], dim=-1).flatten(-2)  # [..., n, d]: pairs interleaved again


def rotary_in_pass(x: torch.Tensor, base: float) -> torch.Tensor:
    """Lesson 9's hot path: :func:`apply_rotary` at positions 0..n-1 without re-checking ``x``
    (a model's attention calls it after the model's entry has checked its input); the same
    numbers as ``apply_rotary(x, base=base)``, bit for bit."""
    return _turn(x, *_rotary_table(x.shape[-2], x.shape[-1], base, x.dtype, x.device))


def alibi_slopes(n_heads: int, *, dtype=torch.float64) -> torch.Tensor:
    """Lesson 4 (C4.8). The ALiBi slope of each head (Press et al. 2022), shape [n_heads].

    For n_heads a power of two: ``m_h = 2^(-8h / n_heads)``, h = 1..n_heads, a geometric
    sequence (8 heads: 1/2, 1/4, ..., 1/256). For any other n_heads, the paper's recipe (its
    code, and Bloom's): the slopes of the closest power of two below, N = 2^floor(log2 n_heads),
    followed by every other slope of 2N heads, ``2^(-8(2j-1) / (2N))``, j = 1..n_heads - N
    (6 heads: 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3).
    """
    n_heads = check.positive_int("n_heads", n_heads)
    dtype = _floating_dtype(dtype)
    closest = 2 ** int(math.floor(math.log2(n_heads)))  # N: the largest power of two <= n_heads
    h = torch.arange(1, closest + 1, dtype=torch.float64)  # [N]: h = 1..N
    slopes = 2.0 ** (-8.0 * h / closest)  # [N]
    if closest != n_heads:
        odd = torch.arange(1, 2 * (n_heads - closest), 2, dtype=torch.float64)  # 1, 3, 5, ...
        slopes = torch.cat([slopes, 2.0 ** (-8.0 * odd / (2 * closest))])  # [n_heads]
    return slopes.to(dtype)


def alibi_bias(n_heads: int, n: int, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """Lesson 4 (C4.8). ALiBi's bias (Press et al. 2022), added to the attention scores::

        bias[h, p, q] = -m_h * |p - q|          shape [n_heads, n, n]

    with the slopes ``m_h`` of :func:`alibi_slopes` (2^(-8h/n_heads) for n_heads a power of two;
    the paper's interleaved recipe otherwise). A query at position p scores a key at q lower the
    farther it is, by a fixed amount per position in each head: no parameters, nothing added to
    the embeddings. Symmetric in p and q; in causal attention only q <= p is used.
    """
    slopes = alibi_slopes(n_heads)  # [h]
    n = check.positive_int("n", n, minimum=0)
    dtype = _floating_dtype(dtype)
    idx = torch.arange(n, dtype=torch.float64)  # [n]
    distance = (idx[:, None] - idx[None, :]).abs()  # [n, n]: |p - q|
    bias = -slopes[:, None, None] * distance[None]  # [h, n, n]
    return bias.to(dtype=dtype, device=device)


class SinusoidalPositionalEncoding(nn.Module):
    """Lesson 4 (C4.3, C4.5). Adds the sinusoidal table to a [batch, n, d_model] embedding.

    ``forward(x) = x + PE[offset : offset + n]``. No parameters; the table is kept as a
    non-persistent buffer and grown on demand, so any length works.
    """

    def __init__(self, d_model: int, base: float = 10000.0, max_len: int = 1024):
        super().__init__()
        self.d_model = _even_d_model(d_model)
        self.base = check.positive_float("base", base)
        max_len = check.positive_int("max_len", max_len)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)

    def encoding(self, n: int, offset: int = 0) -> torch.Tensor:
        """The rows PE[offset : offset + n], shape [n, d_model], on the module's device."""
        n = check.positive_int("n", n, minimum=0)
        offset = check.positive_int("offset", offset, minimum=0)
        if offset + n > self.pe.shape[0]:
            table = sinusoidal_encoding(offset + n, self.d_model, self.base, dtype=self.pe.dtype)
            self.pe = table.to(self.pe.device)
        return self.pe[offset : offset + n]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if check.checking():  # not inside a model's pass: the model made x itself
            check.tensor("x", x, ndim=3, last_dim=self.d_model, layout="[batch, n, d_model]")
        if not x.is_floating_point():  # PE cast to an integer dtype would be truncated to 0, 1, -1
            raise TypeError(
                f"x must hold floating-point embeddings (torch.float32), got dtype {x.dtype}"
            )
        return x + self.encoding(x.shape[1], offset).to(x.dtype)  # [B, n, d] + [n, d]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, base={self.base:g}"


class PositionOutOfRange(IndexError):
    """Raised when a learned position table is asked for a row it does not have (C4.4).

    In a notebook it shows as one red line with its message (the message says everything a
    student needs), not as a traceback through PyTorch's module machinery.
    """

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"\x1b[1;31m{type(self).__name__}:\x1b[0m {self}"]


class LearnedPositionalEmbedding(nn.Module):
    """Lesson 4 (C4.4). A trained lookup table of position vectors, rows 0..max_len-1 only.

    ``forward(x) = x + P[offset : offset + n]`` where P is an ``nn.Embedding(max_len, d_model)``.
    A position >= max_len has no row: asking for one raises :class:`PositionOutOfRange`, an
    ``IndexError`` that says so.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = check.positive_int("max_len", max_len)
        self.d_model = check.positive_int("d_model", d_model)
        self.table = nn.Embedding(self.max_len, self.d_model)  # [max_len, d_model], trainable

    def encoding(self, n: int, offset: int = 0) -> torch.Tensor:
        """The rows P[offset : offset + n], shape [n, d_model]."""
        n = check.positive_int("n", n, minimum=0)
        offset = check.positive_int("offset", offset, minimum=0)
        last = offset + n - 1
        if last >= self.max_len:
            fits = (
                f"a sequence of at most {self.max_len - offset} tokens"
                if offset < self.max_len
                else f"an offset below {self.max_len}"
            )
            raise PositionOutOfRange(
                f"position {last} has no row: this learned position table was built with "
                f"max_len={self.max_len}, so it only has rows for positions 0..{self.max_len - 1}. "
                f"A learned table cannot answer for a position it never had a row for; use "
                f"{fits}, a larger max_len (and train it), "
                f"or the sinusoidal encoding, which is defined at every position."
            )
        positions = torch.arange(offset, offset + n, device=self.table.weight.device)  # [n]
        return self.table(positions)  # [n, d_model]

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if check.checking():  # not inside a model's pass: the model made x itself
            check.tensor("x", x, ndim=3, last_dim=self.d_model, layout="[batch, n, d_model]")
        return x + self.encoding(x.shape[1], offset)  # [B, n, d] + [n, d]

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
