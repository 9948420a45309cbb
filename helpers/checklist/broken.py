"""A model from PyTorch's own layers, and the deliberately broken models of the capstone.

:class:`TorchEncoderLM` is built from ``nn.TransformerEncoderLayer`` (not the course's code) and
passes every check. Each model of :data:`BROKEN_MODELS` is a small ``TransformerLM`` with one
flaw, caught by one check only: the exercises of lesson 10 ask the student to find and repair them.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .. import _validate as check
from ..model import TransformerLM

__all__ = [
    "TorchEncoderLM",
    "PositionAfterFirstBlockLM",
    "MissingResidualLM",
    "NarrowFeedForwardLM",
    "PerPositionFeedForwardLM",
    "ReusedBlockLM",
    "CopiedOutputLM",
    "BROKEN_MODELS",
    "broken_model",
]


class TorchEncoderLM(nn.Module):
    """Lesson 10. A causal LM from PyTorch's own ``nn.TransformerEncoderLayer`` (not the course's
    code): token embedding + learned position, ``n_layers`` layers (``norm_first`` True = pre-norm),
    a final LayerNorm for pre-norm, output projection tied to the embedding if ``tie_weights``."""

    def __init__(
        self,
        vocab_size: int = 100,
        d_model: int = 32,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int | None = None,
        max_len: int = 64,
        norm_first: bool = True,
        tie_weights: bool = True,
    ):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.tok = nn.Embedding(vocab_size, d_model)  # [V, d]
        self.pos = nn.Embedding(max_len, d_model)  # [max_len, d]
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first
            )
            for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size, bias=False)  # weight [V, d]
        if tie_weights:
            self.head.weight = self.tok.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(n, device=tokens.device))  # [B, n, d]
        mask = nn.Transformer.generate_square_subsequent_mask(n)  # [n, n], -inf above diagonal
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)  # [B, n, d]
        return self.head(self.ln_f(h))  # [B, n, V]


_SMALL = dict(vocab_size=100, d_model=32, n_layers=2, n_heads=4, max_len=32)


class PositionAfterFirstBlockLM(TransformerLM):
    """Lesson 10, broken for K1: position is added *after* the first block, not before it."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, n] (ids) -> logits [B, n, vocab_size], with position added after block 0
        (the bug). Unlike :meth:`helpers.TransformerLM.forward` it takes no ``return_hidden``."""
        h = self.token_embedding(tokens)  # [B, n, d]: no position yet
        for i, block in enumerate(self.blocks):
            h = block(h)  # [B, n, d]
            if i == 0:
                h = self.position(h)  # the bug: position enters after block 0
        return self.lm_head(self.final_norm(h))  # [B, n, V]


class _NoResidual(nn.Module):
    """The sublayer of a Residual with the ``x +`` left out: LN then sublayer (pre) or the reverse."""

    def __init__(self, residual: nn.Module):
        super().__init__()
        self.sublayer, self.norm = residual.sublayer, residual.norm
        self.norm_placement = residual.norm_placement

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_placement == "post":
            return self.norm(self.sublayer(x))  # no x + ...
        return self.sublayer(self.norm(x))  # no x + ...


class MissingResidualLM(TransformerLM):
    """Lesson 10, broken for K2: the last block's feed-forward is not wrapped in a residual."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks[-1].ffn = _NoResidual(self.blocks[-1].ffn)


class NarrowFeedForwardLM(TransformerLM):
    """Lesson 10, broken for K3: d_ff = d_model / 2, so the feed-forward narrows, then widens."""

    def __init__(self, vocab_size, d_model, n_layers, n_heads, **kwargs):
        kwargs["d_ff"] = d_model // 2
        super().__init__(vocab_size, d_model, n_layers, n_heads, **kwargs)


class _PerPositionFeedForward(nn.Module):
    """A feed-forward with a different pair of weight matrices for every position."""

    def __init__(self, template: nn.Module, n_positions: int):
        super().__init__()
        self.d_model = template.d_model
        self.per_position = nn.ModuleList(copy.deepcopy(template) for _ in range(n_positions))
        for ff in self.per_position:
            for p in ff.parameters():
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # [B, n, d]: position i goes through its own feed-forward per_position[i]
        return torch.stack([self.per_position[i](x[:, i]) for i in range(x.shape[1])], dim=1)


class PerPositionFeedForwardLM(TransformerLM):
    """Lesson 10, broken for K3: each position has its own feed-forward weights."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for block in self.blocks:
            block.ffn.sublayer = _PerPositionFeedForward(block.ffn.sublayer, self.config.max_len)


class ReusedBlockLM(TransformerLM):
    """Lesson 10, broken for K4: one block object at every depth (``[block] * n_layers``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = nn.ModuleList([self.blocks[0]] * self.config.n_layers)


class CopiedOutputLM(TransformerLM):
    """Lesson 10, broken for K5: the output projection holds a *copy* of the embedding matrix."""

    def __init__(self, *args, **kwargs):
        kwargs["tie_weights"] = False
        super().__init__(*args, **kwargs)
        self.lm_head.weight = nn.Parameter(self.token_embedding.weight.detach().clone())


#: One deliberately broken model per check (K3 has two).
BROKEN_MODELS = {
    "K1": PositionAfterFirstBlockLM,
    "K2": MissingResidualLM,
    "K3": NarrowFeedForwardLM,
    "K3-per-position": PerPositionFeedForwardLM,
    "K4": ReusedBlockLM,
    "K5": CopiedOutputLM,
}


def broken_model(flaw: str, seed: int = 0, **kwargs) -> TransformerLM:
    """Lesson 10. A small TransformerLM with one deliberate flaw, the one ``flaw`` (a key of
    :data:`BROKEN_MODELS`) names; ``kwargs`` override the small default settings."""
    check.choice("flaw", flaw, BROKEN_MODELS)
    torch.manual_seed(check.positive_int("seed", seed, minimum=0))
    return BROKEN_MODELS[flaw](**{**_SMALL, **kwargs})
