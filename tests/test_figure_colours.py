"""No figure relies on colour alone, and the colours each figure uses stay apart for a reader
with deuteranopia or protanopia (CONTRIBUTING.md, "Figures"; issue 26).

Every figure the course draws is built here from its plot helper (or its notebook cell's code)
with small data, and every explorer's figure at its default settings. For each figure:

* the colours it tells apart (labelled lines, bars) are simulated as a reader with full
  deuteranopia and full protanopia sees them (``colorspacious``: Machado, Oliveira and Fernandes
  2009, severity 100) and every pair must stay at least :data:`MIN_DISTANCE` apart in CAM02-UCS
  (Luo, Cui and Li 2006), the perceptually uniform space of ``colorspacious``;
* no two labelled lines share both line style and marker (so a reader who cannot tell their
  colours apart still can), and bars differ in hatching or are labelled by their ticks.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _models import small_explorer  # noqa: E402  (tests/ is on sys.path)
from colorspacious import cspace_convert  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

#: CAM02-UCS distance every pair of a figure's colours keeps under each simulated deficiency.
#: About ten times the distance of a just-noticeable difference of two patches side by side
#: (ΔE' ~ 1-2 in CAM02-UCS): colours of thin lines must differ by far more than patches to be
#: named apart; the figure and the measured values are in the report of this test.
MIN_DISTANCE = 15.0
DEFICIENCIES = ("deuteranomaly", "protanomaly")


def simulate(rgb, deficiency: str) -> np.ndarray:
    cvd = {"name": "sRGB1+CVD", "cvd_type": deficiency, "severity": 100}
    return np.clip(cspace_convert(np.asarray(rgb, dtype=float), cvd, "sRGB1"), 0, 1)


def distance(a, b) -> float:
    ja, jb = (cspace_convert(np.asarray(c, dtype=float), "sRGB1", "CAM02-UCS") for c in (a, b))
    return float(np.linalg.norm(ja - jb))


def told_apart(fig) -> tuple[list[tuple[str, tuple]], list[Line2D]]:
    """The colours a reader must tell apart in ``fig`` (per axes: labelled lines and the face
    colours of filled bars), and the labelled lines."""
    colours, lines = [], []
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_label().startswith("_") or not line.get_visible():
                continue
            lines.append(line)
            colours.append((f"line {line.get_label()!r}", to_rgb(line.get_color())))
        for patch in ax.patches:
            if patch.get_fill() and patch.get_visible():
                colours.append(("bar", to_rgb(patch.get_facecolor())))
    unique = {}
    for name, rgb in colours:
        unique.setdefault(tuple(round(c, 4) for c in rgb), name)
    return [(name, rgb) for rgb, name in unique.items()], lines


def closest_pair(colours, deficiency: str):
    """The smallest CAM02-UCS distance between two of ``colours`` as the deficiency shows them."""
    best = (np.inf, None, None)
    for (na, a), (nb, b) in itertools.combinations(colours, 2):
        d = distance(simulate(a, deficiency), simulate(b, deficiency))
        if d < best[0]:
            best = (d, na, nb)
    return best


# --- every figure of the course --------------------------------------------------------------


def _gcf(draw):
    draw()
    return plt.gcf()


def _per_layer_five():
    from helpers.plots.residual import plot_per_layer

    curves = {f"curve {i}": list(np.linspace(1, 1 + i, 6)) for i in range(5)}
    plot_per_layer(curves)


def _warmup_cell():  # lesson 5's C5.7 cell, as written there
    fig, ax = plt.subplots()
    from helpers.plots import PALETTE

    for i, ls in zip(range(3), ["-", "--", "-.", ":"], strict=False):
        ax.plot(
            np.arange(10), np.linspace(3, 2 + 0.1 * i, 10), ls=ls, color=PALETTE[i], label=f"r{i}"
        )
    ax.axvline(4, color="0.6", lw=0.8, ls=(0, (1, 3)))


def _paired_differences_cell():  # lesson 8's C8.5 figure: per-seed paired differences
    from helpers.plots.tying import plot_paired_differences

    steps = [25, 50, 75]
    plot_paired_differences(
        steps,
        {
            "untied - tied": [[-0.3, -0.2, 0.0], [-0.2, -0.1, 0.01]],
            "A/A: tied (other draw) - tied": [[0.05, 0.02, 0.01], [-0.04, 0.0, -0.02]],
        },
    )


def _fake_runs():
    return {
        n: SimpleNamespace(train_losses=list(np.linspace(4, 2 + i, 60)), val_loss=2.5 + i)
        for i, n in enumerate(("tied", "untied"))
    }


def _losses():
    from helpers.plots.pretrain import plot_losses
    from helpers.pretrain import Pretraining

    class Fake(Pretraining):  # the plot reads only .result and .baselines
        baselines = None

    run = Fake.__new__(Fake)
    run.result = SimpleNamespace(
        train_losses=list(np.linspace(4, 2, 20)), val_steps=[0, 10, 20], val_losses=[4, 3, 2]
    )
    run.baselines = {"uniform": 4.2, "unigram": 3.3, "bigram": 2.5}
    plot_losses(run)


def _side_by_side():
    from helpers.plots.pretrain import plot_side_by_side
    from helpers.side_by_side import SideBySide

    grid = SideBySide.__new__(SideBySide)
    run = SimpleNamespace(val_steps=[0, 5, 10], val_losses=[4.0, 3.0, 2.5])
    choices = {"position": 3, "norm placement": 2, "tying": 2, "activation": 4}
    grid.runs = {(f, f"choice {i}"): [run, run] for f, n in choices.items() for i in range(n)}
    grid.baselines = {"unigram": 3.3}
    plot_side_by_side(grid)


def _next_token():
    from helpers.plots.generation import plot_next_token_distribution

    probs = torch.softmax(torch.linspace(3, 0, 30, dtype=torch.float64), 0)
    kept = torch.arange(30) < 5
    plot_next_token_distribution(probs, kept, [chr(97 + i % 26) for i in range(30)])


def _loss_by_position():  # 04b's four schemes (lesson 4 draws the first alone)
    from helpers.plots.length import plot_loss_by_position

    runs = [[2.0 + 0.1 * (t > 3) for t in range(8)]] * 2
    plot_loss_by_position({k: runs for k in ("sinusoidal", "rotary", "alibi", "none")}, 4)


def _static_figures():
    from helpers import sinusoidal_encoding
    from helpers.plots import depth, feedforward, position, residual, tying

    pe = sinusoidal_encoding(50, 64)
    return {
        "lesson 4 waves": lambda: position.plot_waves(pe, columns=(8, 9, 20, 40)),
        "lesson 4 wavelengths": lambda: position.plot_wavelengths(64),
        "lesson 4 (C4.7, 04b) loss by position": _loss_by_position,
        "lesson 5 per-layer (5 curves)": _per_layer_five,
        "lesson 5 exercise 3 curves": lambda: residual.plot_mystery_curves([3, 2, 1], [1, 2, 3]),
        "lesson 5 C5.7 warm-up cell": _warmup_cell,
        "lesson 6 activations": lambda: feedforward.plot_activations(),
        "lesson 6 shape diagram": lambda: feedforward.plot_shape_diagram(
            [(4, 512), (4, 2048), (4, 512)]
        ),
        "lesson 7 parameter count": lambda: depth.plot_parameter_count(
            [1, 2, 3], [10, 20, 30], [10, 10, 10]
        ),
        "lesson 7 residual stream": lambda: depth.plot_residual_stream([1, 1], [1, 2, 3]),
        "lesson 8 breakdown": lambda: tying.plot_parameter_breakdown(
            {"embedding": 4, "position": 1, "blocks": 7, "output": 4}, saving=4
        ),
        "lesson 8 C8.5 paired differences": _paired_differences_cell,
        "lesson 8 training curves (helper)": lambda: tying.plot_training_curves(_fake_runs()),
        "lesson 9 losses": _losses,
        "lesson 9 side by side": _side_by_side,
        "lesson 9 next-token bars": _next_token,
    }


STATIC = _static_figures()
EXPLORERS = [
    "positional_explorer",
    "norm_explorer",
    "feedforward_explorer",
    "depth_explorer",
    "tying_explorer",
    "generation_explorer",
]


def _explorer_figure(name):
    e = small_explorer(name)
    if name == "generation_explorer":
        e.controls["top_k"].value = 4  # kept and dropped bars both shown
    if name == "norm_explorer":
        e.controls["depth"].value = 4  # the grey 'previous' curve is drawn too
    return e


def _check(fig, label):
    colours, lines = told_apart(fig)
    report = []
    for deficiency in DEFICIENCIES:
        d, a, b = closest_pair(colours, deficiency)
        report.append(f"{deficiency}: closest {a} / {b} at {d:.1f}")
        assert d >= MIN_DISTANCE, (
            f"{label}: under {deficiency} {a} and {b} are {d:.1f} apart in CAM02-UCS "
            f"(at least {MIN_DISTANCE} needed)"
        )
    by_axes = {}
    for line in lines:
        by_axes.setdefault(id(line.axes), []).append(line)
    for group in by_axes.values():
        seen = {}
        for line in group:
            dashes = getattr(line, "_unscaled_dash_pattern", None) or line.get_linestyle()
            key = (str(dashes), str(line.get_marker()), round(line.get_linewidth(), 1))
            assert key not in seen, (
                f"{label}: lines {seen[key]!r} and {line.get_label()!r} differ by colour alone "
                f"(both dashes {key[0]}, marker {key[1]}, width {key[2]})"
            )
            seen[key] = line.get_label()
    bars = [p for ax in fig.axes for p in ax.patches if p.get_fill()]
    colours_of_bars = {tuple(round(c, 4) for c in to_rgb(p.get_facecolor())) for p in bars}
    if len(colours_of_bars) > 1:
        for ax in fig.axes:
            patches = [p for p in ax.patches if p.get_fill()]
            labelled = any(t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels())
            labelled = labelled or len([t for t in ax.texts if t.get_text()]) >= len(patches)
            hatched = len({p.get_hatch() or "" for p in patches}) > 1
            assert labelled or hatched or len(patches) < 2, (
                f"{label}: bars differ by colour alone (no hatching, no tick labels)"
            )
    return report


@pytest.mark.parametrize("label", list(STATIC))
def test_static_figure_colours_stay_apart_under_deuteranopia_and_protanopia(label):
    fig = _gcf(STATIC[label])
    try:
        print(label, "; ".join(_check(fig, label)))
    finally:
        plt.close("all")


@pytest.mark.parametrize("name", EXPLORERS)
def test_explorer_colours_stay_apart_under_deuteranopia_and_protanopia(name):
    e = _explorer_figure(name)
    try:
        print(name, "; ".join(_check(e.figure, name)))
    finally:
        e.close()


def test_the_check_fails_on_red_and_green_lines_told_apart_by_colour_alone():
    """The check itself, on the classic mistake: a red and a green solid line."""
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color="tab:red", label="a")
    ax.plot([0, 1], [1, 0], color="tab:green", label="b")
    try:
        with pytest.raises(AssertionError, match="under deuteranomaly"):
            _check(fig, "red/green")
        ax.lines[1].set_color("tab:blue")
        with pytest.raises(AssertionError, match="differ by colour alone"):
            _check(fig, "same style")
    finally:
        plt.close(fig)
