"""Lesson 8 explorer: where the parameters of a language model sit, and what tying saves.

Counts come from the formulas of :func:`helpers.params.lm_parameter_counts` (verified against
:func:`helpers.params.count_parameters` in the tests), so an update builds no model and costs only
the re-render of a small bar chart.
"""

from __future__ import annotations

import ipywidgets as widgets

from ..params import lm_parameter_counts, tying_saving
from ..plots.tying import breakdown_values, plot_parameter_breakdown
from ._base import Explorer, new_figure, slider

__all__ = ["tying_explorer"]

#: The range of each slider (inclusive); d_model moves in steps of 64.
RANGES = {"vocab_size": (1_000, 256_000), "d_model": (64, 4096), "n_layers": (1, 48)}


def tying_explorer(
    vocab_size: int = 50257, d_model: int = 768, n_layers: int = 12, tie: bool = True
) -> Explorer:
    """Lesson 8 (C8.4). Controls: vocabulary size, d_model, depth, tying. Shows the parameter
    breakdown (embedding, position, blocks, output) of a GPT-2-style model (learned positions,
    1024 of them, d_ff = 4 d_model, GELU, pre-norm) as bars updated in place, and the saving from
    tying, ``vocab_size * d_model``. The defaults are GPT-2 small (124,439,808 tied).
    Allowed starting values: vocab_size 1,000 to 256,000, d_model 64 to 4096, n_layers 1 to 48.
    """
    if not isinstance(tie, bool):
        raise TypeError(f"tie must be True or False, got {tie!r}")
    lm_parameter_counts(vocab_size, d_model, n_layers, tie_weights=tie)  # validates the types
    for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers)):
        lo, hi = RANGES[name]
        if not lo <= value <= hi:
            raise ValueError(
                f"{name} must be from {lo:,} to {hi:,} (the slider's range), got {value:,}"
            )
    controls = {
        "vocab_size": slider("vocab size", vocab_size, *RANGES["vocab_size"]),
        "d_model": slider("d_model", d_model, *RANGES["d_model"], step=64),
        "n_layers": slider("depth (blocks)", n_layers, *RANGES["n_layers"]),
        "tie": widgets.Checkbox(value=bool(tie), description="tie output to embedding"),
    }
    fig, axes = new_figure(6.0, 2.2)
    ax = axes[0, 0]
    counts = lm_parameter_counts(vocab_size, d_model, n_layers, tie_weights=bool(tie))
    bars, ghost, labels = plot_parameter_breakdown(
        counts, ax=ax, saving=tying_saving(vocab_size, d_model)
    )
    ax.tick_params(labelsize=8)
    ax.xaxis.label.set_size(8)

    def update(vocab_size, d_model, n_layers, tie):
        counts = lm_parameter_counts(vocab_size, d_model, n_layers, tie_weights=bool(tie))
        saving = tying_saving(vocab_size, d_model)
        values = breakdown_values(counts)  # millions: [embedding, position, blocks, output]
        for bar, label, v in zip(bars, labels, values, strict=True):
            bar.set_width(v)
            label.set_x(v)
            label.set_text(f" {v:,.2f} M")
        ghost.set_width(saving / 1e6 if tie else 0.0)  # the matrix tying removed
        if tie:
            labels[-1].set_text(f" 0: tied to W_E (saves {saving / 1e6:,.2f} M)")
        ax.set_xlim(0, max(values.max(), saving / 1e6) * 1.3)
        untied_total = counts["total"] + (saving if tie else 0)
        tied_total = untied_total - saving
        share = counts["embedding"] / counts["total"]
        return (
            f"total <b>{counts['total']:,}</b> parameters ({'tied' if tie else 'untied'}); "
            f"tied {tied_total:,} vs untied {untied_total:,}: tying saves "
            f"<b>{saving:,}</b> = {vocab_size:,} &times; {d_model} "
            f"({saving / untied_total:.1%} of the untied model); "
            f"the embedding is {share:.1%} of this model."
        )

    def describe(vocab_size, d_model, n_layers, tie):
        counts = lm_parameter_counts(vocab_size, d_model, n_layers, tie_weights=bool(tie))
        values = breakdown_values(counts)
        names = ["embedding", "position", "blocks and final norm", "output"]
        parts = ", ".join(f"{n} {v:,.2f} M" for n, v in zip(names, values, strict=True))
        saving = tying_saving(vocab_size, d_model)
        return (
            f"Horizontal bars of the parameters in millions of a model with vocabulary "
            f"{vocab_size:,}, d_model {d_model} and {n_layers} blocks, {counts['total']:,} in "
            f"all: {parts}"
            + (
                f"; tied, so the output bar is empty and its dashed outline shows the "
                f"{saving / 1e6:,.2f} M saved."
                if tie
                else "; untied."
            )
        )

    explorer = Explorer(
        "Lesson 8: where the parameters are, and what tying saves",
        controls,
        fig,
        update,
        describe=describe,
    )
    # The first render laid the figure out; keep that layout so an update only redraws the bars.
    fig.set_layout_engine("none")
    return explorer
