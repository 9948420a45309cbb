"""Lesson 6 explorer: the feed-forward block's shapes, parameter counts and activation.

Controls: ``d_model``, the ``d_ff`` multiple (d_ff = multiple x d_model) and the activation.
Panels (updated in place): the expand-then-contract shape diagram, the parameters per piece
(W1, W3, W2, biases) and the activation curve. No model is built: shapes come from
``d_ff`` and ``swiglu_hidden``, counts from ``ffn_parameter_count`` (whose formula the tests check
against ``count_parameters(FeedForward(...))``), so an update costs only the redraw.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from .. import _validate as check
from ..feedforward import ffn_parameter_count, swiglu_hidden
from ..plots import PALETTE
from ..plots.feedforward import ACTIVATION_CURVES, plot_shape_diagram, update_shape_diagram
from ._base import Explorer, dropdown, slider

__all__ = ["feedforward_explorer", "ffn_pieces"]

# The curve drawn for each activation of the block; SwiGLU's nonlinearity is its silu gate.
_CURVE_OF = {"relu": "relu", "gelu": "gelu", "swiglu": "silu"}
_X = torch.linspace(-4.0, 4.0, 161, dtype=torch.float64)  # [161]
_Y = {name: fn(_X).numpy() for name, (fn, _) in ACTIVATION_CURVES.items()}  # name -> [161]


def ffn_pieces(d_model: int, d_ff: int, activation: str) -> dict[str, int]:
    """Lesson 6. Parameters of each piece of ``FeedForward(d_model, d_ff, activation)``:
    ``{"W1": d_model h, "W3": d_model h or 0, "W2": h d_model, "biases": ..., "total": ...}``
    with h = d_ff (ReLU, GELU) or ``swiglu_hidden(d_ff)`` (SwiGLU)."""
    h = swiglu_hidden(d_ff) if activation == "swiglu" else d_ff
    gated = activation == "swiglu"
    pieces = {
        "W1": d_model * h,
        "W3": d_model * h if gated else 0,
        "W2": h * d_model,
        "biases": (2 * h if gated else h) + d_model,
    }
    pieces["total"] = ffn_parameter_count(d_model, d_ff, activation)
    assert pieces["total"] == sum(v for k, v in pieces.items() if k != "total")
    return pieces


def feedforward_explorer(
    d_model: int = 512, multiple: int = 4, activation: str = "relu"
) -> Explorer:
    """Lesson 6. Drag d_model and the d_ff multiple, pick the activation: watch the hidden width,
    the parameter count (compared with the ReLU block at d_ff = 4 d_model) and the curve."""
    check.positive_int("d_model", d_model, minimum=16)
    check.positive_int("multiple", multiple)
    check.choice("activation", activation, tuple(_CURVE_OF))  # lesson 6's three
    if d_model > 1024 or multiple > 8:
        raise ValueError(f"d_model must be <= 1024 and multiple <= 8, got {d_model} and {multiple}")
    # A fixed layout (no layout engine): constrained layout would be recomputed on every redraw.
    fig = Figure(figsize=(9.0, 2.6))
    fig.subplots_adjust(left=0.03, right=0.98, bottom=0.1, top=0.88, wspace=0.25)
    ax_shape, ax_params, ax_curve = fig.subplots(1, 3)

    shapes = plot_shape_diagram(
        [(1, 8), (1, 32), (1, 8)], names=["x", "hidden", "out"], ax=ax_shape
    )
    ax_shape.set_title("one position: [n, width]", fontsize=9)
    ax_shape.set_ylabel("")

    names = ["W1", "W3", "W2", "biases"]
    param_bars = list(
        ax_params.bar(names, [1, 1, 1, 1], color=[PALETTE[0], PALETTE[3], PALETTE[1], "#999999"])
    )
    ref_line = ax_params.axhline(0, color="k", ls=":", lw=1)
    ax_params.tick_params(labelsize=8)
    param_title = ax_params.set_title("", fontsize=9)

    for name in ("relu", "gelu", "silu"):
        ax_curve.plot(_X.numpy(), _Y[name], color="0.85", lw=1)
    (curve,) = ax_curve.plot(_X.numpy(), _Y["relu"], color=PALETTE[4], lw=2.5)
    ax_curve.set_ylim(-1.0, 4.2)
    ax_curve.tick_params(labelsize=8)
    curve_title = ax_curve.set_title("", fontsize=9)

    def update(d_model: int, multiple: int, activation: str) -> str:
        d_ff = multiple * d_model
        d_hidden = swiglu_hidden(d_ff) if activation == "swiglu" else d_ff
        hidden_name = "silu(xW1)*(xW3)" if activation == "swiglu" else "hidden"
        plot_names = ["x", hidden_name, "out"]
        update_shape_diagram(shapes, [("n", d_model), ("n", d_hidden), ("n", d_model)], plot_names)
        pieces = ffn_pieces(d_model, d_ff, activation)
        reference = ffn_parameter_count(d_model, 4 * d_model, "relu")
        for bar, name in zip(param_bars, names, strict=True):
            bar.set_height(pieces[name])
        ref_line.set_ydata([reference / 3] * 2)
        ax_params.set_ylim(0, 1.15 * max(max(pieces[n] for n in names), reference / 3))
        param_title.set_text(f"total {pieces['total']:,}")
        curve.set_ydata(_Y[_CURVE_OF[activation]])
        curve_title.set_text(
            f"{activation}: curve of {_CURVE_OF[activation]}"
            if activation == "swiglu"
            else activation
        )
        ratio = pieces["total"] / reference
        return (
            f"<code>[n, {d_model}] → [n, {d_hidden}] → [n, {d_model}]</code>; "
            f"d_ff = {multiple} × {d_model} = {d_ff}"
            + (
                f", SwiGLU hidden width round(2/3 · {d_ff}) = {d_hidden}"
                if activation == "swiglu"
                else ""
            )
            + f"<br>parameters: {pieces['total']:,} = {ratio:.4f} × the ReLU block with d_ff = 4·d_model"
            f" ({reference:,}); dotted line: a third of that (each SwiGLU matrix at multiple 4)"
        )

    controls = {
        "d_model": slider("d_model", d_model, 16, 1024, 16),
        "multiple": slider("d_ff multiple", multiple, 1, 8),
        "activation": dropdown("activation", list(_CURVE_OF), activation),
    }

    def describe(d_model: int, multiple: int, activation: str) -> str:
        d_ff = multiple * d_model
        d_hidden = swiglu_hidden(d_ff) if activation == "swiglu" else d_ff
        pieces = ffn_pieces(d_model, d_ff, activation)
        used = [n for n in names if pieces[n]]
        return (
            f"Three panels: one position's vector expanding from {d_model} to {d_hidden} and "
            f"contracting back to {d_model}; bars of the parameters of "
            f"{', '.join(used[:-1])} and {used[-1]}, {pieces['total']:,} in total (dotted line: "
            f"a third of the ReLU block at d_ff = 4·d_model); and the {_CURVE_OF[activation]} "
            "curve, thick and vermillion, over the other activations in light grey."
        )

    return Explorer("Lesson 6: the feed-forward block", controls, fig, update, describe=describe)
