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
from .attention import ATTENTION_POSITIONAL, MultiHeadAttention
from .feedforward import FeedForward
from .normalization import NORM_TYPES, Residual

__all__ = [
    "TransformerBlock",
    "make_stack",
    "make_shared_stack",
    "run_stack",
    "shared_tensors",
    "stream_statistics",
    "copy_from_torch_encoder_layer",
]


class TransformerBlock(nn.Module):
    """Lesson 7. ``x -> Residual(MHA) -> Residual(FFN)``; [batch, n, d_model] in and out.

    ``norm`` is "pre", "post" or "none" (residuals without layer norm), ``activation`` that of the
    feed-forward block, ``d_ff`` defaults to 4 * d_model. ``norm_type`` is "layer" (LayerNorm,
    the default) or "rms" (RMSNorm, C5.8); ``positional`` is what the attention does with position
    itself: "none" (the default), "rotary" or "alibi" (C4.8, see :class:`MultiHeadAttention`).
    ``bias=False`` drops every Linear's bias (Llama). Lesson 8's converters also set
    ``rotary_base`` (rotary's base, 10000 by default), ``norm_eps`` (None: the norm's default)
    and ``d_hidden`` (SwiGLU's explicit hidden width, see :class:`FeedForward`).
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
        *,
        norm_type: str = "layer",
        positional: str = "none",
        rotary_base: float = 10000.0,
        norm_eps: float | None = None,
        d_hidden: int | None = None,
    ):
        super().__init__()
        self.d_model = check.positive_int("d_model", d_model)
        check.choice("norm_type", norm_type, NORM_TYPES)  # before any weight is drawn
        check.choice("positional", positional, ATTENTION_POSITIONAL)
        mha = MultiHeadAttention(
            d_model, n_heads, causal, bias, positional=positional, rotary_base=rotary_base
        )
        self.attn = Residual(mha, d_model, norm, norm_type, norm_eps)
        ffn = FeedForward(d_model, d_ff, activation, bias, d_hidden=d_hidden)
        self.ffn = Residual(ffn, d_model, norm, norm_type, norm_eps)

    @property
    def norm_placement(self) -> str:
        return self.attn.norm_placement

    @property
    def norm_type(self) -> str:
        return self.attn.norm_type

    @property
    def positional(self) -> str:
        return self.attention.positional

    @property
    def attention(self) -> MultiHeadAttention:
        return self.attn.sublayer

    @property
    def feedforward(self) -> FeedForward:
        return self.ffn.sublayer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if check.checking():  # the block's entry; its layers run without re-checking, fused
            check.tensor("x", x, ndim=3, last_dim=self.d_model, layout="[batch, n, d_model]")
            check.floating_like("x", x, self.attention.q_proj.weight.dtype)
        with check.model_pass():
            x = self.attn(x)  # [B, n, d]: attention mixes positions, residual adds it to the stream
            x = self.ffn(x)  # [B, n, d]: the feed-forward reshapes each position on its own
        return x


def make_stack(n_layers: int, d_model: int, n_heads: int, **block_kwargs) -> nn.ModuleList:
    """Lesson 7 (C7.2). ``n_layers`` independent blocks (distinct parameter tensors each).

    ``count(stack) = n_layers * per_block``: each call of ``TransformerBlock(...)`` creates new
    parameter tensors. ``block_kwargs`` go to :class:`TransformerBlock` (d_ff, norm, ...).
    """
    n_layers = check.positive_int("n_layers", n_layers)
    return nn.ModuleList(
        TransformerBlock(d_model, n_heads, **block_kwargs) for _ in range(n_layers)
    )


def make_shared_stack(n_layers: int, d_model: int, n_heads: int, **block_kwargs) -> nn.ModuleList:
    """Lesson 7 (C7.2, the contrast). ONE block reused ``n_layers`` times: weight-shared depth.

    ``[block] * n_layers``: every entry is the same module, so the stack runs ``n_layers`` blocks
    of computation but holds only ``per_block`` parameters, whatever ``n_layers`` is (the
    Universal Transformer, Dehghani et al. 2019, and ALBERT, Lan et al. 2020, share this way on
    purpose). The course's model does not: this function exists to show the difference.
    """
    n_layers = check.positive_int("n_layers", n_layers)
    block = TransformerBlock(d_model, n_heads, **block_kwargs)
    return nn.ModuleList([block] * n_layers)


def _check_stack(stack) -> list[nn.Module]:
    if isinstance(stack, nn.Module) and not isinstance(stack, nn.ModuleList | nn.Sequential):
        raise TypeError(
            "stack must be a sequence of blocks (an nn.ModuleList, nn.Sequential or list), "
            f"got a single {type(stack).__name__}; wrap it: [block]"
        )
    try:
        blocks = list(stack)
    except TypeError:
        raise TypeError(
            f"stack must be a sequence of blocks (an nn.ModuleList or list), got {type(stack).__name__}"
        ) from None
    if not blocks:
        raise ValueError("stack must hold at least one block (depth >= 1), got an empty stack")
    for i, b in enumerate(blocks):
        if not isinstance(b, nn.Module):
            raise TypeError(f"stack[{i}] must be a torch.nn.Module, got {type(b).__name__}")
    return blocks


def run_stack(stack, x: torch.Tensor, return_hidden: bool = False):
    """Lesson 7 (C7.1, C7.3). Apply the blocks in order: ``h_l = block_l(h_{l-1})``, ``h_0 = x``.

    x: [batch, n, d_model] -> [batch, n, d_model]. With ``return_hidden=True`` returns
    ``(h_L, [h_0, h_1, ..., h_L])``, the residual stream after every block.
    """
    blocks = _check_stack(stack)
    d_model = getattr(blocks[0], "d_model", None)
    check.tensor("x", x, ndim=3, last_dim=d_model, layout="[batch, n, d_model]")
    hidden = [x]
    for i, block in enumerate(blocks):
        h = block(hidden[-1])  # [B, n, d_model] -> [B, n, d_model]
        if h.shape != x.shape:
            raise ValueError(
                f"block {i} changed the shape from {list(x.shape)} to {list(h.shape)}: "
                "a block must map [batch, n, d_model] to the same shape to stack"
            )
        hidden.append(h)
    return (hidden[-1], hidden) if return_hidden else hidden[-1]


def shared_tensors(stack) -> list[tuple[int, str, int, str]]:
    """Lesson 7 (C7.2). Every pair of blocks that share a parameter tensor.

    Returns ``(i, name_i, j, name_j)`` for each parameter of block ``j`` that is the same tensor
    (the same Parameter object, or the same memory: equal ``data_ptr()``) as a parameter of an
    earlier block ``i < j``. Empty list: every block owns its parameters.
    """
    blocks = _check_stack(stack)
    owner: dict[object, tuple[int, str]] = {}
    shared = []
    for j, block in enumerate(blocks):
        for name, p in block.named_parameters():
            keys = [("id", id(p))]
            if p.device.type != "meta" and p.numel():
                keys.append(("ptr", p.data_ptr()))
            found = next((owner[k] for k in keys if k in owner and owner[k][0] != j), None)
            if found is not None:
                shared.append((found[0], found[1], j, name))
            for k in keys:
                owner.setdefault(k, (j, name))
    return shared


def stream_statistics(hidden) -> tuple[torch.Tensor, torch.Tensor]:
    """Lesson 7 (C7.3). Sizes along the residual stream ``[h_0, ..., h_L]``.

    Returns ``(contribution, stream)``:

    * ``contribution[l-1] = mean over tokens of ||h_l - h_{l-1}||``, l = 1..L (shape [L]): the
      size of what block l added to the running vector;
    * ``stream[l] = mean over tokens of ||h_l||``, l = 0..L (shape [L+1]).

    ``||.||`` is the Euclidean norm of one token's d_model-vector; the mean is over batch and
    positions.
    """
    if not isinstance(hidden, list | tuple) or len(hidden) < 2:
        raise ValueError(
            "hidden must be the list [h_0, h_1, ..., h_L] of at least two [batch, n, d_model] "
            f"tensors, got {type(hidden).__name__}"
            + (f" of length {len(hidden)}" if isinstance(hidden, list | tuple) else "")
        )
    for i, h in enumerate(hidden):
        check.tensor(f"hidden[{i}]", h, ndim=3, layout="[batch, n, d_model]")
        if not h.is_floating_point():
            raise TypeError(
                f"hidden[{i}] must hold floating-point numbers (torch.float32), got dtype {h.dtype}"
            )
        if h.shape != hidden[0].shape:
            raise ValueError(
                f"hidden[{i}] has shape {list(h.shape)}, hidden[0] {list(hidden[0].shape)}: "
                "every state of the stream has the same shape"
            )
    with torch.no_grad():
        h = torch.stack([t.detach() for t in hidden])  # [L+1, B, n, d]
        stream = h.norm(dim=-1).mean(dim=(1, 2))  # [L+1]
        contribution = (h[1:] - h[:-1]).norm(dim=-1).mean(dim=(1, 2))  # [L]
    return contribution, stream


def copy_from_torch_encoder_layer(
    layer: nn.TransformerEncoderLayer, block: TransformerBlock
) -> TransformerBlock:
    """Lesson 7. Copy the weights of PyTorch's ``nn.TransformerEncoderLayer`` into ``block``.

    ``self_attn.in_proj_weight`` [3 d, d] is W_Q, W_K, W_V stacked: split in three into
    ``q_proj``, ``k_proj``, ``v_proj`` (likewise the bias); ``self_attn.out_proj`` -> ``out_proj``;
    ``linear1``/``linear2`` -> the feed-forward's ``w1``/``w2``; ``norm1``/``norm2`` -> the layer
    norms of the attention and feed-forward residuals. The two then compute the same function
    (with dropout 0 and ``layer.norm_first`` matching ``block``'s norm placement: True for
    "pre", False for "post"; build the layer with ``batch_first=True`` to feed both the same
    [batch, n, d_model] tensor, otherwise the layer reads [n, batch, d_model]). Returns ``block``.
    """
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise TypeError(
            f"layer must be a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}"
        )
    if not isinstance(block, TransformerBlock):
        raise TypeError(f"block must be a helpers.TransformerBlock, got {type(block).__name__}")
    mha, ffn = block.attention, block.feedforward
    sa = layer.self_attn
    d = block.d_model
    if sa.embed_dim != d:
        raise ValueError(f"d_model differs: layer has {sa.embed_dim}, block has {d}")
    if sa.num_heads != mha.n_heads:
        raise ValueError(f"n_heads differs: layer has {sa.num_heads}, block has {mha.n_heads}")
    if layer.linear1.out_features != ffn.d_hidden:
        raise ValueError(
            f"d_ff differs: layer has {layer.linear1.out_features}, block has {ffn.d_hidden}"
        )
    if ffn.activation != "relu" or getattr(layer, "activation_relu_or_gelu", 1) != 1:
        raise ValueError(
            "activation must be 'relu' on both sides (TransformerEncoderLayer's default), "
            f"block has {ffn.activation!r}"
        )
    placement = "pre" if layer.norm_first else "post"
    if block.norm_placement != placement:
        raise ValueError(
            f"norm placement differs: layer has norm_first={layer.norm_first} ({placement!r}), "
            f"block has norm={block.norm_placement!r}"
        )
    if mha.causal:
        raise ValueError("block is causal; TransformerEncoderLayer attends to every position")
    if block.norm_type != "layer":
        raise ValueError(
            f"block has norm_type={block.norm_type!r}; TransformerEncoderLayer uses LayerNorm "
            "(norm_type='layer')"
        )
    if mha.positional != "none":
        raise ValueError(
            f"block's attention has positional={mha.positional!r}; TransformerEncoderLayer has no "
            "position inside attention (positional='none')"
        )
    if sa.in_proj_weight is None or sa.in_proj_bias is None or mha.q_proj.bias is None:
        raise ValueError("both must have biases and one packed in_proj_weight (the defaults)")
    with torch.no_grad():
        w_q, w_k, w_v = sa.in_proj_weight.chunk(3, dim=0)  # 3 x [d, d]
        b_q, b_k, b_v = sa.in_proj_bias.chunk(3, dim=0)  # 3 x [d]
        pairs = [
            (mha.q_proj.weight, w_q),
            (mha.q_proj.bias, b_q),
            (mha.k_proj.weight, w_k),
            (mha.k_proj.bias, b_k),
            (mha.v_proj.weight, w_v),
            (mha.v_proj.bias, b_v),
            (mha.out_proj.weight, sa.out_proj.weight),
            (mha.out_proj.bias, sa.out_proj.bias),
            (ffn.w1.weight, layer.linear1.weight),  # [d_ff, d]
            (ffn.w1.bias, layer.linear1.bias),
            (ffn.w2.weight, layer.linear2.weight),  # [d, d_ff]
            (ffn.w2.bias, layer.linear2.bias),
            (block.attn.norm.weight, layer.norm1.weight),
            (block.attn.norm.bias, layer.norm1.bias),
            (block.ffn.norm.weight, layer.norm2.weight),
            (block.ffn.norm.bias, layer.norm2.bias),
        ]
        for ours, theirs in pairs:
            ours.copy_(theirs)
    block.attn.norm.eps = block.ffn.norm.eps = float(layer.norm1.eps)
    return block
