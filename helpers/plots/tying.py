"""Lesson 8 plots: where a language model's parameters sit, and tied against untied training."""

from __future__ import annotations

import numpy as np

from ..figures import describe, listing, ranking, trend
from ..printing import fmt
from ._common import PALETTE
from ._common import axes as _axes

__all__ = [
    "BREAKDOWN_PARTS",
    "breakdown_values",
    "plot_parameter_breakdown",
    "plot_training_curves",
    "plot_paired_differences",
]


#: Line styles (training curve, validation line) of the runs compared, in order: no run is told
#: from another by its colour alone.
_CURVE_STYLES = [("-", "--"), ("-.", ":"), ((0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)))]
_LS_WORDS = {"-": "solid", "--": "dashed", "-.": "dash-dot", ":": "dotted"}
_LS_WORDS.update({_CURVE_STYLES[2][0]: "dash-dot-dot", _CURVE_STYLES[2][1]: "sparse dots"})

#: The four bars of the breakdown; the final LayerNorm (2 d_model values) is counted with the blocks.
BREAKDOWN_PARTS = ("embedding", "position", "blocks", "output")


def breakdown_values(counts: dict[str, int]) -> np.ndarray:
    """The four bar heights [embedding, position, blocks (+ final norm), output], in millions,
    from a dict of :func:`helpers.params.lm_parameter_counts`."""
    if not isinstance(counts, dict):
        raise TypeError(
            f"counts must be a dict from lm_parameter_counts(...), got {type(counts).__name__}"
        )
    missing = [k for k in ("embedding", "position", "blocks", "output") if k not in counts]
    if missing:
        raise ValueError(f"counts is missing {missing}; pass lm_parameter_counts(...)")
    return (
        np.array(
            [
                counts["embedding"],
                counts["position"],
                counts["blocks"] + counts.get("final_norm", 0),
                counts["output"],
            ],
            dtype=float,
        )
        / 1e6
    )


def plot_parameter_breakdown(counts: dict[str, int], ax=None, saving: int | None = None):
    """Lesson 8. Horizontal bars of the parameter breakdown (millions). ``saving``, if given, is
    drawn as a dashed outline on the output row: the matrix that tying removes.

    Returns ``(bars, ghost, labels)``: the bar container, the dashed outline and the text
    labels, so an explorer can update them in place (``set_width``, ``set_text``).
    """
    values = breakdown_values(counts)
    ax = _axes(ax, (6, 2.4))
    y = np.arange(len(BREAKDOWN_PARTS))
    colors = [PALETTE[0], "#999999", PALETTE[3], PALETTE[1]]
    bars = ax.barh(y, values, color=colors)
    ghost = ax.barh(
        [y[-1]],
        [(saving or 0) / 1e6],
        fill=False,
        edgecolor=PALETTE[1],
        linestyle="--",
        linewidth=1.2,
    )[0]
    labels = [
        ax.text(v, yi, f" {v:,.2f} M", va="center", fontsize=8)
        for yi, v in zip(y, values, strict=True)
    ]
    ax.set_yticks(y, ["embedding W_E", "position", "blocks + final LN", "output W_out"])
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    ax.set_xlim(0, max(values.max(), (saving or 0) / 1e6) * 1.3 + 1e-9)
    describe_breakdown(ax, values, saving)
    return bars, ghost, labels


def describe_breakdown(ax, values, saving=None) -> None:
    """Lesson 8. The description of :func:`plot_parameter_breakdown`'s bars (``values`` in
    millions, :func:`breakdown_values`), set again by the explorer after each update."""
    names = ["embedding", "position", "blocks and final norm", "output"]
    parts = [f"{n} {v:,.2f} M" for n, v in zip(names, values, strict=True)]
    largest = names[int(np.argmax(values))]
    describe(
        ax,
        f"Parameters in millions, one bar per part: {listing(parts)}; the largest is {largest}"
        + (
            f"; the dashed outline on the output bar is the {saving / 1e6:,.2f} M that tying "
            "removes"
            if saving
            else ""
        )
        + ".",
    )


def plot_training_curves(results: dict, ax=None, smooth: int = 20):
    """Lesson 8 (C8.5). Training loss per step of each run in ``results`` (name -> TrainResult),
    smoothed by a running mean over ``smooth`` steps, with each run's final validation loss as a
    dashed line. Returns the axes."""
    if not isinstance(results, dict) or not results:
        raise TypeError(
            "results must be a non-empty dict {name: TrainResult}, as compare_tying() returns, "
            f"got {type(results).__name__}"
        )
    for name, result in results.items():
        if not hasattr(result, "train_losses") or not hasattr(result, "val_loss"):
            raise TypeError(
                f"results[{name!r}] must be a TrainResult (train_losses, val_loss), "
                f"got {type(result).__name__}"
            )
        if len(result.train_losses) == 0:
            raise ValueError(f"results[{name!r}] has no training losses to plot")
    if isinstance(smooth, bool) or not isinstance(smooth, int | float):
        raise TypeError(f"smooth must be a number of steps, got {smooth!r}")
    ax = _axes(ax, (6, 3))
    styles = []
    for (name, result), color, (train_ls, val_ls) in zip(
        results.items(), PALETTE[:3], _CURVE_STYLES, strict=False
    ):
        losses = np.asarray(result.train_losses, dtype=float)
        k = max(1, min(int(smooth), len(losses)))
        running = np.convolve(losses, np.ones(k) / k, mode="valid")
        ax.plot(
            np.arange(k - 1, len(losses)),
            running,
            color=color,
            ls=train_ls,
            label=f"{name} (train)",
        )
        ax.axhline(
            result.val_loss, color=color, linestyle=val_ls, linewidth=1, label=f"{name} (val)"
        )
        styles.append(f"'{name}' {_LS_WORDS[train_ls]} and {_LS_WORDS[val_ls]}")
    ax.set_xlabel("step")
    ax.set_ylabel("next-token loss (nats)")
    ax.legend(fontsize=8)
    trends = [f"'{n}' {trend(r.train_losses)}" for n, r in results.items()]
    finals = {n: r.val_loss for n, r in results.items()}
    describe(
        ax,
        f"Training loss against step ({int(smooth)}-step running mean) and each run's final "
        f"validation loss as a horizontal line ({listing(styles)}): the training loss of "
        f"{listing(trends)}; on validation {ranking(finals)}.",
    )
    return ax


#: Line style of each comparison of :func:`plot_paired_differences`, in order, and its words.
_PAIRED_STYLES = (("-", "solid"), (":", "dotted"), ("--", "dashed"))


def plot_paired_differences(steps, differences: dict, ax=None):
    """Lesson 8 (C8.5). Per-seed paired differences against the training step: for each named
    comparison, ``differences[name]`` is a list of per-seed curves (one value per entry of
    ``steps``), drawn as one line per seed in the comparison's colour and line style, with a
    line at zero. Described from the data: each comparison's mean over the seeds at the first and
    at the last step. Returns the axes."""
    steps = [int(k) for k in steps]
    if not steps:
        raise ValueError("steps must hold at least one step")
    if not isinstance(differences, dict) or not 1 <= len(differences) <= len(_PAIRED_STYLES):
        raise TypeError(
            f"differences must be a dict of 1 to {len(_PAIRED_STYLES)} comparisons "
            f"{{name: [one curve per seed]}}, got {type(differences).__name__}"
        )
    for name, curves in differences.items():
        if not curves or any(len(c) != len(steps) for c in curves):
            raise ValueError(
                f"differences[{name!r}] must hold one curve per seed, each with one value per "
                f"step ({len(steps)})"
            )
    ax = _axes(ax, (6.4, 3.2))
    parts = []
    for (name, curves), color, (ls, words) in zip(
        differences.items(), (PALETTE[1], PALETTE[0], PALETTE[4]), _PAIRED_STYLES, strict=False
    ):
        for i, curve in enumerate(curves):
            ax.plot(steps, curve, ls=ls, color=color, lw=1, label=name if i == 0 else None)
        mean = np.asarray(curves, dtype=np.float64).mean(axis=0)  # [steps]: over the seeds
        parts.append(
            f"'{name}' ({words}, {len(curves)} seeds) has a mean of {fmt(mean[0], decimals=2)} "
            f"at step {steps[0]} and {fmt(mean[-1], decimals=2)} at step {steps[-1]}"
        )
    ax.axhline(0, color=PALETTE[2], lw=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out loss difference (nats)")
    ax.legend(fontsize=8)
    describe(
        ax,
        "Held-out loss differences against the training step, one line per seed, with a line "
        f"at zero: {listing(parts)}.",
    )
    return ax
