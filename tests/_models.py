"""Test-only models for the audit (lesson 10): a small GPT written in another style than the
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


# ---- models in the styles that once fooled the audit (issue 17) ------------------------------
def _rotate(x, base: float = 10000.0):
    """Rotary position on x [B, h, n, d]: each column pair (2i, 2i+1) turned by pos * base^(-2i/d)."""
    n, d = x.shape[-2], x.shape[-1]
    angle = torch.arange(n)[:, None] * base ** (-torch.arange(0, d, 2) / d)  # [n, d/2]
    cos, sin = angle.cos().to(x), angle.sin().to(x)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


class _PositionAttention(_CausalSelfAttention):
    """Causal attention with position inside it: "rotary" rotates q and k, "alibi" adds -m|p-q|."""

    def __init__(self, width: int, heads: int, inside: str):
        super().__init__(width, heads)
        self.inside = inside

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (t.view(b, n, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.inside == "rotary":
            q, k = _rotate(q), _rotate(k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)  # [B, h, n, n]
        if self.inside == "alibi":
            slopes = 2.0 ** (-8.0 * torch.arange(1, self.heads + 1) / self.heads)  # [h]
            dist = (torch.arange(n)[:, None] - torch.arange(n)[None]).abs()  # [n, n]
            att = att - slopes[:, None, None] * dist
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


def position_inside_gpt(inside: str = "rotary", table: bool = False, **kw) -> TinyGPT:
    """TinyGPT with position inside attention ("rotary" or "alibi"), and a learned table only if
    ``table``."""
    torch.manual_seed(0)
    model = TinyGPT(**kw)
    for layer in model.layers:
        width, heads = layer.mix.proj.in_features, layer.mix.heads
        layer.mix = _PositionAttention(width, heads, inside)
    if not table:
        with torch.no_grad():
            model.wpe.weight.zero_()
        model.wpe.weight.requires_grad_(False)
    return model


class _ResidualInsideMlp(_Mlp):
    """Bloom style: the sublayer adds the residual itself, mlp(x, residual) = residual + f(x)."""

    def forward(self, x, residual):
        return residual + super().forward(x)


class _ResidualInsideAttention(_CausalSelfAttention):
    def forward(self, x, residual):
        return residual + super().forward(x)


class _ResidualInsideLayer(_Layer):
    def __init__(self, width: int, heads: int):
        super().__init__(width, heads)
        self.mix = _ResidualInsideAttention(width, heads)
        self.mlp = _ResidualInsideMlp(width, 4 * width)

    def forward(self, x):
        x = self.mix(self.pre_mix(x), x)
        return self.mlp(self.pre_mlp(x), x)


class _FlatFfnLayer(nn.Module):
    """OPT style: the feed-forward is fc1 -> relu -> fc2 on x.reshape(-1, d), inlined in the block."""

    def __init__(self, width: int, heads: int, pre: bool = True):
        super().__init__()
        self.pre = pre
        self.attn_norm, self.ffn_norm = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = _CausalSelfAttention(width, heads)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        if self.pre:
            x = x + self.attn(self.attn_norm(x))
        else:
            x = self.attn_norm(x + self.attn(x))
        shape, h = x.shape, x.reshape(-1, x.shape[-1])  # [B*n, d]
        f = self.fc2(torch.relu(self.fc1(self.ffn_norm(h) if self.pre else h)))  # [B*n, d]
        return (h + f).view(shape) if self.pre else self.ffn_norm(h + f).view(shape)


class _ContextOnly(nn.Module):
    """Attention without its output projection: softmax(q k^T) v, heads concatenated."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads, self.qkv = heads, nn.Linear(width, 3 * width)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (t.view(b, n, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return (att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)


class _BertStyleLayer(nn.Module):
    """BERT style, post-norm: the attention's output projection is a Linear at block level, the
    feed-forward an ``intermediate`` (d -> d_ff, GELU) and an ``output`` Linear (d_ff -> d)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.context = _ContextOnly(width, heads)
        self.attn_out = nn.Linear(width, width)  # the attention output projection, d -> d
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.intermediate = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU())
        self.output = nn.Linear(4 * width, width)

    def forward(self, x):
        x = self.norm1(x + self.attn_out(self.context(x)))
        return self.norm2(x + self.output(self.intermediate(x)))


class _BiasOnlyHead(nn.Module):
    """BERT's prediction head: owns only a bias; its ``decoder`` child holds the matrix."""

    def __init__(self, width: int, vocab: int):
        super().__init__()
        self.decoder = nn.Linear(width, vocab, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, h):
        return self.decoder(h) + self.bias


def styled_gpt(style: str, tied: bool = True, **kw) -> TinyGPT:
    """TinyGPT with its layers (or head) in another family's style: "residual-inside" (Bloom),
    "flat-pre" / "flat-post" (OPT), "bert" (BERT's layer), "bias-head" (BERT's head)."""
    torch.manual_seed(0)
    model = TinyGPT(**kw)
    width, heads = model.wte.weight.shape[1], model.layers[0].mix.heads
    make = {
        "residual-inside": lambda: _ResidualInsideLayer(width, heads),
        "flat-pre": lambda: _FlatFfnLayer(width, heads, pre=True),
        "flat-post": lambda: _FlatFfnLayer(width, heads, pre=False),
        "bert": lambda: _BertStyleLayer(width, heads),
    }
    if style in make:
        model.layers = nn.ModuleList(make[style]() for _ in model.layers)
    if style == "bias-head":
        model.unembed = _BiasOnlyHead(width, model.wte.weight.shape[0])
        if tied:
            model.unembed.decoder.weight = model.wte.weight
    elif not tied:
        model.unembed = nn.Linear(width, model.wte.weight.shape[0], bias=False)
    return model


class CrossAttentionLM(nn.Module):
    """Decoder layers of PyTorch (self-attention, cross-attention to a memory, feed-forward); the
    memory is the embedded sequence itself, so the model maps tokens to logits alone."""

    def __init__(
        self, vocab: int = 97, width: int = 32, depth: int = 2, heads: int = 4, ctx: int = 32
    ):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
        self.layers = nn.ModuleList(
            nn.TransformerDecoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
            for _ in range(depth)
        )
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, tokens):
        n = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(n))  # [B, n, d]
        memory = h.detach()
        mask = nn.Transformer.generate_square_subsequent_mask(n)
        for layer in self.layers:
            h = layer(h, memory, tgt_mask=mask, tgt_is_causal=True)
        return self.head(h)


def hf_model(family: str, **overrides):
    """A Hugging Face model from a tiny config, random weights, nothing downloaded: "bert",
    "opt" (do_layer_norm_before=... for post-norm), "bloom", "llama"."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers as T

    torch.manual_seed(0)
    small = dict(vocab_size=100, hidden_size=32, num_attention_heads=4)
    if family == "bert":
        cfg = T.BertConfig(
            **small, num_hidden_layers=2, intermediate_size=128, max_position_embeddings=32
        )
        cls = T.BertForMaskedLM
    elif family == "opt":
        cfg = T.OPTConfig(
            **small,
            num_hidden_layers=2,
            ffn_dim=128,
            max_position_embeddings=32,
            word_embed_proj_dim=32,
        )
        cls = T.OPTForCausalLM
    elif family == "bloom":
        cfg = T.BloomConfig(vocab_size=100, hidden_size=32, n_layer=2, n_head=4)
        cls = T.BloomForCausalLM
    elif family == "llama":
        cfg = T.LlamaConfig(
            **small,
            num_hidden_layers=2,
            num_key_value_heads=2,
            intermediate_size=88,
            max_position_embeddings=32,
        )
        cls = T.LlamaForCausalLM
    else:
        raise ValueError(f"family must be bert, opt, bloom or llama, got {family!r}")
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cls(cfg)
