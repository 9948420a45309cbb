"""An explorer's picture is what matplotlib draws, only cheaper (issue 28: explorers that feel
live): the text layouts an explorer keeps between updates (``helpers.widgets._base``) change no
pixel. Each explorer is moved through every value of its controls' first few settings and each
new picture compared byte for byte with a plain ``savefig`` of the same figure."""

from __future__ import annotations

import io

import matplotlib
import matplotlib.text as mtext
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _models import small_explorer  # noqa: E402  (tests/ is on sys.path)

from helpers.widgets._base import LAYOUT_CACHE_SIZE, _cached_text_layout  # noqa: E402

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
                assert e.image.value == _plain_png(e), f"{name}: picture differs at {e.values}"
                compared += 1
        assert compared >= 3, f"{name}: only {compared} pictures compared"
        assert e._layouts, f"{name}: no layout was kept"
    finally:
        e.close()
    assert mtext.Text._get_layout.__name__ == "_get_layout"  # matplotlib's own, restored
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
