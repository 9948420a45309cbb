"""The reading site's build (tools/build_site.py), on a fixture course made for it.

A fixture course of two small generated lessons and a "Going further" companion, whose notebooks
hold every case the build handles: a described figure, an explorer with its saved widget state
(the course's anywidget Picture in one lesson, an ipywidgets Image in the other), a progress
widget, an exercise with a solution and hidden tests, math, links to headings, a stored output
that the source would not print today. It is built once per view (student, instructor) by the
function the README's command runs, with Sphinx's warnings as errors: the build does what it
says, and fails when it should (a figure without a description, a notebook no lesson names).
The course's own site: tests/test_site_course.py.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import matplotlib.pyplot as plt
import nbformat
import pytest
from _site import article_html, build_site, read_page  # tests/ is on sys.path (no __init__.py)

HUB = "https://hub.example.edu"  # a JupyterHub address for the launch links (never contacted)


# ---------------------------------------------------------------------------------------------
# The fixture course
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FakeLesson:
    """An entry shaped like helpers.course.Lesson (``further``: a "Going further" companion)."""

    number: int
    title: str
    notebook: str
    claims: tuple = ()
    explorer: str | None = None
    topic: str = ""
    further: bool = False


FIGURE_DESCRIPTION = "Line plot of the loss against the step: it falls from 4.2 to 1.3."
EXPLORER_DESCRIPTION = "Two sine curves of pair 4 against the position, 100 positions."
SOLUTION_LINE = "return torch_free_secret_answer(x) * 17  # the instructor's own line"
HIDDEN_LINE = 'record("fx_ex1", answer_hidden_case, 12345)'
STORED_ONLY = "stored output 41.5, not what the source prints today"


def _png(seed: int) -> str:
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=40)
    ax.plot([0, 1, 2], [seed, seed + 1, seed * 2])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _figure_output(png: str, description: str | None):
    """A figure output in the course's stored form (CONTRIBUTING.md, "Figure descriptions")."""
    if description is None:
        return nbformat.v4.new_output(
            "display_data", data={"image/png": png, "text/plain": "<Figure size 80x60 with 1 Axes>"}
        )
    return nbformat.v4.new_output(
        "display_data",
        data={
            "text/html": f'<img src="data:image/png;base64,{png}" alt="{html.escape(description)}">',
            "image/png": png,
            "text/plain": f"Figure: {description}",
        },
        metadata={"image/png": {"alt": description}},
    )


def _widget(model_name: str, state: dict, buffers=None) -> dict:
    model = {
        "model_module": "@jupyter-widgets/controls",
        "model_module_version": "2.0.0",
        "model_name": model_name,
        "state": state,
    }
    if buffers:
        model["buffers"] = buffers
    return model


def _picture(png: str, anywidget: bool) -> dict:
    """An explorer's picture in the saved state: the course's Picture (an anywidget model, its
    description the <img alt>) or ipywidgets' Image (its tooltip)."""
    buffers = [{"path": ["value"], "encoding": "base64", "data": png}]
    if anywidget:
        state = {"_esm": "export default {}", "format": "png", "description": EXPLORER_DESCRIPTION}
        return _widget("AnyModel", state, buffers) | {"model_module": "anywidget"}
    return _widget("ImageModel", {"format": "png", "tooltip": EXPLORER_DESCRIPTION}, buffers)


def _view(model_id: str, text: str):
    return nbformat.v4.new_output(
        "display_data",
        data={
            "application/vnd.jupyter.widget-view+json": {
                "model_id": model_id,
                "version_major": 2,
                "version_minor": 0,
            },
            "text/plain": text,
        },
    )


def _lesson_notebook(number: int, undescribed: bool = False):
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    still = _png(number + 10)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [
        md(
            f"# Lesson {number} · a fixture lesson\n\nA lead paragraph.\n\n## What you will learn\n\n"
            f"- something\n\n**What you need:** lesson {number - 1} and patience."
        ),
        md(
            "## The formula\n\nInline $e^{i\\pi} + 1 = 0$ and a display:\n\n"
            "$$\\mathrm{softmax}(z)_i = \\frac{e^{z_i}}{\\sum_j e^{z_j}}$$\n\n"
            "See [the exercise below](#Exercise-1:-a-fixture) and [Going further](#Going-further)."
        ),
        code(
            "print('hello')",
            outputs=[nbformat.v4.new_output("stream", name="stdout", text=STORED_ONLY + "\n")],
        ),
        code(
            "plot()",
            outputs=[_figure_output(_png(number), None if undescribed else FIGURE_DESCRIPTION)],
        ),
        code("run.train(3)", outputs=[_view("progress", "HBox(children=(IntProgress(...")]),
        code("widgets.fixture_explorer()", outputs=[_view("explorer", "Explorer(children=...")]),
        md("## Exercise 1: a fixture"),
        code(
            "def answer(x):\n    ### BEGIN SOLUTION\n    "
            + SOLUTION_LINE
            + "\n    ### END SOLUTION",
            metadata={
                "nbgrader": {
                    "solution": True,
                    "grade": False,
                    "locked": False,
                    "grade_id": "fx_ex1",
                    "schema_version": 3,
                }
            },
        ),
        code(
            "checks.check_answer(answer)\n### BEGIN HIDDEN TESTS\n"
            + HIDDEN_LINE
            + "\n### END HIDDEN TESTS",
            metadata={
                "nbgrader": {
                    "solution": False,
                    "grade": True,
                    "locked": True,
                    "points": 1,
                    "grade_id": "fx_ex1_check",
                    "schema_version": 3,
                }
            },
            outputs=[
                nbformat.v4.new_output("stream", name="stdout", text="✓ instructor verdict\n")
            ],
        ),
        md("## Recap\n\n- done"),
        md("## Going further\n\nMore."),
    ]
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.outputs:
            cell.execution_count = 1
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "version_major": 2,
            "version_minor": 0,
            "state": {
                "progress": _widget(
                    "HBoxModel", {"children": ["IPY_MODEL_bar", "IPY_MODEL_status"]}
                ),
                "bar": _widget(
                    "IntProgressModel", {"description": "training", "max": 3, "value": 3}
                ),
                "status": _widget("HTMLModel", {"value": "step 3 / 3 · loss 9.87654 · 1.2 s"}),
                "explorer": _widget(
                    "VBoxModel",
                    {"children": ["IPY_MODEL_title", "IPY_MODEL_controls", "IPY_MODEL_img"]},
                ),
                "title": _widget("HTMLModel", {"value": "<b>Lesson: a fixture explorer</b>"}),
                "controls": _widget("HBoxModel", {"children": ["IPY_MODEL_dm", "IPY_MODEL_kind"]}),
                "dm": _widget(
                    "AnyModel" if number == 4 else "IntSliderModel",
                    {"description": "d_model", "min": 8, "max": 512, "step": 8, "value": 64}
                    | ({"_esm": "export default {}"} if number == 4 else {}),
                ),
                "kind": _widget(
                    "AnyModel",
                    {
                        "description": "panel",
                        "_labels": ["sinusoidal", "rotary"],
                        "index": 1,
                        "_esm": "…",
                    },
                )
                if number == 4
                else _widget(
                    "DropdownModel",
                    {
                        "description": "panel",
                        "_options_labels": ["sinusoidal", "rotary"],
                        "index": 1,
                    },
                ),
                "img": _picture(still, anywidget=number == 4),
            },
        }
    }
    nbformat.validate(nb)
    return nb, still


def _companion_notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_markdown_cell("# Lesson 4, companion: more of it\n\nText.")]
    return nb


SETUP_CELL = "# colab_setup_marker: installs the course where helpers is missing"


def _fixture_course(folder: Path, undescribed: bool = False, unlisted: bool = False):
    folder.mkdir(parents=True)
    stills = {}
    for number, name in [(4, "04_fixture.ipynb"), (5, "05_fixture.ipynb")]:
        nb, stills[name] = _lesson_notebook(number, undescribed=undescribed and number == 5)
        if number == 4:  # the install cell for Colab and Kaggle (tools/colab_cell.py)
            setup = nbformat.v4.new_code_cell(SETUP_CELL, metadata={"tags": ["course-setup"]})
            nb.cells.insert(0, setup)
        nbformat.write(nb, str(folder / name))
    nbformat.write(_companion_notebook(), str(folder / "04b_companion.ipynb"))
    if unlisted:
        nbformat.write(_companion_notebook(), str(folder / "99_stray.ipynb"))
    lessons = (  # as helpers.course.NOTEBOOKS: each core lesson, then its companion
        FakeLesson(4, "Fixture four", "04_fixture.ipynb"),
        FakeLesson(4, "Fixture four, further", "04b_companion.ipynb", further=True),
        FakeLesson(5, "Fixture five", "05_fixture.ipynb"),
    )
    return lessons, stills


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    base = tmp_path_factory.mktemp("fixture-site")
    lessons, stills = _fixture_course(base / "notebooks")
    settings = build_site.Settings(
        repository="someone/course-fork", branch="spring", jupyterhub_url=HUB
    )
    build_site.build(base / "student", settings, lessons, base / "notebooks")
    teacher = dataclasses.replace(settings, solutions=True)
    build_site.build(base / "instructor", teacher, lessons, base / "notebooks")
    return base, stills


def test_site_pages_follow_the_course_order_with_companions(fixture_site):
    base, _ = fixture_site
    site = base / "student"
    for name in ("04_fixture", "04b_companion", "05_fixture"):
        assert (site / "notebooks" / f"{name}.html").exists(), name
    index = article_html(site / "index.html")
    order = [
        index.index(f"notebooks/{n}.html") for n in ("04_fixture", "04b_companion", "05_fixture")
    ]
    assert order == sorted(order), "index lists the pages out of course order"


def test_site_shows_stored_outputs_and_never_executes(fixture_site):
    """The page shows the notebook's stored output, not what running the source would print."""
    base, _ = fixture_site
    page = article_html(base / "student" / "notebooks" / "04_fixture.html")
    assert STORED_ONLY in html.unescape(page)
    assert "hello\n" not in html.unescape(page).replace("print('hello')", "")


def test_site_student_view_has_no_solution_no_hidden_tests_no_instructor_verdict(fixture_site):
    base, _ = fixture_site
    for path in [base / "student" / "notebooks" / "04_fixture.html"] + list(
        (base / "student" / "_downloads").rglob("04_fixture.ipynb")
    ):
        text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))
        assert "torch_free_secret_answer" not in text, path
        assert "answer_hidden_case" not in text and "BEGIN HIDDEN TESTS" not in text, path
        assert "instructor verdict" not in text, path
        assert "raise NotImplementedError()" in text, path  # the course's stub, as the release has


def test_site_instructor_view_folds_solutions_and_hidden_tests(fixture_site):
    base, _ = fixture_site
    page = html.unescape(article_html(base / "instructor" / "notebooks" / "04_fixture.html"))
    assert "torch_free_secret_answer" in page and "answer_hidden_case" in page
    assert "instructor verdict" in page
    # both exercise cells' sources sit inside a folded <details> block
    folded = re.findall(r"<details.*?</details>", page, flags=re.S)
    assert any("torch_free_secret_answer" in d for d in folded)
    assert any("answer_hidden_case" in d for d in folded)


@pytest.mark.parametrize("name", ["04_fixture", "05_fixture"])  # a Picture, an ipywidgets Image
def test_site_figure_alt_is_the_notebooks_description(fixture_site, name):
    base, stills = fixture_site
    site = base / "student"
    page = read_page(site / "notebooks" / f"{name}.html")
    images = [a for a in page.all("img") if "_images/" in a.get("src", "")]
    alts = sorted(a.get("alt") for a in images)
    assert alts == sorted([FIGURE_DESCRIPTION, EXPLORER_DESCRIPTION]), alts
    # the explorer's still is the PNG its picture widget held in the saved state, byte for byte
    still = next(a for a in images if a.get("alt") == EXPLORER_DESCRIPTION)
    served = (site / "notebooks" / still["src"]).resolve().read_bytes()
    assert served == base64.b64decode(stills[f"{name}.ipynb"])


def test_site_explorer_still_lists_controls_and_how_to_run_live(fixture_site):
    base, _ = fixture_site
    page = html.unescape(article_html(base / "student" / "notebooks" / "04_fixture.html"))
    assert "A still of the explorer" in page
    assert "d_model" in page and "a slider from 8 to 512, step 8, set to 64" in page
    assert "a choice of sinusoidal, rotary; set to rotary" in page
    # the progress widget is named, and its unverified status text (a loss, a time) is not shown
    assert "A live output (" in page and "IntProgress" in page
    assert "9.87654" not in page


def test_site_place_box_links_previous_next_needs_and_launchers(fixture_site):
    base, _ = fixture_site
    site = base / "student"
    path = site / "notebooks" / "04b_companion.html"
    box = html.unescape(article_html(path).split('class="course-place admonition"', 1)[1])
    assert "Going further, the companion of lesson 4" in box
    assert 'href="04_fixture.html"' in box and 'href="05_fixture.html"' in box
    four = html.unescape(article_html(site / "notebooks" / "04_fixture.html"))
    assert "What you need: lesson 3 and patience." in re.sub(r"<[^>]+>", "", four)
    further = re.search(r'<a class="reference internal" href="#([^"]+)">.{0,80}Going further', four)
    assert further and f'id="{further.group(1)}"' in four, "the box's Going further link resolves"
    hrefs = [
        a["href"] for a in read_page(site / "notebooks" / "04_fixture.html").all("a") if "href" in a
    ]
    binder = "https://mybinder.org/v2/gh/someone/course-fork/spring?urlpath=lab/tree/notebooks/04_fixture.ipynb"
    assert binder in hrefs
    colab = "https://colab.research.google.com/github/someone/course-fork/blob/spring/notebooks/04_fixture.ipynb"
    assert colab in hrefs
    hub = [h for h in hrefs if h.startswith(HUB)]
    assert hub, "no JupyterHub link although a hub is set"
    for link in hub:
        url = urlparse(link)
        assert url.path == "/hub/user-redirect/git-pull"
        query = parse_qs(url.query)
        assert query == {
            "repo": ["https://github.com/someone/course-fork"],
            "urlpath": ["lab/tree/course-fork/notebooks/04_fixture.ipynb"],
            "branch": ["spring"],
        }, query
    download = [h for h in hrefs if h.endswith("04_fixture.ipynb") and "_downloads" in h]
    assert download, "no download link for the notebook"
    nb = nbformat.read(str((path.parent / download[0]).resolve()), as_version=4)
    assert nb.metadata.get("widgets"), "the downloaded notebook lost its explorers' saved state"


def test_site_page_leaves_out_the_colab_install_cell_and_the_download_keeps_it(fixture_site):
    base, _ = fixture_site
    for view in ("student", "instructor"):
        page = html.unescape(article_html(base / view / "notebooks" / "04_fixture.html"))
        assert "colab_setup_marker" not in page, view
    (download,) = (base / "student" / "_downloads").rglob("04_fixture.ipynb")
    assert "colab_setup_marker" in download.read_text()


def test_site_loads_nothing_from_another_host(fixture_site):
    """Scripts, styles, images and fonts are the site's own files (MathJax included)."""
    base, _ = fixture_site
    site = base / "student"
    for path in site.rglob("*.html"):
        page = read_page(path)
        for tag, attr in (("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src")):
            for attrs in page.all(tag):
                value = attrs.get(attr) or ""
                if tag == "link" and attrs.get("rel") not in ("stylesheet", "preload", "icon"):
                    continue
                assert not re.match(r"(https?:)?//", value), f"{path.name}: {tag} {value}"
    assert (site / "_static" / "mathjax" / "tex-chtml.js").exists()


def test_site_strict_build_fails_on_undescribed_figure_and_unlisted_notebook(tmp_path):
    lessons, _ = _fixture_course(tmp_path / "notebooks", undescribed=True, unlisted=True)
    with pytest.raises(RuntimeError) as failed:
        build_site.build(tmp_path / "out", build_site.Settings(), lessons, tmp_path / "notebooks")
    message = str(failed.value)
    assert "notebooks/05_fixture: figure 1" in message and "has no description" in message
    assert "04_fixture: figure" not in message  # the described ones pass
    assert "notebooks/99_stray.ipynb belongs to no lesson" in message


def test_site_settings_refuse_bad_addresses():
    with pytest.raises(ValueError, match="repository must be OWNER/NAME"):
        build_site.Settings(repository="not a repo")
    with pytest.raises(ValueError, match="jupyterhub_url must be an http"):
        build_site.Settings(jupyterhub_url="hub.example.edu/path")
