# Past ~450 lines on purpose: one job (two families mapped both ways), a third of it the mapping table.
"""Lesson 8 (going further): the course's model runs real checkpoints, both ways.

``from_huggingface(model)`` builds a :class:`~helpers.TransformerLM` that computes what a Hugging
Face ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` computes (or what the zoo's GPT computes,
:class:`helpers.zoo.gpt.GPT`, GPT-2's layout in ``nn.Linear`` orientation);
``to_huggingface(model)`` goes the other way for the configurations both can express, so a course
model can use Hugging Face's generation and evaluation tools. Anything the other side cannot
express is refused by name (a ``ValueError`` naming the feature), never approximated.

GPT-2 (Radford et al. 2019), a Conv1D stores its weight as ``[in, out]`` (``y = x W + b``), the
transpose of ``nn.Linear``'s ``[out, in]``::

    transformer.wte.weight            [V, d]      -> token_embedding.weight
    transformer.wpe.weight            [P, d]      -> position.table.weight  (positional="learned")
    h.l.ln_1.{weight,bias}                        -> blocks[l].attn.norm    (pre-norm LayerNorm)
    h.l.attn.c_attn.weight            [d, 3d]     -> .T, split in three along the rows:
                                                     q_proj, k_proj, v_proj.weight [d, d] each
    h.l.attn.c_attn.bias              [3d]        -> split in three: q, k, v biases
    h.l.attn.c_proj.{weight,bias}     [d, d]      -> .T -> out_proj
    h.l.ln_2.{weight,bias}                        -> blocks[l].ffn.norm
    h.l.mlp.c_fc.{weight,bias}        [d, d_ff]   -> .T -> feedforward.w1
    h.l.mlp.c_proj.{weight,bias}      [d_ff, d]   -> .T -> feedforward.w2
    transformer.ln_f.{weight,bias}                -> final_norm
    lm_head.weight                    [V, d]      -> lm_head.weight (tied: the embedding itself)

    activation "gelu_new" / "gelu_pytorch_tanh" -> "gelu_tanh", "gelu" -> "gelu", "relu" -> "relu";
    layer_norm_epsilon -> norm_eps; n_inner (None: 4 d) -> d_ff; n_positions -> max_len.

Llama (Touvron et al. 2023)::

    model.embed_tokens.weight                     -> token_embedding.weight
    layers.l.input_layernorm.weight               -> blocks[l].attn.norm.weight (RMSNorm, rms_norm_eps)
    layers.l.self_attn.{q,k}_proj.weight [d, d]   -> rows permuted per head (below) -> q_proj, k_proj
    layers.l.self_attn.{v,o}_proj.weight          -> v_proj, out_proj
    layers.l.post_attention_layernorm.weight      -> blocks[l].ffn.norm.weight
    layers.l.mlp.{gate,up,down}_proj.weight       -> feedforward.w1, w3, w2  (SwiGLU, d_hidden =
                                                     intermediate_size, silu(x W1) * (x W3))
    model.norm.weight                             -> final_norm.weight
    lm_head.weight                                -> lm_head.weight (tied or not: tie_word_embeddings)
    rope_parameters["rope_theta"]                 -> rotary_base; no biases unless attention_bias and
                                                     mlp_bias are both set (then bias=True)

Rotary's layouts. Hugging Face's Llama pairs column i of a head with column i + d/2 (its
``rotate_half``); the course (RoFormer eq. 34, Meta's code) pairs columns 2i and 2i + 1, with the
same angle p * base^(-2i/d) for pair i. Both turn by +p theta_i. So the course's column 2i is
Hugging Face's column i and the course's column 2i + 1 is its column i + d/2: W_Q's and W_K's rows
(and biases) are permuted per head by ``[0, d/2, 1, d/2 + 1, ...]`` (:func:`half_split_to_interleaved`).
The scores q.k do not change when q and k get the same permutation, and V is not turned, so
attention's output is the same.

Refused by name: grouped-query attention (num_key_value_heads != num_attention_heads), a head_dim
other than d / n_heads, rope scaling (a rope_type other than "default"), sliding windows,
attention_bias != mlp_bias, activations other than the ones above, GPT-2's
scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, scale_attn_weights=False and cross
attention; on the way out, whatever the target family has no setting for (sinusoidal or ALiBi
position, post-norm, scaled embeddings, ...).

:mod:`helpers.compare` runs both models on the same tokens and says, layer by layer, where they
part. transformers is optional (the course's environment does not install it); it is imported
only when a Hugging Face model is converted or built, and nothing here downloads.
"""

from __future__ import annotations

import torch
from torch import nn

from . import _validate as check
from .model import LMConfig, TransformerLM

__all__ = [
    "from_huggingface",
    "to_huggingface",
    "half_split_to_interleaved",
]

#: GPT-2's activation names (Hugging Face's ACT2FN keys) the course computes exactly.
_GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
_TO_GPT2_ACTIVATION = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
#: LMConfig's sizes under GPT-2's and Llama's configuration names (read one way, written the other)
_GPT2_SIZES = {"vocab_size": "vocab_size", "d_model": "n_embd", "n_layers": "n_layer",
               "n_heads": "n_head", "max_len": "n_positions"}  # fmt: skip
_LLAMA_SIZES = {"vocab_size": "vocab_size", "d_model": "hidden_size",
                "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                "max_len": "max_position_embeddings"}  # fmt: skip


#: The course's options that make a GPT-2 and a Llama (the rest comes from their configurations)
_GPT2_OPTIONS = dict(positional="learned", norm_type="layer")
_LLAMA_OPTIONS = dict(positional="rotary", activation="swiglu", norm_type="rms")


def _sizes(config, names: dict) -> dict:
    """LMConfig's sizes read from a foreign ``config`` whose names ``names`` gives."""
    return {ours: getattr(config, theirs) for ours, theirs in names.items()}


def _transformers():
    """The transformers package, or a clear error if it is not installed. Nothing here downloads:
    models are built from configurations or read from the model given (only
    :func:`pretrained_gpt2`, which the student calls on purpose, reaches the hub)."""
    from .zoo.huggingface import TRANSFORMERS_PIN, transformers_available

    if not transformers_available():
        raise ModuleNotFoundError(
            "transformers is not installed, so no Hugging Face model can be built or read here; "
            f"it is optional for the course: `python -m pip install {TRANSFORMERS_PIN}` adds it"
        )
    import transformers

    return transformers


def half_split_to_interleaved(d_head: int) -> torch.Tensor:
    """Lesson 8 (rotary's two layouts). The index ``perm`` with ``course[..., j] = hf[..., perm[j]]``
    within one head: ``[0, d/2, 1, d/2 + 1, ..., d/2 - 1, d - 1]``.

    Hugging Face's Llama pairs columns (i, i + d/2), the course (RoFormer eq. 34) pairs (2i, 2i + 1)
    with the same angle for pair i; ``argsort(perm)`` maps back.
    """
    d_head = check.positive_int("d_head", d_head)
    if d_head % 2:
        raise ValueError(
            f"d_head must be even for rotary position (pairs of columns), got {d_head}"
        )
    half = d_head // 2
    return torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).reshape(-1)  # [d]


def _permute_heads(w: torch.Tensor, n_heads: int, perm: torch.Tensor) -> torch.Tensor:
    """Rows of ``w`` [n_heads * d_head, ...] (or a bias [n_heads * d_head]) permuted within each head."""
    d_head = perm.numel()
    return w.reshape(n_heads, d_head, *w.shape[1:])[:, perm].reshape(w.shape)


def _build(settings: dict) -> TransformerLM:
    """A TransformerLM of ``settings`` (:class:`~helpers.model.LMConfig`'s fields), its weights
    uninitialized: every one is copied in afterwards."""
    config = LMConfig(**settings, norm="pre", scale_embeddings=False, init="torch")
    with torch.device("meta"):  # shapes only: nothing is drawn
        model = TransformerLM.from_config(config)
    model = model.to_empty(device="cpu")
    if config.tie_weights:  # to_empty gives each module a new Parameter: tie again
        model.lm_head.weight = model.token_embedding.weight
    return model.eval()


def _refuse(feature: str, why: str):
    raise ValueError(f"cannot convert: {feature} ({why}); the course's model would compute "
                     "something else, and a conversion never approximates")  # fmt: skip


def _copy(target: torch.Tensor, source: torch.Tensor, name: str) -> None:
    if tuple(target.shape) != tuple(source.shape):
        raise ValueError(
            f"{name}: the checkpoint has shape {list(source.shape)}, the model {list(target.shape)}"
        )
    with torch.no_grad():
        target.copy_(source)


def _gpt2_layout_into(model: TransformerLM, state: dict, conv1d: bool) -> TransformerLM:
    """Copy a state dict in GPT-2's names into ``model``; ``conv1d``: weights stored [in, out]."""

    def w(key):  # a weight in nn.Linear's [out, in]
        return state[key].t() if conv1d else state[key]

    d = model.config.d_model
    _copy(model.token_embedding.weight, state["transformer.wte.weight"], "wte")
    _copy(model.position.table.weight, state["transformer.wpe.weight"], "wpe")
    for i, block in enumerate(model.blocks):
        p = f"transformer.h.{i}."
        mha, ffn = block.attention, block.feedforward
        for norm, name in ((block.attn.norm, "ln_1"), (block.ffn.norm, "ln_2")):
            _copy(norm.weight, state[p + name + ".weight"], p + name)
            bias = state.get(p + name + ".bias")
            _copy(norm.bias, torch.zeros(d) if bias is None else bias, p + name)
        qkv = w(p + "attn.c_attn.weight")  # [3d, d]
        for proj, part in zip(
            (mha.q_proj, mha.k_proj, mha.v_proj), qkv.split(d, dim=0), strict=True
        ):
            _copy(proj.weight, part, p + "attn.c_attn")
        pairs = [(mha.out_proj, "attn.c_proj"), (ffn.w1, "mlp.c_fc"), (ffn.w2, "mlp.c_proj")]
        for linear, name in pairs:
            _copy(linear.weight, w(p + name + ".weight"), p + name)
        if mha.q_proj.bias is not None:
            b = state[p + "attn.c_attn.bias"].split(d)
            for proj, part in zip((mha.q_proj, mha.k_proj, mha.v_proj), b, strict=True):
                _copy(proj.bias, part, p + "attn.c_attn.bias")
            for linear, name in pairs:
                _copy(linear.bias, state[p + name + ".bias"], p + name + ".bias")
    _copy(model.final_norm.weight, state["transformer.ln_f.weight"], "ln_f")
    bias = state.get("transformer.ln_f.bias")
    _copy(model.final_norm.bias, torch.zeros(d) if bias is None else bias, "ln_f")
    if not model.tied:
        _copy(model.lm_head.weight, state["lm_head.weight"], "lm_head")
    return model


def _from_hf_gpt2(hf) -> TransformerLM:
    c = hf.config
    for flag, why in (
        ("scale_attn_by_inverse_layer_idx", "scores divided by the layer's index as well"),
        ("reorder_and_upcast_attn", "attention computed in another order and precision"),
        ("add_cross_attention", "cross-attention to an encoder"),
    ):
        if getattr(c, flag, False):
            _refuse(f"GPT-2's {flag}=True", why)
    if not getattr(c, "scale_attn_weights", True):
        _refuse("GPT-2's scale_attn_weights=False", "scores not divided by sqrt(d_head)")
    if c.activation_function not in _GPT2_ACTIVATIONS:
        _refuse(
            f"activation_function={c.activation_function!r}",
            f"the course computes {sorted(_GPT2_ACTIVATIONS)}",
        )
    tied = hf.lm_head.weight is hf.transformer.wte.weight
    model = _build(
        dict(
            **_sizes(c, _GPT2_SIZES),
            d_ff=c.n_inner or 4 * c.n_embd,
            **_GPT2_OPTIONS,
            activation=_GPT2_ACTIVATIONS[c.activation_function],
            tie_weights=tied,
            bias=True,
            norm_eps=float(c.layer_norm_epsilon),
        )
    )
    return _gpt2_layout_into(model, hf.state_dict(), conv1d=True)


def _from_zoo_gpt(gpt) -> TransformerLM:
    c = gpt.config
    ln = gpt.transformer.ln_f
    model = _build(
        dict(
            **_sizes(c, {**_GPT2_SIZES, "max_len": "block_size"}),
            d_ff=4 * c.n_embd,
            **_GPT2_OPTIONS,
            activation="gelu_tanh",
            tie_weights=gpt.lm_head.weight is gpt.transformer.wte.weight,
            bias=bool(c.bias),
            norm_eps=float(ln.eps),
        )
    )
    return _gpt2_layout_into(model, gpt.state_dict(), conv1d=False)


def _rope_theta(c) -> float:
    rope = getattr(c, "rope_parameters", None) or {}
    kind = rope.get("rope_type", "default")
    if kind != "default":
        _refuse(f"rope scaling (rope_type={kind!r})", "the course's rotary has no scaling")
    return float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)))


def _llama_names(model: TransformerLM) -> list[tuple[torch.Tensor, str, bool]]:
    """(the course's tensor, its name in Hugging Face's Llama, rows permuted per head?) for every
    weight of ``model`` (the output matrix only when it is not tied)."""
    out = [(model.token_embedding.weight, "model.embed_tokens.weight", False)]
    for i, block in enumerate(model.blocks):
        p = f"model.layers.{i}."
        mha, ffn = block.attention, block.feedforward
        linears = [
            (mha.q_proj, "self_attn.q_proj", True),
            (mha.k_proj, "self_attn.k_proj", True),
            (mha.v_proj, "self_attn.v_proj", False),
            (mha.out_proj, "self_attn.o_proj", False),
            (ffn.w1, "mlp.gate_proj", False),
            (ffn.w3, "mlp.up_proj", False),
            (ffn.w2, "mlp.down_proj", False),
        ]
        for linear, name, turned in linears:
            for attr in ("weight", "bias"):
                if getattr(linear, attr) is not None:
                    out.append((getattr(linear, attr), f"{p}{name}.{attr}", turned))
        out.append((block.attn.norm.weight, p + "input_layernorm.weight", False))
        out.append((block.ffn.norm.weight, p + "post_attention_layernorm.weight", False))
    out.append((model.final_norm.weight, "model.norm.weight", False))
    if not model.tied:
        out.append((model.lm_head.weight, "lm_head.weight", False))
    return out


def _from_hf_llama(hf) -> TransformerLM:
    c = hf.config
    d, heads = c.hidden_size, c.num_attention_heads
    kv = getattr(c, "num_key_value_heads", None) or heads
    if kv != heads:
        _refuse(
            f"grouped-query attention (num_key_value_heads={kv} != num_attention_heads={heads})",
            "every course head has its own keys and values",
        )
    if getattr(c, "head_dim", None) not in (None, d // heads) or d % heads:
        _refuse(f"head_dim={c.head_dim} with hidden_size={d}, {heads} heads", "d_head = d / heads")
    if getattr(c, "sliding_window", None):
        _refuse(f"a sliding window ({c.sliding_window})", "the course attends to every past token")
    if c.hidden_act != "silu":
        _refuse(f"hidden_act={c.hidden_act!r}", "the course's SwiGLU gates with silu")
    if bool(c.attention_bias) != bool(getattr(c, "mlp_bias", False)):
        _refuse(
            f"attention_bias={c.attention_bias} with mlp_bias={c.mlp_bias}",
            "the course's bias option holds for every Linear of a block",
        )
    if getattr(c, "pretraining_tp", 1) not in (None, 1):
        _refuse(f"pretraining_tp={c.pretraining_tp}", "sliced matmuls")
    base = _rope_theta(c)
    model = _build(
        dict(
            **_sizes(c, _LLAMA_SIZES),
            d_ff=c.intermediate_size,
            **_LLAMA_OPTIONS,
            tie_weights=hf.lm_head.weight is hf.model.embed_tokens.weight,
            bias=bool(c.attention_bias),
            norm_eps=float(c.rms_norm_eps),
            rotary_base=base,
            d_hidden=c.intermediate_size,
        )
    )
    perm = half_split_to_interleaved(d // heads)
    state = hf.state_dict()
    for ours, key, turned in _llama_names(model):
        _copy(ours, _permute_heads(state[key], heads, perm) if turned else state[key], key)
    return model


def from_huggingface(model: nn.Module) -> TransformerLM:
    """Lesson 8 (going further). A :class:`~helpers.TransformerLM` computing what ``model``
    computes: a Hugging Face ``GPT2LMHeadModel`` or ``LlamaForCausalLM``, or the zoo's GPT
    (:class:`helpers.zoo.gpt.GPT`). The mapping of every weight is the module's table; what the
    course's model cannot express is refused by name (``ValueError``). Returned in eval mode,
    float32, on the CPU; the weights are copies."""
    from .zoo.gpt import GPT

    if isinstance(model, GPT):
        return _from_zoo_gpt(model)
    name = type(model).__name__
    if name not in ("GPT2LMHeadModel", "LlamaForCausalLM"):
        raise TypeError(
            "model must be a Hugging Face GPT2LMHeadModel or LlamaForCausalLM, or "
            f"helpers.zoo.gpt.GPT; got {name} (no converter for that family)"
        )
    _transformers()
    return _from_hf_gpt2(model) if name == "GPT2LMHeadModel" else _from_hf_llama(model)


def _settings(model: TransformerLM) -> dict:
    """The conversion options of a course model (its block options, read off its modules)."""
    block = model.blocks[0]
    mha, ffn = block.attention, block.feedforward
    return dict(
        bias=mha.q_proj.bias is not None,
        norm_eps=float(block.attn.norm.eps) if hasattr(block.attn.norm, "eps") else None,
        rotary_base=float(mha.rotary_base),
        d_hidden=ffn.d_hidden,
    )


def to_huggingface(model: TransformerLM) -> nn.Module:
    """Lesson 8 (going further). The Hugging Face model computing what the course's ``model``
    computes: a ``GPT2LMHeadModel`` for learned positions + pre-norm LayerNorm + a GELU or ReLU
    feed-forward with biases, a ``LlamaForCausalLM`` for rotary + pre-norm RMSNorm + SwiGLU; the
    inverse of :func:`from_huggingface` (same table). Anything else is refused by name. Needs
    transformers; returned in eval mode, its weights copies."""
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a helpers.TransformerLM, got {type(model).__name__}")
    c, s = model.config, _settings(model)
    if c.norm != "pre":
        _refuse(f"norm={c.norm!r}", "GPT-2 and Llama normalize before each sublayer (pre-norm)")
    if model.scale_embeddings:
        _refuse("scale_embeddings=True", "neither family multiplies its embeddings by sqrt(d)")
    if c.positional == "learned" and c.norm_type == "layer":
        if c.activation not in _TO_GPT2_ACTIVATION:
            _refuse(f"activation={c.activation!r} in GPT-2", "GPT-2's MLP has two matrices")
        if not s["bias"]:
            _refuse("bias=False in GPT-2", "GPT-2's Conv1D layers all have biases")
        fields, state = _to_hf_gpt2(model, s)
        return _load_into(_new_hf(model, "gpt2", **fields), state)
    if c.positional == "rotary" and c.norm_type == "rms":
        if c.activation != "swiglu":
            _refuse(f"activation={c.activation!r} in Llama", "Llama's MLP is SwiGLU")
        fields, state = _to_hf_llama(model, s)
        return _load_into(_new_hf(model, "llama", **fields), state)
    _refuse(
        f"positional={c.positional!r} with norm_type={c.norm_type!r}",
        "GPT-2 is learned + layer, Llama rotary + rms; no other pair has a Hugging Face twin here",
    )


def _new_hf(model: TransformerLM, family: str, **fields) -> nn.Module:
    """An untrained Hugging Face model of ``family`` with ``model``'s sizes and tying."""
    T = _transformers()
    config_class, model_class = {
        "gpt2": (T.GPT2Config, T.GPT2LMHeadModel),
        "llama": (T.LlamaConfig, T.LlamaForCausalLM),
    }[family]
    names = _GPT2_SIZES if family == "gpt2" else _LLAMA_SIZES
    sizes = {theirs: getattr(model.config, ours) for ours, theirs in names.items()}
    config = config_class(**sizes, tie_word_embeddings=model.tied, bos_token_id=0, eos_token_id=0,
                          **fields)  # fmt: skip
    return model_class(config).eval()


def _to_hf_gpt2(model: TransformerLM, s: dict) -> tuple[dict, dict]:
    """GPT2Config's fields for ``model`` and its weights under GPT-2's names (Conv1D: [in, out])."""
    c = model.config
    fields = dict(
        n_inner=model.blocks[0].feedforward.d_hidden,
        activation_function=_TO_GPT2_ACTIVATION[c.activation],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=s["norm_eps"],
    )
    state = {}
    state["transformer.wte.weight"] = model.token_embedding.weight
    state["transformer.wpe.weight"] = model.position.table.weight
    for i, block in enumerate(model.blocks):
        p = f"transformer.h.{i}."
        mha, ffn = block.attention, block.feedforward
        state[p + "ln_1.weight"], state[p + "ln_1.bias"] = (
            block.attn.norm.weight,
            block.attn.norm.bias,
        )
        state[p + "ln_2.weight"], state[p + "ln_2.bias"] = (
            block.ffn.norm.weight,
            block.ffn.norm.bias,
        )
        qkv = (mha.q_proj, mha.k_proj, mha.v_proj)
        state[p + "attn.c_attn.weight"] = torch.cat([m.weight for m in qkv]).t()  # [d, 3d]
        state[p + "attn.c_attn.bias"] = torch.cat([m.bias for m in qkv])
        for linear, name in (
            (mha.out_proj, "attn.c_proj"),
            (ffn.w1, "mlp.c_fc"),
            (ffn.w2, "mlp.c_proj"),
        ):
            state[p + name + ".weight"] = linear.weight.t()  # Conv1D: [in, out]
            state[p + name + ".bias"] = linear.bias
    state["transformer.ln_f.weight"] = model.final_norm.weight
    state["transformer.ln_f.bias"] = model.final_norm.bias
    state["lm_head.weight"] = model.lm_head.weight
    return fields, state


def _to_hf_llama(model: TransformerLM, s: dict) -> tuple[dict, dict]:
    """LlamaConfig's fields for ``model`` and its weights under Llama's names (half-split rotary)."""
    c = model.config
    fields = dict(
        num_key_value_heads=c.n_heads,
        intermediate_size=s["d_hidden"],
        rms_norm_eps=s["norm_eps"],
        rope_parameters={"rope_type": "default", "rope_theta": s["rotary_base"]},
        attention_bias=s["bias"],
        mlp_bias=s["bias"],
    )
    back = torch.argsort(half_split_to_interleaved(c.d_model // c.n_heads))  # interleaved -> half
    state = {
        key: _permute_heads(ours, c.n_heads, back) if turned else ours
        for ours, key, turned in _llama_names(model)
    }
    state["lm_head.weight"] = model.lm_head.weight  # listed by Hugging Face even when tied
    return fields, state


def _load_into(hf: nn.Module, state: dict) -> nn.Module:
    own = hf.state_dict()
    missing = sorted(set(own) - set(state))
    if missing:
        raise ValueError(f"cannot convert: no course weight for {missing[:4]}")
    with torch.no_grad():
        for key, value in state.items():
            own[key].copy_(value.detach())
    return hf
