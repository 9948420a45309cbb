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


# ---- position mechanisms inside attention the audit must name (issue 24) ----------------------
def t5_bucket(distance: torch.Tensor, num_buckets: int = 32, max_distance: int = 128):
    """T5's relative-position bucket for a causal decoder (Raffel et al. 2020): distances below
    num_buckets / 2 get a bucket each; longer ones share log-spaced buckets up to max_distance,
    and every distance beyond that the last bucket."""
    exact = num_buckets // 2
    k = distance.clamp(min=0)
    spread = torch.log(k.clamp(min=1).double() / exact) / math.log(max_distance / exact)
    far = (exact + (spread * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return torch.where(k < exact, k, far)


class _T5BiasAttention(_CausalSelfAttention):
    """Causal attention with a bias on the scores given by the caller (T5's position_bias)."""

    def forward(self, x, position_bias):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (t.view(b, n, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads) + position_bias  # [B, h, n, n]
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


class _T5Layer(_Layer):
    def __init__(self, width: int, heads: int):
        super().__init__(width, heads)
        self.mix = _T5BiasAttention(width, heads)

    def forward(self, x, position_bias):
        x = x + self.mix(self.pre_mix(x), position_bias)
        return x + self.mlp(self.pre_mlp(x))


class T5BiasGPT(TinyGPT):
    """TinyGPT without a position table and with T5's relative bias: one learned number per head
    and distance bucket, computed once and passed to every layer (as T5's stack does)."""

    def __init__(self, num_buckets: int = 32, max_distance: int = 128, **kw):
        super().__init__(**kw)
        width, heads = self.wte.weight.shape[1], self.layers[0].mix.heads
        self.layers = nn.ModuleList(_T5Layer(width, heads) for _ in self.layers)
        del self.wpe
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.relative_bias = nn.Embedding(num_buckets, heads)

    def forward(self, idx):
        n = idx.shape[1]
        pos = torch.arange(n)
        bucket = t5_bucket(pos[:, None] - pos[None], self.num_buckets, self.max_distance)
        bias = self.relative_bias(bucket).permute(2, 0, 1)[None]  # [1, h, n, n]
        x = self.wte(idx)
        for layer in self.layers:
            x = layer(x, bias)
        return self.unembed(self.ln_out(x)), None


def t5_bias_gpt(num_buckets: int = 32, max_distance: int = 128, **kw) -> T5BiasGPT:
    torch.manual_seed(0)
    return T5BiasGPT(num_buckets, max_distance, **kw)


class _WindowAttention(_PositionAttention):
    """Causal attention that sees only the last ``window`` positions (itself included)."""

    def __init__(self, width: int, heads: int, inside: str, window: int):
        super().__init__(width, heads, inside)
        self.window = window

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (t.view(b, n, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.inside == "rotary":
            q, k = _rotate(q), _rotate(k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        pos = torch.arange(n)
        far = (pos[:, None] - pos[None] >= self.window) | (pos[None] > pos[:, None])
        att = att.masked_fill(far, float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


def windowed_gpt(window: int = 4, inside: str = "none", table: bool = True, **kw) -> TinyGPT:
    """TinyGPT whose attention sees only the last ``window`` positions (a sliding window), with a
    learned table added before the first block (``table``) and ``inside`` "none" or "rotary"."""
    torch.manual_seed(0)
    model = TinyGPT(**kw)
    for layer in model.layers:
        width, heads = layer.mix.proj.in_features, layer.mix.heads
        layer.mix = _WindowAttention(width, heads, inside, window)
    if not table:
        with torch.no_grad():
            model.wpe.weight.zero_()
        model.wpe.weight.requires_grad_(False)
    return model


def course_rotary_with_qk_bias(std: float, seed: int = 0, **kw):
    """The course's TransformerLM with rotary attention whose q and k projections have biases
    drawn N(0, std^2) (a trained model's biases are not zero; Qwen's q/k/v have biases)."""
    from helpers import TransformerLM

    torch.manual_seed(seed)
    cfg = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=64)
    cfg.update(kw)
    model = TransformerLM(**cfg, positional="rotary")
    with torch.no_grad():
        for block in model.blocks:
            attn = block.attn.sublayer
            attn.q_proj.bias.normal_(0.0, std)
            attn.k_proj.bias.normal_(0.0, std)
    return model


def hf_local_attention(family: str, window: int = 4, **overrides):
    """A Hugging Face model with local attention, tiny config, nothing downloaded: "gpt_neo"
    (global then local layers, ``window_size``) or "mistral" (rotary, ``sliding_window``)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers as T

    torch.manual_seed(0)
    if family == "gpt_neo":
        cfg = T.GPTNeoConfig(
            vocab_size=100,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            intermediate_size=128,
            max_position_embeddings=64,
            attention_types=[[["global", "local"], 1]],
            window_size=window,
            bos_token_id=0,
            eos_token_id=0,
        )
        cls = T.GPTNeoForCausalLM
    elif family == "mistral":
        cfg = T.MistralConfig(
            vocab_size=100,
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_hidden_layers=2,
            intermediate_size=88,
            max_position_embeddings=64,
            sliding_window=window,
        )
        cls = T.MistralForCausalLM
    else:
        raise ValueError(f"family must be gpt_neo or mistral, got {family!r}")
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cls(cfg)


class _AbsoluteInsideAttention(_CausalSelfAttention):
    """Causal attention with position by its index inside it: "qk" adds a learned vector per
    position to q and k (content and position mixed, but not by distance), "bias" a learned
    number per head and (query, key) position pair."""

    def __init__(self, width: int, heads: int, how: str, ctx: int):
        super().__init__(width, heads)
        self.how = how
        d = width // heads
        self.pos_q = nn.Parameter(torch.randn(ctx, d) * 0.5)
        self.pos_k = nn.Parameter(torch.randn(ctx, d) * 0.5)
        self.pair_bias = nn.Parameter(torch.randn(heads, ctx, ctx))

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (t.view(b, n, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.how == "qk":
            q, k = q + self.pos_q[:n], k + self.pos_k[:n]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        if self.how == "bias":
            att = att + self.pair_bias[:, :n, :n]
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


def absolute_inside_gpt(how: str = "qk", ctx: int = 64, **kw) -> TinyGPT:
    """TinyGPT without a table, position by absolute index inside attention ("qk" or "bias")."""
    torch.manual_seed(0)
    model = TinyGPT(ctx=ctx, **kw)
    for layer in model.layers:
        width, heads = layer.mix.proj.in_features, layer.mix.heads
        layer.mix = _AbsoluteInsideAttention(width, heads, how, ctx)
    with torch.no_grad():
        model.wpe.weight.zero_()
    model.wpe.weight.requires_grad_(False)
    return model


def explorer_model():
    """The small model and tokenizer the explorer tests give lesson 9's generation explorer:
    a 1-block TransformerLM (d_model 16, 2 heads, context 16) in float64, seed 0."""
    from helpers import TransformerLM
    from helpers.text import CharTokenizer

    tokenizer = CharTokenizer("abcdefghij klmnop:\n")
    torch.manual_seed(0)
    return TransformerLM(tokenizer.vocab_size, 16, 1, 2, max_len=16).double(), tokenizer


def small_explorer(name: str):
    """An explorer of helpers.widgets by name, at its defaults (the generation explorer on
    ``explorer_model()`` with the prompt "abc")."""
    from helpers import widgets

    if name == "generation_explorer":
        model, tokenizer = explorer_model()
        return widgets.generation_explorer(model, tokenizer, prompt="abc")
    return getattr(widgets, name)()
