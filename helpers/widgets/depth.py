"""Lesson 7 explorer: depth, d_model and norm placement against parameters and the stream.

Left: the parameter count of a small language model for every depth 1..MAX_DEPTH,
``count(L) = base + L * per_block`` (C7.2), beside a weight-shared stack that stays flat; the
chosen depth is circled. Right: the residual stream of the chosen model at initialization, the
mean size per token of the stream ``||h_l||`` and of each block's contribution
``||h_l - h_{l-1}||`` (C7.3). Models are cached by their settings, so going back is instant.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .. import _validate as check
from ..blocks import stream_statistics
from ..figures import trend
from ..model import LMConfig, TransformerLM, seeded_model
from ..normalization import NORM_PLACEMENTS
from ..params import count_parameters
from ..plots.depth import plot_parameter_count, plot_residual_stream
from ..printing import fmt
from ._base import Explorer, dropdown, slider

_MARKER_WORDS = {"o": "circles", "s": "squares", "^": "triangles"}

__all__ = ["depth_explorer", "MAX_DEPTH", "D_MODELS", "stack_statistics", "depth_counts"]

MAX_DEPTH = 12
D_MODELS = (32, 64, 128, 256)
VOCAB, N_HEADS, BATCH, N_TOKENS, SEED = 256, 4, 4, 32, 0


def _check_settings(d_model, norm) -> None:
    check.positive_int("d_model", d_model)
    check.choice("norm", norm, NORM_PLACEMENTS)


def depth_counts(
    d_model: int, norm: str = "pre"
) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    """Lesson 7 (C7.2). Counts of the explorer's model for depths 1..MAX_DEPTH.

    Returns ``(independent, shared, base, per_block)``: ``independent[L-1] = base + L * per_block``,
    with ``base`` and ``per_block`` measured with :func:`helpers.count_parameters` at depths 1 and 2
    (built on the meta device: nothing is allocated); ``shared[L-1] = base + per_block`` (one block
    reused L times).
    """
    _check_settings(d_model, norm)
    return _depth_counts(d_model, norm)


@lru_cache(maxsize=8)
def _depth_counts(d_model: int, norm: str) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    with torch.device("meta"):
        c1 = count_parameters(TransformerLM(VOCAB, d_model, 1, N_HEADS, norm=norm))
        c2 = count_parameters(TransformerLM(VOCAB, d_model, 2, N_HEADS, norm=norm))
    per_block, base = c2 - c1, c1 - (c2 - c1)
    depths = range(1, MAX_DEPTH + 1)
    return (
        tuple(base + L * per_block for L in depths),
        tuple(base + per_block for _ in depths),
        base,
        per_block,
    )


@lru_cache(maxsize=16)
def _full_stack_statistics(d_model: int, norm: str) -> tuple[np.ndarray, np.ndarray]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: on a busy machine extra threads only wait
    try:
        with torch.random.fork_rng():  # seeded, without touching the notebook's random state
            config = LMConfig(VOCAB, d_model, MAX_DEPTH, N_HEADS, norm=norm, init="xavier")
            model = seeded_model(config, SEED)  # drawn in the current default dtype
        model = model.double()  # float64, like the notebook's table: the same figures anywhere
        tokens = torch.randint(
            0, VOCAB, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1)
        )  # [B, n] token ids
        with torch.no_grad():
            _, hidden = model.eval()(tokens, return_hidden=True)  # [h_0..h_12], each [B, n, d]
    finally:
        torch.set_num_threads(threads)
    contribution, stream = stream_statistics(hidden)  # [12], [13]
    return contribution.numpy(), stream.numpy()


def stack_statistics(depth: int, d_model: int, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """Lesson 7 (C7.3). ``(contribution [depth], stream [depth + 1])`` at initialization.

    The stack of depth L is the first L blocks of one model
    ``TransformerLM(256, d_model, 12, 4, norm=norm, init="xavier")`` seeded with 0 and run in
    float64 (the states h_0..h_L do not depend on later blocks), on a fixed batch of random tokens [4, 32];
    sizes from :func:`helpers.blocks.stream_statistics`. One model per (d_model, norm) is
    built and cached, so changing the depth costs nothing.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be a whole number from 1 to {MAX_DEPTH}, got {depth!r}")
    _check_settings(d_model, norm)
    contribution, stream = _full_stack_statistics(d_model, norm)
    return contribution[:depth], stream[: depth + 1]


def depth_explorer(depth: int = 6, d_model: int = 64, norm: str = "pre") -> Explorer:
    """Lesson 7. Explorer: depth (1-12), d_model, norm placement (pre / post).

    Shows the parameter count against depth (own weights per block vs one shared block) and the
    residual stream of the chosen model: ``||h_l||`` and each block's ``||h_l - h_{l-1}||``.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be a whole number from 1 to {MAX_DEPTH}, got {depth!r}")
    if d_model not in D_MODELS:
        raise ValueError(f"d_model must be one of {D_MODELS}, got {d_model!r}")
    if norm not in ("pre", "post"):
        raise ValueError(f"norm must be 'pre' or 'post', got {norm!r}")

    # a pyplot-free figure with fixed margins, wide enough for any tick labels (a layout engine
    # re-run on every update would double the cost of an update)
    fig = Figure(figsize=(8.0, 2.8))
    ax_count, ax_stream = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.09, right=0.985, bottom=0.17, top=0.9, wspace=0.3)
    depths = np.arange(1, MAX_DEPTH + 1)
    independent, shared, _, _ = depth_counts(d_model, norm)
    count_art = plot_parameter_count(depths, independent, shared, ax=ax_count)
    ax_count.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    contribution, stream = stack_statistics(depth, d_model, norm)
    stream_art = plot_residual_stream(contribution, stream, ax=ax_stream)
    ax_stream.set_xlim(-0.5, MAX_DEPTH + 0.5)
    ax_stream.set_ylim(0, 1.5 * float(max(stream.max(), contribution.max())))
    # fewer ticks and direct labels instead of legends: text is most of the rendering cost
    ax_count.set_xticks([1, 4, 8, 12])
    ax_stream.set_xticks([0, 4, 8, 12])
    for ax in (ax_count, ax_stream):
        ax.yaxis.set_major_locator(MaxNLocator(4))
        labelled = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
        ax.get_legend().remove()
        for i, line in enumerate(labelled):
            marker = _MARKER_WORDS.get(line.get_marker(), "")
            ax.text(
                0.03,
                0.93 - 0.1 * i,
                f"{line.get_label()} ({marker})" if marker else line.get_label(),
                color=line.get_color(),
                transform=ax.transAxes,
                fontsize="small",
                va="top",
            )

    def update(depth: int, d_model: int, norm: str) -> str:
        independent, shared, base, per_block = depth_counts(d_model, norm)
        count_art["independent"].set_ydata(independent)
        count_art["shared"].set_ydata(shared)
        count_art["marker"].set_data([depth], [independent[depth - 1]])
        ax_count.set_ylim(0, 1.1 * independent[-1])
        contribution, stream = stack_statistics(depth, d_model, norm)
        stream_art["stream"].set_data(np.arange(depth + 1), stream)
        stream_art["contribution"].set_data(np.arange(1, depth + 1), contribution)
        ax_stream.set_ylim(0, 1.5 * float(max(stream.max(), contribution.max())))
        growth = stream[-1] / stream[0]
        return (
            f"count({depth}) = base + L &times; per_block = {base:,} + {depth} &times; "
            f"{per_block:,} = <b>{base + depth * per_block:,}</b> parameters "
            f"(one shared block: {shared[0]:,}). "
            f"Stream: ||h_0|| = {fmt(stream[0], 3)} &rarr; ||h_{depth}|| = {fmt(stream[-1], 3)} "
            f"(&times;{fmt(growth, decimals=2)}); mean block contribution "
            f"{fmt(contribution.mean(), 3)}."
        )

    def describe(depth: int, d_model: int, norm: str) -> str:
        independent, shared, base, per_block = depth_counts(d_model, norm)
        contribution, stream = stack_statistics(depth, d_model, norm)
        growing = "grows with every block" if np.all(np.diff(stream) > 0) else trend(stream)
        return (
            f"Two panels for d_model {d_model}, {norm}-norm: parameters against depth 1 to "
            f"{MAX_DEPTH}, a straight line rising by {per_block:,} per block (circles, depth "
            f"{depth} ringed at {base + depth * per_block:,}) against a flat {shared[0]:,} for one "
            f"shared block (squares); and the residual stream's norm ‖h_l‖ (circles), which "
            f"{growing} from block 0 to {depth}, with each block's contribution (triangles)."
        )

    controls = {
        "depth": slider("depth L", depth, 1, MAX_DEPTH),
        "d_model": dropdown("d_model", list(D_MODELS), d_model),
        "norm": dropdown("norm placement", ["pre", "post"], norm),
    }
    return Explorer("Lesson 7: stacking blocks", controls, fig, update, describe=describe)
