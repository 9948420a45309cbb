"""Lesson 5 explorer: where the layer norm sits, and what it does to gradients and activations.

Controls: ``placement`` (pre / post / none), ``norm_type`` (layer norm or RMSNorm, C5.8),
``depth`` (number of blocks) and ``d_model``.
Panels: the per-layer gradient norm ``||dL/dW2_l||`` at initialization (log scale) and the
activation scale ``sqrt(mean(h_l^2))`` of the residual stream h_0 .. h_L (log scale). The curve of
the previous setting stays in grey, for comparison. Results are cached per
(placement, depth, d_model, norm_type), so going back to a setting costs only the redraw; with
``placement="none"`` there is no norm, so the norm type changes nothing and is not recomputed.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from .. import _validate as check
from ..diagnostics import activation_scales, gradient_norms, init_profile
from ..figures import trend
from ..model import LMConfig, seeded_model
from ..normalization import NORM_PLACEMENTS, NORM_TYPES
from ..plots import PALETTE
from ._base import TITLE_AT_TOP, Explorer, dropdown, slider

__all__ = ["norm_explorer", "profile", "MAX_DEPTH", "D_MODELS"]

MAX_DEPTH = 24
D_MODELS = (32, 64, 128, 256)
SEEDS = (0, 1)  # averaged over two fresh models per setting
VOCAB, BATCH, LENGTH, HEADS = 256, 4, 16, 4  # small on purpose: an update must feel immediate

LABELS = {"pre": "pre-norm", "post": "post-norm", "none": "no norm"}
COLORS = {"pre": PALETTE[0], "post": PALETTE[4], "none": PALETTE[2]}
NORM_LABELS = {"layer": "LayerNorm", "rms": "RMSNorm"}
STYLES = {"layer": "-", "rms": "--"}  # RMSNorm dashed, so that it stays apart from the grey ghost


def _profile_with(norm_type: str, placement: str, depth: int, d_model: int):
    """:func:`helpers.diagnostics.init_profile` with the explorer's sizes and ``norm_type``: the
    same models, seeds, tokens and averaging (the tests check that ``"layer"`` gives exactly
    init_profile's figures), with RMSNorm in place of layer norm for ``"rms"``."""
    grads, scales = [], []
    for seed in SEEDS:
        config = LMConfig(
            VOCAB, d_model, depth, HEADS, 4 * d_model, max_len=LENGTH + 1, norm=placement,
            activation="relu", tie_weights=True, scale_embeddings=True, init="xavier",
            norm_type=norm_type,
        )  # fmt: skip
        model = seeded_model(config, seed, torch.float32)
        tokens = torch.randint(0, VOCAB, (BATCH, LENGTH + 1))  # [B, n+1]
        grads.append(gradient_norms(model, tokens))
        scales.append(activation_scales(model, tokens[:, :-1]))
    return np.mean(grads, axis=0), np.mean(scales, axis=0)


def profile(
    placement: str, depth: int, d_model: int, norm_type: str = "layer"
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient norms [depth] and stream scales [depth + 1] of a fresh model (cached).

    ``norm_type="layer"`` is :func:`helpers.diagnostics.init_profile`; ``"rms"`` the same
    models with RMSNorm (C5.8). Without a norm (``placement="none"``) the type changes nothing.
    """
    check.choice("placement", placement, NORM_PLACEMENTS)
    check.choice("norm_type", norm_type, NORM_TYPES)
    if placement == "none":
        norm_type = "layer"  # no norm at all: the same model whatever the type
    return _profile(placement, depth, d_model, norm_type)


@lru_cache(maxsize=512)
def _profile(placement: str, depth: int, d_model: int, norm_type: str):
    """Runs on one thread: the matrices are small, and on a busy machine extra threads only
    wait. The random stream of the caller is left as it was."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            if norm_type == "layer":
                p = init_profile(
                    placement, depth, d_model, seeds=SEEDS, vocab_size=VOCAB, batch=BATCH,
                    n=LENGTH, n_heads=HEADS,
                )  # fmt: skip
                grads, scales = np.asarray(p.gradients), np.asarray(p.scales)
            else:
                grads, scales = _profile_with(norm_type, placement, depth, d_model)
    finally:
        torch.set_num_threads(threads)
    grads.flags.writeable = scales.flags.writeable = False  # cached: never changed in place
    return grads, scales


def _fit_log(ax, *arrays) -> None:
    values = np.concatenate([a[np.isfinite(a) & (a > 0)] for a in arrays if len(a)])
    lo, hi = float(values.min()), float(values.max())
    ax.set_ylim(lo / 1.6, hi * 1.6)
    # label the minor ticks (2, 3, 5 ...) only when the range spans less than about a decade
    ax.yaxis.set_minor_formatter(_PLAIN if hi / lo < 8 else NullFormatter())


_PLAIN = FuncFormatter(lambda v, _: f"{v:.3g}")


def norm_explorer(
    placement: str = "pre", depth: int = 6, d_model: int = 64, norm_type: str = "layer"
) -> Explorer:
    """Lesson 5 explorer (C5.2, C5.3, C5.6, C5.8). Returns a widget; change the placement, the
    norm type (layer norm or RMSNorm), depth or d_model and watch the per-layer gradient norms
    and activation scales at initialization.

    The model is a :class:`helpers.TransformerLM` with Xavier-normal initialization, embeddings
    scaled by sqrt(d_model), ReLU feed-forward (d_ff = 4 d_model), 4 heads, vocabulary 256,
    a batch of 4 random sequences of 16 tokens, averaged over 2 seeds
    (:func:`helpers.diagnostics.init_profile`).
    """
    check.choice("placement", placement, NORM_PLACEMENTS)
    check.choice("norm_type", norm_type, NORM_TYPES)
    depth = check.positive_int("depth", depth)
    if depth > MAX_DEPTH:
        raise ValueError(f"depth must be between 1 and {MAX_DEPTH}, got {depth}")
    if d_model not in D_MODELS:
        raise ValueError(f"d_model must be one of {D_MODELS}, got {d_model!r}")

    controls = {
        "placement": dropdown("norm placement", list(NORM_PLACEMENTS), placement),
        "norm_type": dropdown("norm type", [(NORM_LABELS[t], t) for t in NORM_TYPES], norm_type),
        "depth": slider("depth (blocks)", depth, 1, MAX_DEPTH),
        "d_model": dropdown("d_model", list(D_MODELS), d_model),
    }
    fig = Figure(figsize=(9.0, 3.0))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.17, top=0.88, wspace=0.28)
    ax_grad, ax_scale = fig.subplots(1, 2)
    (grad_ghost,) = ax_grad.plot(
        [], [], color="0.7", lw=1.2, ls=":", marker="o", ms=2, label="previous"
    )
    (grad_line,) = ax_grad.plot([], [], lw=1.8, marker="o", ms=3, label="current")
    (scale_ghost,) = ax_scale.plot(
        [], [], color="0.7", lw=1.2, ls=":", marker="o", ms=2, label="previous"
    )
    (scale_line,) = ax_scale.plot([], [], lw=1.8, marker="o", ms=3)
    for ax in (ax_grad, ax_scale):
        ax.set_yscale("log")
        ax.set_xlabel("layer")
        ax.grid(True, which="major", alpha=0.3)
        ax.yaxis.set_major_formatter(_PLAIN)
    ax_grad.set_title("gradient ‖∂L/∂W2‖ per block", fontsize="medium", **TITLE_AT_TOP)
    ax_scale.set_title("activation scale RMS(h_l) of the stream", fontsize="medium", **TITLE_AT_TOP)
    legend = ax_grad.legend(loc="upper right", fontsize="x-small")
    previous: dict[str, object] = {}

    def update(placement: str, norm_type: str, depth: int, d_model: int) -> str:
        grads, scales = profile(placement, depth, d_model, norm_type)  # [L], [L + 1]
        color = COLORS[placement]
        style = STYLES[norm_type] if placement != "none" else "-"
        grad_line.set_data(np.arange(1, depth + 1), grads)
        scale_line.set_data(np.arange(0, depth + 1), scales)
        for line in (grad_line, scale_line):
            line.set_color(color)
            line.set_linestyle(style)
        kind = f" {NORM_LABELS[norm_type]}" if placement != "none" else ""
        label = f"{LABELS[placement]}{kind}, L={depth}, d={d_model}"
        grad_line.set_label(label)
        ghost_g, ghost_s = previous.get("grads", np.empty(0)), previous.get("scales", np.empty(0))
        grad_ghost.set_data(np.arange(1, len(ghost_g) + 1), ghost_g)
        scale_ghost.set_data(np.arange(0, len(ghost_s)), ghost_s)
        grad_ghost.set_label(f"previous: {previous['label']}" if previous else "previous")
        for text, line in zip(legend.get_texts(), (grad_ghost, grad_line), strict=True):
            text.set_text(line.get_label())
        legend.legend_handles[1].set_color(color)
        legend.legend_handles[1].set_linestyle(style)
        width = max(depth, len(ghost_g))
        ax_grad.set_xlim(0.5, width + 0.5)
        ax_scale.set_xlim(-0.5, width + 0.5)
        _fit_log(ax_grad, grads, ghost_g)
        _fit_log(ax_scale, scales, ghost_s)
        previous.update(grads=grads, scales=scales, label=label)
        note = " (no norm: the norm type changes nothing)" if placement == "none" else ""
        return (
            f"<b>{LABELS[placement]}{kind}</b>{note}, {depth} blocks, d_model {d_model}: "
            f"last/first layer "
            f"gradient {grads[-1] / grads[0]:.3g}; activation scale h_0 {scales[0]:.3g} → "
            f"h_L {scales[-1]:.3g} (×{scales[-1] / scales[0]:.3g})"
        )

    def describe(placement: str, norm_type: str, depth: int, d_model: int) -> str:
        grads, scales = profile(placement, depth, d_model, norm_type)
        kind = f" {NORM_LABELS[norm_type]}" if placement != "none" else ""
        style = "dashed" if placement != "none" and STYLES[norm_type] == "--" else "solid"
        gradient = (  # one block has one gradient point: no trend to tell
            f"‖∂L/∂W2‖ {trend(grads)} from layer 1 to layer {depth}"
            if len(grads) > 1
            else f"‖∂L/∂W2‖ of the one layer is {float(grads[0]):.3g}"
        )
        return (
            f"Two panels on log scales for {LABELS[placement]}{kind}, {depth} "
            f"block{'s' if depth > 1 else ''}, d_model {d_model} ({style} line, the previous "
            f"setting grey and dotted): the gradient {gradient}, and the activation scale "
            f"RMS(h_l) {trend(scales)} from h_0 to h_{depth}."
        )

    return Explorer(
        "Lesson 5: where the norm sits, and which norm", controls, fig, update, describe=describe
    )
