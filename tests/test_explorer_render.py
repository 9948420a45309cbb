"""An explorer's picture is what matplotlib draws, only cheaper (issue 28: explorers that feel
live): the text layouts an explorer keeps between updates, the ticks it works out once per draw
and its own PNG encoder (``helpers.widgets._base``) change no pixel. Each explorer is moved
through every value of its controls' first few settings and each new picture compared pixel for
pixel with a plain ``savefig`` of the same figure."""

from __future__ import annotations

import io

import matplotlib
import matplotlib.axis as maxis
import matplotlib.text as mtext
import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _models import small_explorer  # noqa: E402  (tests/ is on sys.path)

from helpers.widgets._base import (  # noqa: E402
    _FIGURE_DRAW,
    LAYOUT_CACHE_SIZE,
    _cached_text_layout,
    png_of,
)

NAMES = [
    "positional_explorer",
    "norm_explorer",
    "feedforward_explorer",
    "depth_explorer",
    "tying_explorer",
    "generation_explorer",
]


def _make(name):
    return small_explorer(name)


def _plain_png(explorer) -> bytes:
    buf = io.BytesIO()
    explorer.figure.savefig(buf, format="png", dpi=explorer.dpi, pil_kwargs={"compress_level": 1})
    return buf.getvalue()


def _pixels(png: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG"
    return np.asarray(image.convert("RGBA"))  # [h, w, 4]


def _moves(control):
    """A few new values of a control: its neighbours and its ends, or its other options."""
    if hasattr(control, "options"):
        return [v for _, v in control.options][:4]
    if isinstance(control.value, tuple | str):  # ranges and prompts: not moved here
        return []
    if isinstance(control.value, bool):
        return [not control.value, control.value]
    v = control.value
    return [
        x
        for x in (v + control.step, control.max, control.min, v)
        if control.min <= x <= control.max
    ]


@pytest.mark.parametrize("name", NAMES)
def test_kept_text_layouts_change_no_pixel_of_the_picture(name):
    e = _make(name)
    try:
        compared = 0
        for control in e.controls.values():
            for value in _moves(control):
                control.value = value  # the explorer re-renders with the kept layouts
                shown, plain = _pixels(e.image.value), _pixels(_plain_png(e))
                assert shown.shape == plain.shape, f"{name}: picture's size differs at {e.values}"
                assert np.array_equal(shown, plain), f"{name}: picture differs at {e.values}"
                compared += 1
        assert compared >= 3, f"{name}: only {compared} pictures compared"
        assert e._layouts, f"{name}: no layout was kept"
    finally:
        e.close()
    # matplotlib's own functions, restored
    assert mtext.Text._get_layout.__name__ == "_get_layout"
    assert maxis.Axis._update_ticks.__qualname__ == "Axis._update_ticks"
    assert maxis.XAxis._update_label_position.__qualname__ == "XAxis._update_label_position"
    assert Figure.draw is _FIGURE_DRAW  # as it was when helpers.widgets was imported
    assert plt.get_fignums() == []


def test_the_kept_layouts_are_bounded():
    store: dict = {}
    fig = matplotlib.figure.Figure()
    ax = fig.add_subplot()
    with _cached_text_layout(store):
        for i in range(LAYOUT_CACHE_SIZE + 10):
            ax.set_title(f"title {i}")
            fig.canvas.draw()
            assert len(store) <= LAYOUT_CACHE_SIZE


def test_png_of_is_the_image_it_was_given():
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)  # [h, w, 4]
    assert np.array_equal(_pixels(png_of(rgba)), rgba)
    with pytest.raises(ValueError, match=r"\[height, width, 4\] uint8"):
        png_of(rgba[..., :3])
