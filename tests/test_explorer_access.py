"""Explorers a screen-reader or keyboard user can use (CONTRIBUTING.md, "Figures"; issue 26), and
plot descriptions that follow the data. The browser side (names as axe computes them, keys in
JupyterLab) is in tests/test_browser.py; here the kernel side, without a browser."""

from __future__ import annotations

import ipywidgets
import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _models import explorer_model, small_explorer  # noqa: E402  (tests/ is on sys.path)

from helpers import widgets  # noqa: E402
from helpers.figures import check_description, description_of  # noqa: E402
from helpers.widgets._controls import (  # noqa: E402
    FloatSlider,
    IntRangeSlider,
    IntSlider,
    Picture,
    Select,
)

EXPLORERS = {
    "positional_explorer": ("pair", 7),
    "norm_explorer": ("depth", 3),
    "feedforward_explorer": ("activation", "gelu"),
    "depth_explorer": ("depth", 2),
    "tying_explorer": ("tie", False),
    "generation_explorer": ("temperature", 0.0),
}


@pytest.fixture(scope="module")
def explorers():
    made = {}
    for name in EXPLORERS:
        made[name] = small_explorer(name)
    yield made
    for e in made.values():
        e.close()
    assert plt.get_fignums() == []


@pytest.mark.parametrize("name", EXPLORERS)
def test_every_control_is_named_and_of_a_keyboard_usable_kind(explorers, name):
    for key, control in explorers[name].controls.items():
        assert control.description.strip(), f"{name}: control {key!r} has no name"
        # our native controls, or the ipywidgets ones that axe found named and usable
        assert isinstance(
            control,
            IntSlider
            | FloatSlider
            | IntRangeSlider
            | Select
            | ipywidgets.Text
            | ipywidgets.Checkbox,
        ), f"{name}: control {key!r} is a {type(control).__name__}"
        assert not isinstance(control, ipywidgets.Dropdown | ipywidgets.IntSlider)


@pytest.mark.parametrize("name", EXPLORERS)
def test_the_picture_description_is_one_sentence_and_follows_the_controls(explorers, name):
    e = explorers[name]
    assert isinstance(e.image, Picture)
    before = e.description
    check_description(before)
    assert e.image.description == before  # the picture's alt
    key, value = EXPLORERS[name]
    old = e.controls[key].value
    e.controls[key].value = value
    try:
        assert e.description != before, f"{name}: moving {key} left the description as it was"
        check_description(e.description)
        assert e.image.description == e.description
        data, md = e.still()
        assert md["image/png"]["alt"] == e.description
        assert data["text/plain"] == f"Figure: {e.description}"
    finally:
        e.controls[key].value = old
    assert e.description == before  # the same settings, the same sentence


def test_slider_clamps_and_select_maps_labels_to_values():
    s = IntSlider(value=5, min=0, max=10, description="n")
    s.value = 99
    assert s.value == 10
    s.max = 4
    assert s.value == 4
    sel = Select([("LayerNorm", "layer"), ("RMSNorm", "rms")], value="rms", description="norm")
    assert sel.index == 1 and sel._labels == ["LayerNorm", "RMSNorm"]
    sel.index = 0
    assert sel.value == "layer"
    with pytest.raises(Exception, match="value must be one of"):
        sel.value = "batch"
    r = IntRangeSlider(value=(2, 5), min=0, max=9, description="positions")
    with pytest.raises(Exception, match="start < stop"):
        r.value = (5, 5)


# --- plot descriptions computed from the data --------------------------------------------------


def test_C5_2_per_layer_description_says_which_curve_falls_and_which_ends_highest():
    from helpers.plots.residual import plot_per_layer

    ax = plot_per_layer({"a": [4.0, 2.0, 1.0], "b": [1.0, 1.5, 3.0]}, log=False)[0].axes
    text = description_of(ax.figure)
    assert "'a' falls" in text and "'b' rises" in text and "'b' ends highest" in text
    plt.close("all")
    ax = plot_per_layer({"a": [1.0, 2.0, 4.0], "b": [3.0, 1.5, 1.0]}, log=False)[0].axes
    text = description_of(ax.figure)
    assert "'a' rises" in text and "'b' falls" in text and "'a' ends highest" in text
    plt.close("all")


def test_C4_6_similarity_description_checks_the_diagonals():
    from helpers import sinusoidal_encoding
    from helpers.plots.position import plot_similarity

    plot_similarity(sinusoidal_encoding(20, 16))
    assert "the same along every diagonal" in description_of(plt.gcf())
    plt.close("all")
    plot_similarity(torch.randn(20, 16, generator=torch.Generator().manual_seed(0)))
    assert "not the same along its diagonals" in description_of(plt.gcf())
    plt.close("all")


def test_C6_2_shape_diagram_description_reads_the_shapes():
    from helpers.plots.feedforward import plot_shape_diagram

    plot_shape_diagram([(4, 512), (4, 2048), (4, 512)])
    text = description_of(plt.gcf())
    assert "expand 512 to 2048 and contract 2048 to 512" in text
    plt.close("all")


def test_C9_2_streamed_text_is_the_text_generate_text_writes_in_one_call():
    """The explorer writes its text in chunks (shown as it grows); the generator carries on, so
    it is exactly the text of one generate_text call with the same seed."""
    from helpers.generation import generate_text
    from helpers.widgets.generation import CHUNK, FIRST_CHUNK, N_NEW

    model, tok = explorer_model()
    e = widgets.generation_explorer(model, tok, prompt="abc")
    shown = []
    e.info.observe(lambda change: shown.append(change["new"]), names="value")
    try:
        for t, k, seed in ((1.0, 0, 3), (0.7, 5, 1), (0.0, 0, 0)):
            shown.clear()
            with e.hold_trait_notifications():
                e.controls["top_k"].value = k
                e.controls["seed"].value = seed
            e.controls["temperature"].value = t
            one_call = generate_text(
                e.writer, tok, "abc", N_NEW, t, k or None,
                generator=torch.Generator().manual_seed(seed), context=model.config.max_len,
            )  # fmt: skip
            assert e.state["text"] == one_call
            assert len(shown) >= 1 + (N_NEW - FIRST_CHUNK) // CHUNK  # it was shown growing
    finally:
        e.close()
