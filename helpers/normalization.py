"""Lesson 5: residual connections and layer norm.

Layer norm (Ba et al. 2016) normalizes each token's own feature vector, then scales and shifts::

    LN(x) = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta

mean and (biased) variance taken across the d_model features of one token (C5.3), so the result
does not depend on the batch (C5.4). A residual connection wraps a sublayer in one of two ways
(C5.1)::

    post-norm:  LayerNorm(x + Sublayer(x))      (the original Transformer)
    pre-norm:   x + Sublayer(LayerNorm(x))      (most current large models)

RMSNorm (Zhang & Sennrich 2019; Llama and most current large models use it) drops the mean and
the bias (C5.8)::

    RMSNorm(x) = g * x / sqrt(mean(x^2) + eps)

On a zero-mean vector mean(x^2) is the variance, so it equals layer norm without its shift.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from . import _validate as check

__all__ = ["NORM_PLACEMENTS", "NORM_TYPES", "LayerNorm", "RMSNorm", "make_norm", "Residual"]

NORM_PLACEMENTS = ("pre", "post", "none")
#: Which normalization: layer norm (the sheet's, C5.3) or RMSNorm (C5.8).
NORM_TYPES = ("layer", "rms")


class LayerNorm(nn.Module):
    """Lesson 5 (C5.3). ``gamma * (x - mean) / sqrt(var + eps) + beta`` over the last axis.

    mean and variance are taken across the ``d_model`` features of each token, the variance
    biased (divided by d_model, not d_model - 1). ``weight`` (gamma) starts at 1, ``bias``
    (beta) at 0: 2 * d_model parameters.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.d_model = check.positive_int("d_model", d_model)
        self.eps = check.positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(self.d_model))  # gamma [d_model]
        self.bias = nn.Parameter(torch.zeros(self.d_model))  # beta [d_model]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not check.checking():  # inside a model's pass: torch's fused kernel, same formula
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        check.tensor("x", x, last_dim=self.d_model, layout="[..., d_model]")
        mean = x.mean(dim=-1, keepdim=True)  # [..., 1]
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # [..., 1], biased
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # [..., d_model], mean 0, var 1
        return self.weight * x_hat + self.bias  # [..., d_model]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps:g}"


class RMSNorm(nn.Module):
    """Lesson 5 (C5.8). ``g * x / sqrt(mean(x^2) + eps)`` over the last axis (Zhang & Sennrich
    2019, used by Llama).

    No mean is subtracted and there is no bias: only the root mean square of each token's
    ``d_model`` features is divided out, then a learned gain ``weight`` (g, starting at 1) is
    applied: d_model parameters. Equal to ``torch.nn.RMSNorm(d_model, eps)`` with the same
    weight, and to layer norm without bias on a zero-mean vector (where mean(x^2) = var(x)).
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.d_model = check.positive_int("d_model", d_model)
        self.eps = check.positive_float("eps", eps)
        self.weight = nn.Parameter(torch.ones(self.d_model))  # g [d_model]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not check.checking():  # inside a model's pass: torch's fused kernel, same formula
            return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
        check.tensor("x", x, last_dim=self.d_model, layout="[..., d_model]")
        if not x.is_floating_point():
            raise TypeError(
                f"x must hold floating-point numbers (torch.float32), got dtype {x.dtype}"
            )
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # [..., 1]: mean(x^2)
        return self.weight * (x / torch.sqrt(mean_square + self.eps))  # [..., d_model]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps:g}"


def make_norm(norm_type: str, d_model: int, eps: float | None = None) -> nn.Module:
    """Lesson 5. ``LayerNorm(d_model)`` for ``norm_type="layer"`` (eps 1e-5, gain and bias),
    ``RMSNorm(d_model)`` for ``"rms"`` (eps 1e-6, gain only); ``eps`` given replaces the default
    (a checkpoint's own, e.g. Llama's ``rms_norm_eps``: lesson 8's converters)."""
    check.choice("norm_type", norm_type, NORM_TYPES)
    cls = LayerNorm if norm_type == "layer" else RMSNorm
    return cls(d_model) if eps is None else cls(d_model, eps=eps)


class Residual(nn.Module):
    """Lesson 5 (C5.1). Wraps a shape-preserving sublayer in a residual connection.

    ``norm="pre"``:  ``x + sublayer(LayerNorm(x))``
    ``norm="post"``: ``LayerNorm(x + sublayer(x))``
    ``norm="none"``: ``x + sublayer(x)`` (no layer norm; for comparison in lesson 5)

    ``norm_type`` chooses the normalization: ``"layer"`` (:class:`LayerNorm`, the default) or
    ``"rms"`` (:class:`RMSNorm`, C5.8); ``eps`` its epsilon (None: that norm's default).
    """

    def __init__(
        self,
        sublayer: nn.Module,
        d_model: int,
        norm: str = "pre",
        norm_type: str = "layer",
        eps: float | None = None,
    ):
        super().__init__()
        if not isinstance(sublayer, nn.Module):
            raise TypeError(f"sublayer must be a torch.nn.Module, got {type(sublayer).__name__}")
        self.sublayer = sublayer
        self.d_model = check.positive_int("d_model", d_model)
        self.norm_placement = check.choice("norm", norm, NORM_PLACEMENTS)
        self.norm_type = check.choice("norm_type", norm_type, NORM_TYPES)
        self.norm = make_norm(norm_type, self.d_model, eps) if norm != "none" else nn.Identity()
        declared = getattr(sublayer, "d_model", None)
        if declared is not None and declared != d_model:
            raise ValueError(
                f"d_model={d_model} does not match the sublayer's d_model={declared}: "
                f"the residual adds x to sublayer(x), so both must have d_model features"
            )

    def _sublayer(self, x: torch.Tensor) -> torch.Tensor:
        out = self.sublayer(x)  # [batch, n, d_model]
        if not check.checking():  # inside a model's pass: the block's own sublayers
            return out
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"the sublayer must return a tensor of the same shape as its input "
                f"{list(x.shape)} (d_model={self.d_model}) so that it can be added to x; got {got}"
            )
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if check.checking():
            check.tensor("x", x, last_dim=self.d_model, layout="[batch, n, d_model]")
        if self.norm_placement == "pre":
            return x + self._sublayer(self.norm(x))  # identity path untouched
        if self.norm_placement == "post":
            return self.norm(x + self._sublayer(x))  # the sum is normalized
        return x + self._sublayer(x)

    def extra_repr(self) -> str:
        text = f"norm={self.norm_placement!r}"
        return text + (f", norm_type={self.norm_type!r}" if self.norm_type != "layer" else "")
