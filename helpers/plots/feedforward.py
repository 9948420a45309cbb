"""Lesson 6 pictures: the activation curves and the expand-then-contract shape diagram.

Each function draws on the ``ax`` it is given (or on a new pyplot figure when ``ax`` is None, for
a notebook cell) and returns its artists, so the explorer can update them in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .. import _validate as check
from ..feedforward import gelu, gelu_tanh, relu, silu
from ..figures import describe, listing
from ..printing import fmt
from ._common import PALETTE
from ._common import axes as _axes

__all__ = [
    "ACTIVATION_CURVES",
    "activation_curve",
    "plot_activations",
    "plot_shape_diagram",
    "update_shape_diagram",
]

#: name -> (function, line style) of every curve the lesson draws: each has its own line style,
#: so the curves are told apart without their colours.
ACTIVATION_CURVES = {
    "relu": (relu, dict(color=PALETTE[0], lw=2.0)),
    "gelu": (gelu, dict(color=PALETTE[1], lw=2.0, ls=(0, (6, 2)))),
    "gelu_tanh": (gelu_tanh, dict(color=PALETTE[2], lw=1.0, ls=(0, (1, 1.5)))),
    "silu": (silu, dict(color=PALETTE[3], lw=1.5, ls="-.")),
}
_STYLE_WORDS = {"relu": "solid", "gelu": "dashed", "gelu_tanh": "dotted", "silu": "dash-dot"}


def activation_curve(name: str, x: torch.Tensor) -> torch.Tensor:
    """Lesson 6. ``ACTIVATION_CURVES[name]`` evaluated at ``x`` ([m] -> [m])."""
    if name not in ACTIVATION_CURVES:
        allowed = ", ".join(repr(a) for a in ACTIVATION_CURVES)
        raise ValueError(f"name must be one of {allowed}; got {name!r}")
    return ACTIVATION_CURVES[name][0](x)


def plot_activations(
    names: Sequence[str] = ("relu", "gelu", "gelu_tanh", "silu"),
    x_range: tuple[float, float] = (-4.0, 4.0),
    n_points: int = 401,
    ax=None,
):
    """Lesson 6 (C6.1, C6.3). ReLU ``max(0,x)``, GELU ``x Phi(x)``, its tanh approximation and
    SiLU ``x sigmoid(x)`` on one axis. Returns ``{name: Line2D}``."""
    try:
        lo, hi = (float(v) for v in x_range)
    except (TypeError, ValueError):
        raise TypeError(f"x_range must be a pair of numbers (low, high), got {x_range!r}") from None
    if not lo < hi:
        raise ValueError(f"x_range must be (low, high) with low < high, got {x_range}")
    n_points = check.positive_int("n_points", n_points, minimum=2)
    if isinstance(names, str):
        names = (names,)
    ax = _axes(ax)
    x = torch.linspace(lo, hi, n_points, dtype=torch.float64)  # [n_points]
    lines = {}
    dips = []
    for name in names:
        y = activation_curve(name, x)  # [n_points]
        (lines[name],) = ax.plot(x.numpy(), y.numpy(), label=name, **ACTIVATION_CURVES[name][1])
        low = float(y.min())
        if low < -1e-3:
            dips.append(f"{name} to {fmt(low, 2)}")
    describe(
        ax,
        f"{listing(f'{n} ({_STYLE_WORDS[n]})' for n in names)} against input x from "
        f"{fmt(lo, 3)} to {fmt(hi, 3)}: "
        + (
            f"below 0 {'all' if len(names) > 1 else 'it'} stays near 0, above 0 near x"
            if lo < 0 < hi
            else "one curve per activation"
        )
        + (f"; just left of 0, {listing(dips)} dip below 0" if dips else "")
        + ".",
    )
    ax.axhline(0, color="0.8", lw=0.8, zorder=0)
    ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    ax.set_xlabel("input x")
    ax.set_ylabel("activation(x)")
    ax.legend(loc="upper left", fontsize="small")
    return lines


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def plot_shape_diagram(
    shapes: Sequence[Sequence[int]], names: Sequence[str] | None = None, ax=None
):
    """Lesson 6 (C6.2, K3). The expand-then-contract picture, drawn from real tensor shapes.

    ``shapes``: the shapes of x, the hidden layer and the output, e.g. ``[x.shape, h.shape,
    y.shape]`` = ``[[n, 512], [n, 2048], [n, 512]]``. Each tensor is a bar whose height is its last
    dimension (the width of one position's vector), labelled with the full shape.
    Returns ``{"bars": [Rectangle...], "labels": [Text...], "arrows": [Text...]}``.
    """
    if (
        isinstance(shapes, (str, bytes))
        or not hasattr(shapes, "__len__")
        or not all(hasattr(s, "__len__") and len(s) > 0 for s in shapes)
    ):
        raise TypeError(
            f"shapes must be a list of tensor shapes such as [(4, 512), (4, 2048), (4, 512)], "
            f"got {shapes!r}"
        )
    if len(shapes) < 2:
        raise ValueError(f"shapes must list at least two tensor shapes, got {len(shapes)}")
    names = list(names) if names is not None else ["x", "hidden", "FFN(x)"][: len(shapes)]
    if len(names) != len(shapes):
        raise ValueError(
            f"names must have one entry per shape: {len(shapes)} shapes, {len(names)} names"
        )
    ax = _axes(ax, (5.0, 3.0))
    widths = [int(s[-1]) for s in shapes]
    pos = list(range(len(shapes)))
    bars = ax.bar(
        pos,
        widths,
        bottom=[-w / 2 for w in widths],
        width=0.5,
        color=[PALETTE[0] if w == widths[0] else PALETTE[1] for w in widths],
    )
    labels = [
        ax.text(p, w / 2, f"{name}\n{_shape_text(s)}", ha="center", va="bottom", fontsize=9)
        for p, w, name, s in zip(pos, widths, names, shapes, strict=True)
    ]
    arrows = [ax.text(p + 0.5, 0, "", ha="center", va="top", fontsize=8) for p in pos[:-1]]
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlim(-0.5, len(shapes) - 0.5)
    ax.set_ylabel("bar height = width of one position's vector", fontsize=8)
    artists = {"bars": list(bars.patches), "labels": labels, "arrows": arrows}
    update_shape_diagram(artists, shapes, names, ax=ax)
    return artists


def update_shape_diagram(artists: dict, shapes, names=None, ax=None) -> None:
    """Lesson 6. Move the bars and labels of :func:`plot_shape_diagram` to new ``shapes`` in place."""
    widths = [int(s[-1]) for s in shapes]
    names = names or [t.get_text().split("\n")[0] for t in artists["labels"]]
    for rect, label, w, name, s in zip(
        artists["bars"], artists["labels"], widths, names, shapes, strict=True
    ):
        rect.set_height(w)
        rect.set_y(-w / 2)
        label.set_y(w / 2)
        label.set_text(f"{name}\n{_shape_text(s)}")
    top = max(widths) / 2
    for i, (arrow, a, b) in enumerate(zip(artists["arrows"], widths, widths[1:], strict=False)):
        verb = "expand" if b > a else "contract" if b < a else "keep"
        arrow.set_text(f"{verb}\nW{i + 1} [{a}, {b}]")
        arrow.set_y(-1.0 * top)
    ax = ax if ax is not None else artists["bars"][0].axes
    ax.set_ylim(-1.25 * top, 1.45 * top)
    steps = [
        f"{'expand' if b > a else 'contract' if b < a else 'keep'} {a} to {b}"
        for a, b in zip(widths, widths[1:], strict=False)
    ]
    describe(
        ax,
        f"{len(shapes)} bars whose heights are each tensor's last dimension, "
        f"{listing(f'{n} {_shape_text(s)}' for n, s in zip(names, shapes, strict=True))}: "
        f"{listing(steps)}.",
    )
