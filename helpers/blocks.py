"""Lesson 7: the Transformer block, and stacking blocks into depth.

One block = attention then feed-forward, each wrapped in a residual (lesson 5)::

    pre-norm:   x = x + MHA(LN1(x));   x = x + FFN(LN2(x))
    post-norm:  x = LN1(x + MHA(x));   x = LN2(x + FFN(x))

Every block maps [batch, n, d_model] to the same shape (C7.1), so blocks stack with no adapter;
each block owns its parameters (C7.2); the running x is the residual stream (C7.3).
"""

from __future__ import annotations

import torch
from torch import nn

from . import _validate as check
from .attention import MultiHeadAttention
from .feedforward import FeedForward
from .normalization import Residual

__all__ = ["TransformerBlock", "make_stack"]


class TransformerBlock(nn.Module):
    """Lesson 7. ``x -> Residual(MHA) -> Residual(FFN)``; [batch, n, d_model] in and out.

    ``norm`` is "pre", "post" or "none" (residuals without layer norm), ``activation`` that of the
    feed-forward block, ``d_ff`` defaults to 4 * d_model.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        norm: str = "pre",
        activation: str = "relu",
        causal: bool = False,
        bias: bool = True,
    ):
        super().__init__()
        self.d_model = check.positive_int("d_model", d_model)
        self.attn = Residual(
            MultiHeadAttention(d_model, n_heads, causal=causal, bias=bias), d_model, norm
        )
        self.ffn = Residual(FeedForward(d_model, d_ff, activation, bias=bias), d_model, norm)

    @property
    def norm_placement(self) -> str:
        return self.attn.norm_placement

    @property
    def attention(self) -> MultiHeadAttention:
        return self.attn.sublayer

    @property
    def feedforward(self) -> FeedForward:
        return self.ffn.sublayer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check.tensor("x", x, ndim=3, last_dim=self.d_model, layout="[batch, n, d_model]")
        x = self.attn(x)  # [B, n, d]: attention mixes positions, residual adds it to the stream
        x = self.ffn(x)  # [B, n, d]: the feed-forward reshapes each position on its own
        return x


def make_stack(n_layers: int, d_model: int, n_heads: int, **block_kwargs) -> nn.ModuleList:
    """Lesson 7 (C7.2). ``n_layers`` independent blocks (distinct parameter tensors each)."""
    n_layers = check.positive_int("n_layers", n_layers)
    return nn.ModuleList(
        TransformerBlock(d_model, n_heads, **block_kwargs) for _ in range(n_layers)
    )
