"""Lesson 6: the position-wise feed-forward block.

    FFN(x) = max(0, x W1 + b1) W2 + b2          (Vaswani et al. 2017, eq. 2)

Shapes: [n, d_model] -> [n, d_ff] -> [n, d_model], d_ff commonly 4 * d_model (512 -> 2048).
The same W1, W2 act on every position separately (C6.4). Later models replaced ReLU by GELU
(Hendrycks & Gimpel 2016; used by GPT-1 (Radford et al. 2018), BERT and GPT-2) and by SwiGLU
(Shazeer 2020; used by PaLM and Llama), which has three matrices::

    SwiGLU(x) = (silu(x W1 + b1) * (x W3 + b3)) W2 + b2

with the hidden width scaled by 2/3 so that three matrices cost what two did (C6.3).

Parameter counts, biases included (``ffn_parameter_count``)::

    ReLU / GELU:  2 d_model d_ff + d_ff + d_model
    SwiGLU:       3 d_model h + 2 h + d_model,     h = round(2/3 d_ff)

At d_model = 512, d_ff = 2048: ReLU 2,099,712; SwiGLU (h = 1365) 2,099,882, i.e. 170 more
(+0.008 %). The weights alone are 2,097,152 and 2,096,640 (512 fewer): 2/3 of 2048 is not a whole
number, so the match is close, never exact.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from . import _validate as check

__all__ = [
    "ACTIVATIONS",
    "relu",
    "gelu",
    "gelu_tanh",
    "silu",
    "swiglu_hidden",
    "ffn_parameter_count",
    "FeedForward",
    "trace_shapes",
]

#: "gelu_tanh" is GELU's tanh form, as GPT-2 computes it (Hugging Face's ``gelu_new``).
ACTIVATIONS = ("relu", "gelu", "swiglu", "gelu_tanh")


def relu(x: torch.Tensor) -> torch.Tensor:
    """Lesson 6. ``max(0, x)``."""
    check.tensor("x", x)
    return torch.clamp(x, min=0)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Lesson 6. Exact GELU: ``x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))`` (Hendrycks & Gimpel 2016)."""
    check.tensor("x", x)
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """Lesson 6. GELU's tanh approximation, as the code of GPT-1 and GPT-2 uses it:
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    check.tensor("x", x)
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def silu(x: torch.Tensor) -> torch.Tensor:
    """Lesson 6. ``x * sigmoid(x)`` (also called swish), the gate of SwiGLU."""
    check.tensor("x", x)
    return x * torch.sigmoid(x)


def swiglu_hidden(d_ff: int) -> int:
    """Lesson 6 (C6.3). SwiGLU's hidden width for a nominal d_ff: ``round(2 * d_ff / 3)``.

    Three d_model x hidden matrices then hold about as many weights as two d_model x d_ff ones.
    """
    return max(1, round(2 * check.positive_int("d_ff", d_ff) / 3))


def ffn_parameter_count(
    d_model: int,
    d_ff: int | None = None,
    activation: str = "relu",
    bias: bool = True,
    d_hidden: int | None = None,
) -> int:
    """Lesson 6 (C6.3). Parameters of ``FeedForward(d_model, d_ff, activation)``, from the formula.

    ReLU/GELU: W1 [d_model, d_ff] + b1 [d_ff] + W2 [d_ff, d_model] + b2 [d_model]
    = ``2 d_model d_ff + d_ff + d_model``.
    SwiGLU: W1, W3 [d_model, h] + b1, b3 [h] + W2 [h, d_model] + b2 [d_model]
    = ``3 d_model h + 2 h + d_model`` with ``h = swiglu_hidden(d_ff)``.
    Without biases (``bias=False``) only the matrix terms remain; ``d_hidden`` is SwiGLU's
    explicit hidden width (as :class:`FeedForward`). Nothing is built, so this is instant for any
    size; the tests check it against ``count_parameters(FeedForward(...))``.
    """
    d_model = check.positive_int("d_model", d_model)
    d_ff = 4 * d_model if d_ff is None else check.positive_int("d_ff", d_ff)
    check.choice("activation", activation, ACTIVATIONS)
    d_hidden = _explicit_hidden(d_hidden, activation)
    if activation == "swiglu":
        h = swiglu_hidden(d_ff) if d_hidden is None else d_hidden
        return 3 * d_model * h + (2 * h + d_model if bias else 0)
    return 2 * d_model * d_ff + (d_ff + d_model if bias else 0)


_ACT_FN = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}
#: The same activations as torch's fused kernels, used inside a model's pass (checks skipped).
_FUSED_FN = {
    "relu": lambda x: F.relu(x),
    "gelu": lambda x: F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def _explicit_hidden(d_hidden, activation: str) -> int | None:
    """SwiGLU's explicit hidden width, or None; refused for the two-matrix activations, whose
    hidden width is d_ff itself."""
    if d_hidden is None:
        return None
    if activation != "swiglu":
        raise ValueError(
            f"d_hidden sets SwiGLU's hidden width (Llama's intermediate_size); with "
            f"activation={activation!r} the hidden width is d_ff: give d_ff={d_hidden} instead"
        )
    return check.positive_int("d_hidden", d_hidden)


def _check_input(x, d_model: int, dtype: torch.dtype) -> None:
    """x must be a floating tensor [..., d_model] of the weights' dtype (a clear error, not torch's)."""
    check.tensor("x", x, last_dim=d_model, layout="[..., d_model]")  # also refuses a 0-d tensor
    check.floating_like("x", x, dtype)


class FeedForward(nn.Module):
    """Lesson 6 (C6.1-C6.4). The position-wise feed-forward block.

    ``activation="relu"``: ``max(0, x W1 + b1) W2 + b2`` (the paper).
    ``activation="gelu"``: ``gelu(x W1 + b1) W2 + b2`` (exact erf form).
    ``activation="gelu_tanh"``: the same with :func:`gelu_tanh`, GELU's tanh form (GPT-2's code).
    ``activation="swiglu"``: ``(silu(x W1 + b1) * (x W3 + b3)) W2 + b2`` with hidden width
    ``swiglu_hidden(d_ff)`` = round(2/3 * d_ff), or ``d_hidden`` when given (Llama's
    ``intermediate_size``, lesson 8's converters). ``bias=False``: no b1, b2, b3.

    ``d_ff`` defaults to 4 * d_model. ``self.d_hidden`` is the width actually used.
    Works on any [..., d_model] input: the last axis is transformed, every other axis is a
    position (or a batch) treated independently with the same weights.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        activation: str = "relu",
        bias: bool = True,
        *,
        d_hidden: int | None = None,
    ):
        super().__init__()
        self.d_model = check.positive_int("d_model", d_model)
        self.d_ff = 4 * self.d_model if d_ff is None else check.positive_int("d_ff", d_ff)
        self.activation = check.choice("activation", activation, ACTIVATIONS)
        explicit = _explicit_hidden(d_hidden, self.activation)
        self.d_hidden = (
            self.d_ff if activation != "swiglu" else explicit or swiglu_hidden(self.d_ff)
        )
        self.w1 = nn.Linear(self.d_model, self.d_hidden, bias=bias)  # expand: d_model -> d_hidden
        if activation == "swiglu":
            self.w3 = nn.Linear(self.d_model, self.d_hidden, bias=bias)  # the gated "up" branch
        self.w2 = nn.Linear(self.d_hidden, self.d_model, bias=bias)  # contract: d_hidden -> d_model

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """The activated hidden layer, [..., d_hidden]."""
        if not check.checking():  # inside a model's pass: checked at its entry, fused kernels
            if self.activation == "swiglu":
                return F.silu(self.w1(x)) * self.w3(x)  # [..., d_hidden]
            act = _FUSED_FN.get(self.activation) or _ACT_FN[self.activation]
            return act(self.w1(x))  # [..., d_hidden]
        _check_input(x, self.d_model, self.w1.weight.dtype)
        if self.activation == "swiglu":
            return silu(self.w1(x)) * self.w3(x)  # [..., d_hidden]
        return _ACT_FN[self.activation](self.w1(x))  # [..., d_hidden]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.hidden(x))  # [..., d_hidden] -> [..., d_model]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_ff={self.d_ff}, d_hidden={self.d_hidden}, activation={self.activation!r}"


def trace_shapes(ffn: FeedForward, x: torch.Tensor) -> list[dict]:
    """Lesson 6 (C6.2). Run ``x`` through ``ffn`` step by step and record the real shapes.

    Returns one row per step of the sheet's table, each a dict with ``step`` (the formula),
    ``shape_in`` (the operands, e.g. ``"[4, 512] x [512, 2048]"``), ``shape_out`` (a tuple) and
    ``tensor`` (the step's output)::

        x W1 + b1, nonlinearity   [n, d_model] x [d_model, d_ff]  ->  [n, d_ff]
        ... W2 + b2               [n, d_ff] x [d_ff, d_model]     ->  [n, d_model]

    For SwiGLU the first row is the gated product and d_ff is the real hidden width ``d_hidden``.
    The W shown is the math layout ``[in, out]``: ``nn.Linear`` stores its transpose.
    """
    if not isinstance(ffn, FeedForward):
        raise TypeError(f"ffn must be a helpers.FeedForward, got {type(ffn).__name__}")
    _check_input(x, ffn.d_model, ffn.w1.weight.dtype)

    def fmt(shape) -> str:
        return "[" + ", ".join(str(s) for s in shape) + "]"

    w1 = tuple(ffn.w1.weight.T.shape)  # [d_model, d_hidden]
    w2 = tuple(ffn.w2.weight.T.shape)  # [d_hidden, d_model]
    with torch.no_grad():
        h = ffn.hidden(x)  # [..., d_hidden]
        y = ffn.w2(h)  # [..., d_model]
    first = "x W1 + b1, " + (
        "silu(.) * (x W3 + b3)" if ffn.activation == "swiglu" else ffn.activation
    )
    return [
        {
            "step": first,
            "shape_in": f"{fmt(x.shape)} x {fmt(w1)}",
            "shape_out": tuple(h.shape),
            "tensor": h,
        },
        {
            "step": "... W2 + b2",
            "shape_in": f"{fmt(h.shape)} x {fmt(w2)}",
            "shape_out": tuple(y.shape),
            "tensor": y,
        },
    ]
