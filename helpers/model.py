"""Lesson 8: entering and leaving the vector space; the full language model.

    h_0    = E[tokens] (* sqrt(d_model) if scale_embeddings) + position     [B, n, d_model]
    h_l    = block_l(h_{l-1}),  l = 1..L                                     [B, n, d_model]
    logits = LN_f(h_L) @ W_out                                               [B, n, vocab_size]

``positional`` "sinusoidal" or "learned" adds position to h_0 (the sheet's design, C4.5);
"rotary" and "alibi" put it inside every attention instead and "none" nowhere (C4.8, C4.9): for
these three nothing is added, h_0 = E[tokens]. ``norm_type="rms"`` uses RMSNorm (C5.8) in every
place LayerNorm would be.

The embedding E is vocab_size x d_model (C8.1); the output projection is d_model x vocab_size
(C8.2). Tied (Press & Wolf 2017; Vaswani et al. 2017 section 3.4): W_out = E^T, the very same
tensor (C8.3), which saves vocab_size * d_model parameters (C8.4).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, fields, replace

import torch
from torch import nn

from . import _validate as check
from .blocks import TransformerBlock
from .feedforward import ACTIVATIONS
from .generation import GenerationMixin
from .normalization import NORM_PLACEMENTS, NORM_TYPES, LayerNorm, RMSNorm, make_norm
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from .reproducible import default_dtype

__all__ = [
    "POSITIONAL_KINDS",
    "POSITIONAL_OPTIONS",
    "INITS",
    "LMConfig",
    "GPT2_SMALL",
    "LESSON_MODEL",
    "TransformerLM",
    "seeded_model",
    "init_weights",
    "coherent_defaults",
    "next_token_loss",
]

#: The sheet's two schemes, added to the embeddings before the first block (C4.5); what
#: :func:`helpers.length.train_at_length` measures (C4.7).
POSITIONAL_KINDS = ("sinusoidal", "learned")
#: Everything :class:`TransformerLM` accepts: the sheet's two, position inside attention
#: (rotary, ALiBi: C4.8) and no position at all (C4.9).
POSITIONAL_OPTIONS = (*POSITIONAL_KINDS, "rotary", "alibi", "none")
INITS = ("gpt2", "xavier", "torch")


@dataclass(frozen=True)
class LMConfig:
    """Lesson 8. Every setting of a :class:`TransformerLM`, as one value to print, compare, save
    and build from (``TransformerLM.from_config(config)``; ``model.config`` is the one it was
    built from).

    The sizes (``vocab_size``, ``d_model``, ``n_layers``, ``n_heads``, ``d_ff`` = 4 d_model when
    None, ``max_len``) and the options (``positional``, ``norm``, ``activation``, ``tie_weights``,
    ``norm_type``) are :class:`TransformerLM`'s. ``init`` and ``scale_embeddings`` left None mean
    the coherent default for ``positional`` (:func:`coherent_defaults`, C8.6); a config keeps them
    None, so ``dataclasses.replace(config, positional="learned")`` takes that scheme's default
    again; :meth:`resolved` fills them in. Each field is checked when the config is made, with an
    error naming it. A new option of the model is one more field here (with its default) and one
    more keyword of :class:`TransformerLM`; the checkpoint and the experiments follow.

    The options a real checkpoint needs (lesson 8, going further: :mod:`helpers.convert`):
    ``bias`` (False: no bias in any Linear, as Llama), ``d_hidden`` (SwiGLU's hidden width, e.g.
    Llama's intermediate_size; None: round(2/3 d_ff)), ``norm_eps`` (the norms' epsilon; None:
    1e-5 for LayerNorm, 1e-6 for RMSNorm) and ``rotary_base`` (rotary's base, 10000).
    ``activation="gelu_tanh"`` is GPT-2's GELU.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int | None = None
    max_len: int = 1024
    positional: str = "sinusoidal"
    norm: str = "pre"
    activation: str = "gelu"
    tie_weights: bool = True
    norm_type: str = "layer"
    init: str | None = None
    scale_embeddings: bool | None = None
    bias: bool = True
    d_hidden: int | None = None
    norm_eps: float | None = None
    rotary_base: float = 10000.0

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_len"):
            object.__setattr__(self, name, check.positive_int(name, getattr(self, name)))
        if self.d_ff is not None:
            object.__setattr__(self, "d_ff", check.positive_int("d_ff", self.d_ff))
        check.choice("positional", self.positional, POSITIONAL_OPTIONS)
        check.choice("norm", self.norm, NORM_PLACEMENTS)
        check.choice("activation", self.activation, ACTIVATIONS)
        if not isinstance(self.tie_weights, bool):
            raise TypeError(f"tie_weights must be True or False, got {self.tie_weights!r}")
        check.choice("norm_type", self.norm_type, NORM_TYPES)
        if self.init is not None:
            check.choice("init", self.init, INITS)
        if self.scale_embeddings is not None and not isinstance(self.scale_embeddings, bool):
            raise TypeError(
                f"scale_embeddings must be True, False or None (the default for the positional "
                f"scheme), got {self.scale_embeddings!r}"
            )
        if not isinstance(self.bias, bool):
            raise TypeError(f"bias must be True or False, got {self.bias!r}")
        if self.d_hidden is not None:
            if self.activation != "swiglu":
                raise ValueError(
                    f"d_hidden sets SwiGLU's hidden width; with activation={self.activation!r} "
                    f"the hidden width is d_ff: give d_ff={self.d_hidden} instead"
                )
            object.__setattr__(self, "d_hidden", check.positive_int("d_hidden", self.d_hidden))
        if self.norm_eps is not None:
            object.__setattr__(self, "norm_eps", check.positive_float("norm_eps", self.norm_eps))
        object.__setattr__(
            self, "rotary_base", check.positive_float("rotary_base", self.rotary_base)
        )

    def keywords(self) -> dict:
        """The fields a model needs besides its defaults, as :class:`TransformerLM` keywords: the
        sizes without a default and every field that differs from its default, in field order
        (``TransformerLM(**config.keywords())`` is ``TransformerLM.from_config(config)``)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.default is MISSING or getattr(self, f.name) != f.default
        }

    def resolved(self) -> LMConfig:
        """The same config with ``init`` and ``scale_embeddings`` filled in from
        :func:`coherent_defaults` where they are None (what the model actually uses)."""
        init, scale = coherent_defaults(self.positional)
        init = init if self.init is None else self.init
        scale = scale if self.scale_embeddings is None else self.scale_embeddings
        return replace(self, init=init, scale_embeddings=scale)


#: Fields :meth:`TransformerLM.extra_repr` always prints (the model's shape, as printed before
#: the config held more); any other field is printed only when it differs from its default,
#: except how the weights are drawn (``init``, ``scale_embeddings``), which is never printed.
_REPR_ALWAYS = (
    "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len", "positional", "norm",
    "activation", "tie_weights",
)  # fmt: skip
_REPR_NEVER = ("init", "scale_embeddings")


#: GPT-2 small (Radford et al. 2019): 124,439,808 parameters tied, 163,037,184 untied.
GPT2_SMALL = LMConfig(
    vocab_size=50257,
    d_model=768,
    n_layers=12,
    n_heads=12,
    d_ff=3072,
    max_len=1024,
    positional="learned",
)


#: The lessons' own model (lessons 8 and 9): d_model 48, 2 blocks, 4 heads, sinusoidal position,
#: pre-norm, GELU, tied (lesson 9's live run changes its position to rotary, C9.3's lower row).
#: Its ``vocab_size`` is the whole shipped text's 65 characters and its ``max_len`` lesson 9's
#: context of 64; a run on another text or context replaces those two
#: (``dataclasses.replace(LESSON_MODEL, vocab_size=..., max_len=...)``). Every experiment built
#: on the lesson model takes its sizes from here.
LESSON_MODEL = LMConfig(vocab_size=65, d_model=48, n_layers=2, n_heads=4, max_len=64)


def next_token_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting tokens[:, t+1] from tokens[:, :t+1] (lesson 8's loss)."""
    check.tensor("tokens", tokens, ndim=2, layout="[batch, n]")
    if tokens.shape[1] < 2:
        raise ValueError(
            "tokens must have at least 2 positions [batch, n >= 2]: the loss predicts "
            f"tokens[:, 1:] from tokens[:, :-1], got shape {list(tokens.shape)}"
        )
    logits = model(tokens[:, :-1])  # [B, n-1, V]
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
    )


def coherent_defaults(positional: str) -> tuple[str, bool]:
    """Lesson 8 (C8.6). The initialization and embedding scaling that :class:`TransformerLM` uses
    when they are not given, chosen so that position does not drown the token:

    * ``"sinusoidal"``: a fixed encoding of norm sqrt(d_model / 2) is added, so token vectors are
      drawn N(0, 1/d_model) (``init="xavier"``) and multiplied by sqrt(d_model) (norm about
      sqrt(d_model)), as in Vaswani et al. 2017, section 3.4.
    * ``"learned"``: both tables are trained parameters drawn alike, N(0, 0.02^2)
      (``init="gpt2"``, GPT-2's scheme), and nothing is scaled.
    * ``"rotary"``, ``"alibi"``, ``"none"``: nothing is added to the token vectors, so there is
      nothing for them to be comparable to: GPT-2's init and no scaling (Llama, rotary, and
      Bloom, ALiBi, also draw their weights N(0, 0.02^2) and do not scale their embeddings).
    """
    check.choice("positional", positional, POSITIONAL_OPTIONS)
    if positional == "sinusoidal":
        return "xavier", True
    return "gpt2", False


def init_weights(model: nn.Module, scheme: str = "gpt2") -> nn.Module:
    """Lesson 5/8. Re-initialize every Linear and Embedding of ``model`` in place.

    ``"gpt2"``: weights ~ N(0, 0.02^2), biases 0 (GPT-2's scheme, without the extra 1/sqrt(N)
    scaling that GPT-2 applies to the residual layers' output projections, Radford et al. 2019).
    ``"xavier"``: Linear weights Xavier-normal, biases 0, embeddings N(0, 1/d_model) (the
    original Transformer's scheme as fairseq implements it; under it post-norm's gradients grow
    with depth at initialization, Xiong et al. 2020).
    ``"torch"``: leave PyTorch's default initialization.
    Layer norms are reset to weight 1, bias 0 in every scheme (RMSNorms to gain 1).
    """
    check.choice("scheme", scheme, INITS)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if scheme == "torch":
        return model
    for module in model.modules():
        if isinstance(module, nn.Linear):
            if scheme == "gpt2":
                nn.init.normal_(module.weight, 0.0, 0.02)
            else:
                nn.init.xavier_normal_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            std = 0.02 if scheme == "gpt2" else module.embedding_dim**-0.5
            nn.init.normal_(module.weight, 0.0, std)
        elif isinstance(module, LayerNorm | nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, RMSNorm | nn.RMSNorm) and module.weight is not None:
            nn.init.ones_(module.weight)
    return model


class TransformerLM(nn.Module, GenerationMixin):
    """Lesson 8. A decoder-only Transformer language model built from the course's pieces.

    token embedding (vocab_size x d_model) + position (sinusoidal or learned, added once before
    the first block), ``n_layers`` causal :class:`TransformerBlock`, a final LayerNorm for
    pre-norm, and the output projection d_model -> vocab_size (no bias). With
    ``tie_weights=True`` the projection's weight *is* the embedding's weight.
    Every Linear and LayerNorm has a bias, as in GPT-2: :data:`GPT2_SMALL` counts 124,439,808
    (``bias=False`` drops the Linears' biases, as Llama; ``d_hidden``, ``norm_eps`` and
    ``rotary_base`` as :class:`LMConfig` says: what :mod:`helpers.convert` needs for a real
    checkpoint).

    ``positional="rotary"`` or ``"alibi"`` puts position inside every block's attention (C4.8;
    rotary needs an even d_head = d_model / n_heads) and ``"none"`` leaves it out (C4.9): then
    ``self.position`` is an ``nn.Identity`` and h_0 = E[tokens], with no parameter and no length
    limit from a table. ``norm_type="rms"`` puts :class:`~helpers.RMSNorm` (gain only, no bias)
    wherever LayerNorm would be, the final norm included. ``generate(tokens, max_new_tokens,
    temperature=1.0, top_k=None, generator=None, context=None)`` writes with it (lesson 9,
    C9.2; :class:`helpers.generation.GenerationMixin`).

    Built from keywords (as the lessons do) or from an :class:`LMConfig`
    (:meth:`from_config`); either way ``model.config`` is the :class:`LMConfig` as given, with
    ``init`` and ``scale_embeddings`` None where they were left to their default, so that
    ``from_config(model.config)`` builds the same model; ``model.init_scheme`` and
    ``model.scale_embeddings`` are the values it used (``model.config.resolved()``).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        d_ff: int | None = None,
        max_len: int = 1024,
        positional: str = "sinusoidal",
        norm: str = "pre",
        activation: str = "gelu",
        tie_weights: bool = True,
        *,
        scale_embeddings: bool | None = None,
        init: str | None = None,
        norm_type: str = "layer",
        bias: bool = True,
        d_hidden: int | None = None,
        norm_eps: float | None = None,
        rotary_base: float = 10000.0,
    ):
        super().__init__()
        config = LMConfig(
            vocab_size, d_model, n_layers, n_heads, d_ff, max_len, positional, norm, activation,
            bool(tie_weights), norm_type=norm_type, init=init, scale_embeddings=scale_embeddings,
            bias=bias, d_hidden=d_hidden, norm_eps=norm_eps, rotary_base=rotary_base,
        )  # fmt: skip
        self.config = config
        # C8.6: the defaults keep token and position at comparable sizes (see coherent_defaults)
        resolved = config.resolved()
        self.init_scheme = resolved.init
        self.scale_embeddings = resolved.scale_embeddings
        c = config  # the checked values
        vocab_size, d_model, n_layers, n_heads = c.vocab_size, c.d_model, c.n_layers, c.n_heads
        d_ff, max_len, positional, norm = c.d_ff, c.max_len, c.positional, c.norm
        activation, norm_type = c.activation, c.norm_type
        self.token_embedding = nn.Embedding(vocab_size, d_model)  # W_E [vocab_size, d_model]
        if positional == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(d_model, max_len=max_len)
        elif positional == "learned":
            self.position = LearnedPositionalEmbedding(max_len, d_model)
        else:  # rotary, alibi (inside attention) or none: nothing is added to the stream
            self.position = nn.Identity()
        inside = positional if positional in ("rotary", "alibi") else "none"
        self.blocks = nn.ModuleList(
            TransformerBlock(
                d_model,
                n_heads,
                d_ff,
                norm=norm,
                activation=activation,
                causal=True,
                bias=c.bias,
                norm_type=norm_type,
                positional=inside,
                rotary_base=c.rotary_base,
                norm_eps=c.norm_eps,
                d_hidden=c.d_hidden,
            )
            for _ in range(n_layers)
        )
        pre = norm == "pre"
        self.final_norm = make_norm(norm_type, d_model, c.norm_eps) if pre else nn.Identity()
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)  # weight [vocab_size, d_model]
        init_weights(self, self.init_scheme)
        if self.config.tie_weights:
            self.lm_head.weight = self.token_embedding.weight  # the same Parameter, not a copy

    @classmethod
    def from_config(cls, config: LMConfig) -> TransformerLM:
        """Lesson 8. The model of ``config`` (an :class:`LMConfig`): the same as passing its
        fields as keywords; ``TransformerLM.from_config(model.config)`` builds a model of the
        same shape (and, after the same ``torch.manual_seed``, the same weights)."""
        if not isinstance(config, LMConfig):
            raise TypeError(f"config must be a helpers.model.LMConfig, got {type(config).__name__}")
        return cls(**asdict(config))

    @property
    def tied(self) -> bool:
        """True when the output projection's weight is the embedding's weight object."""
        return self.lm_head.weight is self.token_embedding.weight

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token embeddings plus position: h_0, [B, n, d_model]."""
        if check.checking():  # not again inside loss(), which checked them
            check.token_ids("tokens", tokens, self.config.vocab_size)
        h = self.token_embedding(tokens)  # [B, n, d]: row lookup in W_E
        if self.scale_embeddings:
            h = h * math.sqrt(self.config.d_model)
        with check.model_pass():  # the position module does not re-check h
            return self.position(h)  # [B, n, d]: added once, before the first block (or not)

    def forward(self, tokens: torch.Tensor, return_hidden: bool = False):
        """tokens [B, n] (ids) -> logits [B, n, vocab_size].

        With ``return_hidden=True`` returns ``(logits, hidden)`` where ``hidden`` is the list
        [h_0, h_1, ..., h_L] of residual-stream states (C7.3).
        """
        h = self.embed(tokens)  # [B, n, d]: the tokens are checked here, once
        hidden = [h]
        with check.model_pass():  # the layers do not re-check, and use torch's fused kernels
            for block in self.blocks:
                h = block(h)  # [B, n, d] -> [B, n, d]
                hidden.append(h)
            logits = self.lm_head(self.final_norm(h))  # [B, n, vocab_size]
        return (logits, hidden) if return_hidden else logits

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy: predict tokens[:, 1:] from tokens[:, :-1].

        tokens: [B, n] ids with n >= 2 (n - 1 predictions per row).
        """
        check.token_ids("tokens", tokens, self.config.vocab_size)
        with check.model_pass():  # checked once, here
            return next_token_loss(self, tokens)

    def extra_repr(self) -> str:
        shown = []
        for f in fields(self.config):
            value = getattr(self.config, f.name)
            if f.name in _REPR_NEVER:
                continue
            if f.name in _REPR_ALWAYS or f.default is MISSING or value != f.default:
                shown.append(f"{f.name}={value}")
        return ", ".join(shown)


def seeded_model(config: LMConfig, seed: int, dtype: torch.dtype | None = None) -> TransformerLM:
    """Lessons 4 to 9. ``torch.manual_seed(seed)``, then ``TransformerLM.from_config(config)``
    under :func:`~helpers.reproducible.default_dtype` (``dtype``: torch.float32 or torch.float64;
    None: the current default): the same seed and config give the same initial weights, and
    float64 draws are the same bits on every CPU path. Seeds torch's global generator, as the
    lessons' runs always have (wrap it in ``torch.random.fork_rng`` to leave that alone)."""
    if not isinstance(config, LMConfig):
        raise TypeError(f"config must be a helpers.model.LMConfig, got {type(config).__name__}")
    seed = check.positive_int("seed", seed, minimum=0)
    torch.manual_seed(seed)
    with default_dtype(torch.get_default_dtype() if dtype is None else dtype):
        return TransformerLM.from_config(config)
