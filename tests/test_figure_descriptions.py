"""Every figure says what it shows (CONTRIBUTING.md, "Figures"): the description mechanism of
``helpers/figures.py``, and every stored figure of every notebook carries a description."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from helpers.figures import (  # noqa: E402
    check_description,
    describe,
    description_of,
    figure_bundle,
    trend,
)


def _figure(ncols=1):
    fig = Figure(figsize=(3, 2))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    for ax in axes:
        ax.plot([0, 1, 2], [1, 2, 3])
    return fig, axes


def test_one_sentence_is_accepted_and_normalised():
    assert check_description("  The loss  falls\nfrom 4.2 to 2.1 nats. ") == (
        "The loss falls from 4.2 to 2.1 nats."
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        ("", "one sentence"),
        ("No full stop", "full stop"),
        ("Two sentences. Here is the second.", "second one"),
        ("x" * 400 + ".", "at most 400"),
    ],
)
def test_a_description_that_is_not_one_sentence_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        check_description(bad)
    with pytest.raises(TypeError, match="description must be a str"):
        check_description(None)


def test_describe_refuses_what_is_not_a_figure_or_axes():
    with pytest.raises(TypeError, match="target must be a matplotlib Figure or Axes"):
        describe("a figure", "A line.")


def test_the_figure_description_wins_over_the_panels_and_panels_are_joined_by_title():
    fig, (a, b) = _figure(2)
    assert description_of(fig) is None
    a.set_title("pre-norm")
    b.set_title("post-norm")
    describe(a, "The stream rises from block 0 to block 6.")
    describe(b, "The stream stays flat.")
    assert description_of(fig) == (
        "Two panels, left to right; pre-norm — the stream rises from block 0 to block 6; "
        "post-norm — the stream stays flat."
    )
    check_description(description_of(fig))  # the joined text is one sentence too
    describe(fig, "Both panels at once.")
    assert description_of(fig) == "Both panels at once."


def test_the_bundle_carries_the_same_description_in_its_three_forms():
    fig, (ax,) = _figure()
    describe(ax, 'A line that rises from 1 to 3, "quoted" & < 4.')
    data, metadata = figure_bundle(fig)
    text = 'A line that rises from 1 to 3, "quoted" & < 4.'
    assert metadata == {"image/png": {"alt": text}}
    assert data["text/plain"] == f"Figure: {text}"
    m = re.fullmatch(
        r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">', data["text/html"]
    )
    assert m, data["text/html"][:200]
    assert html.unescape(m.group(2)) == text
    assert m.group(1) == data["image/png"]
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_figure_nobody_described_has_no_bundle_and_keeps_matplotlibs_display():
    fig, _ = _figure()
    with pytest.raises(ValueError, match="has no description"):
        figure_bundle(fig)
    assert "_repr_mimebundle_" not in vars(fig)


def test_a_described_pyplot_figure_displays_its_bundle_through_ipython():
    from IPython.core.formatters import DisplayFormatter

    fig, ax = plt.subplots()
    try:
        ax.plot([3, 2, 1])
        describe(ax, "A line that falls.")
        data, md = DisplayFormatter().format(fig)
        assert data["text/plain"] == "Figure: A line that falls."
        assert 'alt="A line that falls."' in data["text/html"]
        assert md["image/png"] == {"alt": "A line that falls."}
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "values, word",
    [
        ([1, 2, 3], "rises"),
        ([3, 2, 1], "falls"),
        ([1.0, 5.0, 1.02], "stays flat"),
        ([0, 0], "stays flat"),
    ],
)
def test_trend_reads_first_against_last(values, word):
    assert trend(values) == word


# --- every stored figure of every notebook -------------------------------------------------------

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9]*.ipynb"))


def _image_outputs(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if any(k.startswith("image/") for k in data) or "<img" in str(
                data.get("text/html", "")
            ):
                yield index, out


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_stored_figure_has_one_description_in_all_its_forms(notebook):
    """An image output without a description (a figure nobody described), or whose alt
    metadata, HTML alt and text disagree, fails here with the cell's index."""
    problems = []
    for index, out in _image_outputs(notebook):
        data, md = out["data"], out.get("metadata", {})
        alt = md.get("image/png", {}).get("alt")
        if not alt:
            problems.append(f"cell {index}: an image output without metadata['image/png']['alt']")
            continue
        try:
            check_description(alt)
        except ValueError as e:
            problems.append(f"cell {index}: {e}")
        m = re.fullmatch(
            r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">',
            data.get("text/html", ""),
        )
        if not m or html.unescape(m.group(2)) != alt:
            problems.append(f"cell {index}: its text/html is not <img ... alt=the description>")
        elif m.group(1) != data.get("image/png"):
            problems.append(f"cell {index}: the PNG in text/html differs from image/png")
        if data.get("text/plain") != f"Figure: {alt}":
            problems.append(f"cell {index}: text/plain is {data.get('text/plain')!r}")
    assert not problems, "\n".join(problems)


def test_the_notebook_check_fails_on_a_figure_nobody_described(tmp_path):
    """The check above, on a notebook written here with one plain matplotlib PNG output."""
    import nbformat

    fig, _ = _figure()
    png = base64.b64encode(__import__("helpers.figures", fromlist=["png_bytes"]).png_bytes(fig))
    cell = nbformat.v4.new_code_cell("plt.show()")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"image/png": png.decode(), "text/plain": "<Figure>"}
        )
    ]
    path = tmp_path / "04_fixture.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    with pytest.raises(AssertionError, match=r"cell 0: an image output without"):
        test_every_stored_figure_has_one_description_in_all_its_forms(path)
