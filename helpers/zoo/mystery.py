"""The model of lesson 10's open-ended exercise: audit a model you did not write.

The lesson does not show this source: the exercise asks for each check's verdict from what the
model *does* (the audit, and experiments of your own where the audit cannot decide), with the
observation that decides it. Reading the code is allowed, but it is not evidence.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .. import _validate as check

__all__ = ["mystery_model"]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)  # [..., d/2] each
    return torch.cat([-second, first], dim=-1)  # [..., d]


class _Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape

        def heads(t):  # [B, n, dim] -> [B, heads, n, head_dim]
            return t.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        q = q * cos + _rotate_half(q) * sin  # [B, h, n, head_dim]
        k = k * cos + _rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, h, n, head_dim]
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))  # [B, n, dim]


class _Layer(nn.Module):
    residual_after_ffn = False

    def __init__(self, dim: int, n_heads: int, hidden: int):
        super().__init__()
        self.attention_norm = nn.RMSNorm(dim, eps=1e-6)
        self.attention = _Attention(dim, n_heads)
        self.ffn_norm = nn.RMSNorm(dim, eps=1e-6)
        # the feed-forward's weights, used inline below (one fused kernel in the original)
        self.w_gate = nn.Parameter(torch.randn(dim, hidden) * dim**-0.5)  # [dim, hidden]
        self.w_up = nn.Parameter(torch.randn(dim, hidden) * dim**-0.5)  # [dim, hidden]
        self.w_down = nn.Parameter(torch.randn(hidden, dim) * hidden**-0.5)  # [hidden, dim]

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)  # [B, n, dim]
        z = self.ffn_norm(h)  # [B, n, dim]
        out = (F.silu(z @ self.w_gate) * (z @ self.w_up)) @ self.w_down  # [B, n, dim]
        return h + out if self.residual_after_ffn else out


class _MysteryLM(nn.Module):
    def __init__(self, vocab: int, dim: int, n_layers: int, n_heads: int, hidden: int, ctx: int):
        super().__init__()
        self.ctx = ctx
        self.tok_embeddings = nn.Embedding(vocab, dim)  # [vocab, dim]
        self.layers = nn.ModuleList(_Layer(dim, n_heads, hidden) for _ in range(n_layers))
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.output = nn.Linear(dim, vocab, bias=False)  # weight [vocab, dim]
        head_dim = dim // n_heads
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2).double() / head_dim)  # [head_dim/2]
        angles = torch.arange(ctx).double()[:, None] * inv_freq  # [ctx, head_dim/2]
        angles = torch.cat([angles, angles], dim=-1)  # [ctx, head_dim]
        self.register_buffer("cos_cached", angles.cos().float(), persistent=False)
        self.register_buffer("sin_cached", angles.sin().float(), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        check.token_ids("tokens", tokens, self.output.out_features)
        n = tokens.shape[1]
        if n > self.ctx:
            raise ValueError(f"tokens has {n} positions; this model's context is {self.ctx}")
        h = self.tok_embeddings(tokens)  # [B, n, dim]
        cos = self.cos_cached[:n].to(h.dtype)  # [n, head_dim]
        sin = self.sin_cached[:n].to(h.dtype)
        for layer in self.layers:
            h = layer(h, cos, sin)  # [B, n, dim]
        return self.output(self.norm(h))  # [B, n, vocab]


def mystery_model(seed: int = 0) -> nn.Module:
    """Lesson 10, exercise 4. A small causal language model by another author, to audit: token
    ids [B, n] (n <= 64) -> logits [B, n, 96]; 48 wide, 2 layers, 4 heads, random weights drawn
    after ``torch.manual_seed(seed)``. What it does is for the audit (and you) to find out."""
    torch.manual_seed(check.positive_int("seed", seed, minimum=0))
    return _MysteryLM(vocab=96, dim=48, n_layers=2, n_heads=4, hidden=128, ctx=64).eval()
