"""Lesson 5: residual connections and layer norm.

Layer norm (Ba et al. 2016) normalizes each token's own feature vector, then scales and shifts::

    LN(x) = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta

mean and (biased) variance taken across the d_model features of one token (C5.3), so the result
does not depend on the batch (C5.4). A residual connection wraps a sublayer in one of two ways
(C5.1)::

    post-norm:  LayerNorm(x + Sublayer(x))      (the original Transformer)
    pre-norm:   x + Sublayer(LayerNorm(x))      (most current large models)
"""

from __future__ import annotations

import torch
from torch import nn

from . import _validate as check

__all__ = ["NORM_PLACEMENTS", "LayerNorm", "Residual"]

NORM_PLACEMENTS = ("pre", "post", "none")


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
        check.tensor("x", x, last_dim=self.d_model, layout="[..., d_model]")
        mean = x.mean(dim=-1, keepdim=True)  # [..., 1]
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # [..., 1], biased
        x_hat = (x - mean) / torch.sqrt(var + self.eps)  # [..., d_model], mean 0, var 1
        return self.weight * x_hat + self.bias  # [..., d_model]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps:g}"


class Residual(nn.Module):
    """Lesson 5 (C5.1). Wraps a shape-preserving sublayer in a residual connection.

    ``norm="pre"``:  ``x + sublayer(LayerNorm(x))``
    ``norm="post"``: ``LayerNorm(x + sublayer(x))``
    ``norm="none"``: ``x + sublayer(x)`` (no layer norm; for comparison in lesson 5)
    """

    def __init__(self, sublayer: nn.Module, d_model: int, norm: str = "pre"):
        super().__init__()
        if not isinstance(sublayer, nn.Module):
            raise TypeError(f"sublayer must be a torch.nn.Module, got {type(sublayer).__name__}")
        self.sublayer = sublayer
        self.d_model = check.positive_int("d_model", d_model)
        self.norm_placement = check.choice("norm", norm, NORM_PLACEMENTS)
        self.norm = LayerNorm(d_model) if norm != "none" else nn.Identity()
        declared = getattr(sublayer, "d_model", None)
        if declared is not None and declared != d_model:
            raise ValueError(
                f"d_model={d_model} does not match the sublayer's d_model={declared}: "
                f"the residual adds x to sublayer(x), so both must have d_model features"
            )

    def _sublayer(self, x: torch.Tensor) -> torch.Tensor:
        out = self.sublayer(x)  # [batch, n, d_model]
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"the sublayer must return a tensor of the same shape as its input "
                f"{list(x.shape)} (d_model={self.d_model}) so that it can be added to x; got {got}"
            )
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check.tensor("x", x, last_dim=self.d_model, layout="[batch, n, d_model]")
        if self.norm_placement == "pre":
            return x + self._sublayer(self.norm(x))  # identity path untouched
        if self.norm_placement == "post":
            return self.norm(x + self._sublayer(x))  # the sum is normalized
        return x + self._sublayer(x)

    def extra_repr(self) -> str:
        return f"norm={self.norm_placement!r}"
