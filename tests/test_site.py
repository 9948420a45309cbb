"""The reading site (tools/build_site.py): built offline from the stored outputs, student view.

Two kinds of site are built, each once per module, into temporary folders, by the same function
the README's command runs, with Sphinx's warnings as errors:

* a **fixture course** of two small generated lessons (one with a "Going further" companion), whose
  notebooks hold every case the build handles: a described figure, an explorer with its saved
  widget state, a progress widget, an exercise with a solution and hidden tests, math, a heading
  link, a "Going further" section, a stored output that the source would not print today. It
  shows the build does what it says, and fails when it should (a figure without a description,
  a notebook no lesson names);
* the **course itself**, every notebook of ``helpers.course.NOTEBOOKS``: each page is there with its
  title, every figure, every stored stream output, no solution and no hidden test.

The browser tests (marked ``browser``) open the course's site in Debian's Chromium from a server
on the loopback address, with every other address refused: per page the title, math rendered by
the site's own MathJax, every figure loaded with its description as alt text, every internal link
resolving, the launch links well formed; and an axe scan of every page (no serious or critical
violation, in the theme's light and its dark mode; the counts per page are written to
``test-artifacts/site_axe.json``, and a screenshot of each lesson page to
``test-artifacts/site_<notebook>.png``).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import http.server
import io
import json
import re
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, unquote, urldefrag, urlparse

import matplotlib.pyplot as plt
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import build_site  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
HUB = "https://hub.example.edu"  # a JupyterHub address for the launch links (never contacted)
STEP_TIMEOUT_MS = 120_000  # opening a page, typesetting its math: generous on a loaded machine


# ---------------------------------------------------------------------------------------------
# Reading built HTML
# ---------------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """Tags with their attributes, element ids, and the text outside <script>/<style>."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._skip = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)

    def all(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]


def _read(path: Path) -> _Page:
    return _Page(path.read_text())


def _article(path: Path) -> str:
    """The HTML of the page's main content (the lesson), without the theme's navigation."""
    text = path.read_text()
    start = text.index('<article class="bd-article">')
    return text[start : text.index("</article>", start)]


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


def _fixture_course(folder: Path, undescribed: bool = False, unlisted: bool = False):
    folder.mkdir(parents=True)
    stills = {}
    for number, name in [(4, "04_fixture.ipynb"), (5, "05_fixture.ipynb")]:
        nb, stills[name] = _lesson_notebook(number, undescribed=undescribed and number == 5)
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
    index = _article(site / "index.html")
    order = [
        index.index(f"notebooks/{n}.html") for n in ("04_fixture", "04b_companion", "05_fixture")
    ]
    assert order == sorted(order), "index lists the pages out of course order"


def test_site_shows_stored_outputs_and_never_executes(fixture_site):
    """The page shows the notebook's stored output, not what running the source would print."""
    base, _ = fixture_site
    page = _article(base / "student" / "notebooks" / "04_fixture.html")
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
    page = html.unescape(_article(base / "instructor" / "notebooks" / "04_fixture.html"))
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
    page = _read(site / "notebooks" / f"{name}.html")
    images = [a for a in page.all("img") if "_images/" in a.get("src", "")]
    alts = sorted(a.get("alt") for a in images)
    assert alts == sorted([FIGURE_DESCRIPTION, EXPLORER_DESCRIPTION]), alts
    # the explorer's still is the PNG its picture widget held in the saved state, byte for byte
    still = next(a for a in images if a.get("alt") == EXPLORER_DESCRIPTION)
    served = (site / "notebooks" / still["src"]).resolve().read_bytes()
    assert served == base64.b64decode(stills[f"{name}.ipynb"])


def test_site_explorer_still_lists_controls_and_how_to_run_live(fixture_site):
    base, _ = fixture_site
    page = html.unescape(_article(base / "student" / "notebooks" / "04_fixture.html"))
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
    box = html.unescape(_article(path).split('class="course-place admonition"', 1)[1])
    assert "Going further, the companion of lesson 4" in box
    assert 'href="04_fixture.html"' in box and 'href="05_fixture.html"' in box
    four = html.unescape(_article(site / "notebooks" / "04_fixture.html"))
    assert "What you need: lesson 3 and patience." in re.sub(r"<[^>]+>", "", four)
    further = re.search(r'<a class="reference internal" href="#([^"]+)">.{0,80}Going further', four)
    assert further and f'id="{further.group(1)}"' in four, "the box's Going further link resolves"
    hrefs = [
        a["href"] for a in _read(site / "notebooks" / "04_fixture.html").all("a") if "href" in a
    ]
    binder = "https://mybinder.org/v2/gh/someone/course-fork/spring?urlpath=lab/tree/notebooks/04_fixture.ipynb"
    assert binder in hrefs
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


def test_site_loads_nothing_from_another_host(fixture_site):
    """Scripts, styles, images and fonts are the site's own files (MathJax included)."""
    base, _ = fixture_site
    site = base / "student"
    for path in site.rglob("*.html"):
        page = _read(path)
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


# ---------------------------------------------------------------------------------------------
# The course's own site
# ---------------------------------------------------------------------------------------------

COURSE_PAGES = build_site.lesson_pages(build_site.course_notebooks())
REPO_URL = f"https://github.com/{build_site.REPOSITORY}"


def _page_id(page) -> str:
    return Path(page.notebook).stem


@pytest.fixture(scope="module")
def course_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("course-site") / "html"
    settings = build_site.Settings(jupyterhub_url=HUB)
    build_site.build(out, settings)
    return out


def _instructor(page) -> nbformat.NotebookNode:
    return nbformat.read(str(ROOT / "notebooks" / page.notebook), as_version=4)


def _plain(path: Path) -> str:
    """The article's text, tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", _article(path)))


def _expected_figures(page) -> dict[str, str | None]:
    """{sha256 of each image the page must show: its description}, from the committed notebook."""
    nb = build_site.student_view(_instructor(page))
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if "image/png" in output.get("data", {}):
                found[build_site.image_digest(output)] = build_site.figure_description(output)
            elif build_site.WIDGET_VIEW in output.get("data", {}):
                for still in build_site.explorer_still(nb, output, {}):
                    if "image/png" in still["data"]:
                        found[build_site.image_digest(still)] = build_site.figure_description(still)
    return found


@pytest.mark.parametrize("page", COURSE_PAGES, ids=_page_id)
def test_site_course_page_shows_the_lessons_stored_outputs(course_site, page):
    """Every stored text output of the lesson (printed lines and values' reprs: the text nbval
    compares) is on its page."""
    text = _plain(course_site / f"{page.docname}.html")
    nb = _instructor(page)
    missing = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or build_site._is_exercise_cell(cell):
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if output.get("output_type") == "stream":
                shown = output["text"]
            elif set(data) == {"text/plain"}:  # a value's repr, shown as text
                shown = data["text/plain"]
            else:
                continue
            for line in shown.splitlines():
                if line.strip() and line.strip() not in text:
                    missing.append((index, line.strip()[:80]))
    assert not missing, f"stored outputs not on the page (cell, line): {missing[:5]}"


@pytest.mark.parametrize("page", COURSE_PAGES, ids=_page_id)
def test_site_course_page_is_the_student_view(course_site, page):
    """No line of any solution, no hidden test, no verdict on the instructor's answers; one stub each."""
    text = _plain(course_site / f"{page.docname}.html")
    nb = _instructor(page)
    others = "\n".join(  # what the page shows anyway: the other cells and their stored outputs
        c.source
        + "".join(
            o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
            for o in c.get("outputs", [])
        )
        for c in nb.cells
        if not build_site._is_exercise_cell(c)
    )
    solutions = leaked = 0
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        region = re.findall(r"BEGIN SOLUTION\n(.*?)\n[^\n]*END SOLUTION", cell.source, flags=re.S)
        hidden = re.findall(
            r"BEGIN HIDDEN TESTS\n(.*?)\n[^\n]*END HIDDEN TESTS", cell.source, flags=re.S
        )
        if meta.get("solution") and cell.cell_type == "code":
            solutions += 1
        for block in region + hidden:
            for line in block.splitlines():
                line = line.strip()
                if len(line) >= 20 and line not in others and line in text:
                    leaked += 1
                    print("on the page:", line)
    assert leaked == 0
    assert text.count("raise NotImplementedError()") >= solutions  # the course's stub, each


@pytest.mark.parametrize("page", COURSE_PAGES, ids=_page_id)
def test_site_course_page_has_every_figure_with_its_description(course_site, page):
    path = course_site / f"{page.docname}.html"
    expected = _expected_figures(page)
    images = [a for a in _read(path).all("img") if "_images/" in a.get("src", "")]
    shown = {Path(a["src"]).stem: a.get("alt") for a in images}
    assert set(shown) == set(expected), "figures missing from the page or not from the notebook"
    undescribed = [d for d, text in expected.items() if not text]
    assert not undescribed, f"{len(undescribed)} figures of {page.notebook} have no description"
    for digest, text in expected.items():
        assert shown[digest] == text


# ---------------------------------------------------------------------------------------------
# In Chromium, offline
# ---------------------------------------------------------------------------------------------

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - requirements-dev.txt has it
    sync_playwright = None

_BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="browser tests need Debian's Chromium at /usr/bin/chromium "
        "(apt-get install chromium); playwright never downloads a browser here",
    ),
    pytest.mark.skipif(sync_playwright is None, reason="python playwright is not installed"),
]


def browser_marks(test):
    """Marked ``browser``; skipped, saying why, without Debian's Chromium or playwright."""
    for mark in _BROWSER_MARKS:
        test = mark(test)
    return test


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LAUNCH_BINDER = re.compile(
    r"https://mybinder\.org/v2/gh/(?P<repo>[\w.-]+/[\w.-]+)/(?P<branch>[\w.-]+)"
    r"\?urlpath=lab/tree/(?P<path>notebooks/[\w.-]+\.ipynb)"
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@dataclasses.dataclass
class Browsing:
    base: str  # http://127.0.0.1:PORT/
    page: object  # a playwright Page
    refused: list  # every request the page made to another address (all refused)
    axe: dict  # page -> {impact: count}


@pytest.fixture(scope="module")
def browsing(course_site):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(course_site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    refused: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    counts: dict = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.set_default_timeout(STEP_TIMEOUT_MS)

                def route(r):
                    if r.request.url.startswith(base):
                        r.continue_()
                    else:
                        refused.append(r.request.url)
                        r.abort()

                page.route("**/*", route)
                yield Browsing(base, page, refused, counts)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
        if counts:
            (ARTIFACTS / "site_axe.json").write_text(json.dumps(counts, indent=1, sort_keys=True))


def _open(browsing: Browsing, path: str):
    page = browsing.page
    page.emulate_media(color_scheme="light")
    response = page.goto(browsing.base + path)
    assert response is not None and response.status == 200, path
    # MathJax typesets after load: wait for it (pages without math have MathJax too)
    if page.locator("script[src*='mathjax/tex-chtml.js']").count():  # pages with math load it
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
    return page


@functools.cache
def _ids_of(path: Path) -> frozenset:
    return frozenset(_read(path).ids)


def _check_internal_links(browsing: Browsing, course_site: Path, hrefs: list[str], where: str):
    broken = []
    for href in hrefs:
        url, fragment = urldefrag(href)
        if not url.startswith(browsing.base):
            continue
        rel = unquote(urlparse(url).path).lstrip("/") or "index.html"
        target = course_site / rel
        if rel.endswith("/"):
            target = target / "index.html"
        if not target.is_file():
            broken.append(href)
        elif fragment and target.suffix == ".html" and fragment not in _ids_of(target):
            broken.append(href)
    assert not broken, f"{where}: links that resolve to nothing: {broken[:5]}"


@pytest.mark.parametrize("page", COURSE_PAGES, ids=_page_id)
@browser_marks
def test_site_lesson_page_reads_right_in_chromium_and_passes_axe(browsing, course_site, page):
    nb = _instructor(page)
    title = build_site._title(nb)
    tab = _open(browsing, f"{page.docname}.html")
    # the title
    assert tab.title().startswith(title), tab.title()
    h1 = tab.locator("article h1").first.evaluate("e => e.firstChild.textContent.trim()")
    assert h1 == title
    # math: every formula typeset by the site's MathJax, none left as TeX
    math = tab.evaluate(
        """() => {
        const all = [...document.querySelectorAll('article .math')];
        return {n: all.length, typeset: all.filter(e => e.querySelector('mjx-container')).length};
    }"""
    )
    has_math = any("$" in c.source for c in nb.cells if c.cell_type == "markdown")
    assert (math["n"] > 0) == has_math, math
    assert math["typeset"] == math["n"], f"{math['n'] - math['typeset']} formulas not rendered"
    raw = tab.evaluate(
        r"""() => {
        const out = [];
        for (const el of document.querySelectorAll('article p, article li, article td, article th, article h1, article h2, article h3')) {
            const copy = el.cloneNode(true);
            copy.querySelectorAll('code, pre, mjx-container, .math').forEach(x => x.remove());
            const t = copy.textContent;
            if (/\$[^$\s][^$]*\$|\\\(|\\\[/.test(t)) out.push(t.slice(0, 80));
        }
        return out;
    }"""
    )
    assert not raw, f"TeX left unrendered: {raw[:3]}"
    # figures: each one loaded, with the notebook's description as alt
    expected = _expected_figures(page)
    images = tab.evaluate(
        """() => [...document.querySelectorAll('article img')].map(i => ({
            src: i.getAttribute('src'), alt: i.getAttribute('alt'),
            ok: i.complete && i.naturalWidth > 0}))"""
    )
    figures = [i for i in images if "_images/" in (i["src"] or "")]
    assert sorted(Path(i["src"]).stem for i in figures) == sorted(expected)
    for image in figures:
        assert image["ok"], f"figure not loaded: {image['src']}"
        assert image["alt"] and image["alt"] == expected[Path(image["src"]).stem], image
    # links: every internal one resolves (page and anchor); launch links well formed
    hrefs = tab.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
    _check_internal_links(browsing, course_site, hrefs, page.notebook)
    binder = [h for h in hrefs if h.startswith("https://mybinder.org/")]
    assert binder, "no Binder link"
    for href in binder:
        match = LAUNCH_BINDER.fullmatch(href)
        assert match, href
        assert match["repo"] == build_site.REPOSITORY and match["branch"] == build_site.BRANCH
        assert match["path"] == f"notebooks/{page.notebook}" and (ROOT / match["path"]).exists()
    hub = [h for h in hrefs if h.startswith(HUB)]
    assert hub, "no JupyterHub link although the build set a hub"
    for href in hub:
        url = urlparse(href)
        assert url.path == "/hub/user-redirect/git-pull", href
        assert parse_qs(url.query) == {
            "repo": [REPO_URL],
            "urlpath": [
                f"lab/tree/{build_site.REPOSITORY.split('/')[1]}/notebooks/{page.notebook}"
            ],
            "branch": [build_site.BRANCH],
        }, href
    download = [h for h in hrefs if h.endswith(f"/{page.notebook}") and "/_downloads/" in h]
    assert download, "no download link for the notebook"
    assert tab.request.get(download[0]).status == 200
    tab.screenshot(path=str(ARTIFACTS / f"site_{_page_id(page)}.png"))
    _axe(browsing, tab, f"{page.docname}.html")
    assert not browsing.refused, f"the page asked another address: {browsing.refused[:3]}"


def _axe(browsing: Browsing, tab, path: str) -> None:
    """Axe scans of the page in the theme's light and dark modes (the reader's system setting
    picks one): no serious or critical violation in either; the counts are recorded."""
    from axe_playwright_python.sync_playwright import Axe

    bad = []
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        tab.wait_for_function(f"() => document.documentElement.dataset.theme === '{scheme}'")
        violations = Axe().run(tab).response["violations"]
        counts: dict[str, int] = {}
        for v in violations:
            counts[v["impact"]] = counts.get(v["impact"], 0) + len(v["nodes"])
        rules = sorted({v["id"] for v in violations})
        browsing.axe.setdefault(path, {})[scheme] = {"counts": counts, "rules": rules}
        bad += [
            (scheme, v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in violations
            if v["impact"] in ("serious", "critical")
        ]
    tab.emulate_media(color_scheme="light")
    assert not bad, f"{path}: axe finds {bad}"


@pytest.mark.parametrize("path", ["index.html", "search.html"])
@browser_marks
def test_site_home_and_search_pages_pass_axe_and_link_right(browsing, course_site, path):
    """The pages that are not lessons (each lesson page is scanned by the test above)."""
    tab = _open(browsing, path)
    _axe(browsing, tab, path)
    if path == "index.html":
        hrefs = tab.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
        lessons = {f"{browsing.base}{p.docname}.html" for p in COURSE_PAGES}
        assert lessons <= {urldefrag(h)[0] for h in hrefs}, "the home page misses a lesson"
        _check_internal_links(browsing, course_site, hrefs, path)
    assert not browsing.refused, f"{path} asked another address: {browsing.refused[:3]}"
