"""Test-only models for the audit (lesson 9): a small GPT written in another style than the
course's, and Hugging Face GPT-2 built from a config (random weights, nothing downloaded)."""

from __future__ import annotations

import math
import os

import torch
from torch import nn


class _CausalSelfAttention(nn.Module):
    """nanoGPT-style: one fused Linear makes q, k and v; heads by reshape; causal mask."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)  # fused W_Q | W_K | W_V
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)  # each [B, n, C]
        q, k, v = (t.view(b, n, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)  # [B, h, n, n]
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        y = att.softmax(-1) @ v  # [B, h, n, c/h]
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class _Mlp(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.widen = nn.Linear(width, hidden)
        self.narrow = nn.Linear(hidden, width)

    def forward(self, x):
        return self.narrow(torch.nn.functional.gelu(self.widen(x), approximate="tanh"))


class _Layer(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.pre_mix = nn.LayerNorm(width)
        self.mix = _CausalSelfAttention(width, heads)
        self.pre_mlp = nn.LayerNorm(width)
        self.mlp = _Mlp(width, 4 * width)

    def forward(self, x):
        x = x + self.mix(self.pre_mix(x))
        return x + self.mlp(self.pre_mlp(x))


class TinyGPT(nn.Module):
    """A small GPT in nanoGPT's style: fused qkv, pre-norm, learned positions, tied head."""

    def __init__(
        self, vocab: int = 97, width: int = 48, depth: int = 3, heads: int = 4, ctx: int = 32
    ):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(ctx, width)
        self.layers = nn.ModuleList(_Layer(width, heads) for _ in range(depth))
        self.ln_out = nn.LayerNorm(width)
        self.unembed = nn.Linear(width, vocab, bias=False)
        self.unembed.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)[None]
        for layer in self.layers:
            x = layer(x)
        return self.unembed(self.ln_out(x)), None  # (logits, loss) as nanoGPT returns


def hf_gpt2(**overrides):
    """GPT2LMHeadModel from a small config, random weights; never downloads."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=32)
    cfg.update(overrides)
    return GPT2LMHeadModel(GPT2Config(**cfg))
