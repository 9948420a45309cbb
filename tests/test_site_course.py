"""The course's reading site: every notebook's page, built offline, read in Chromium offline.

The site of ``helpers.course.NOTEBOOKS`` is built once per test run (the README's command's
function, warnings as errors, a JupyterHub address set so that its launch links are there too),
and every pytest-xdist worker reads that one build: each test is a group of its own
(conftest.py), so the pages' Chromium runs spread over the workers:

* each page shows every stored text output of its notebook (what nbval compares), every figure
  with the notebook's description as its ``alt``, and no line of any solution or hidden test;
* in Chromium (marked ``browser``), from a server on the loopback address with every other
  address refused: per lesson page the title, every formula typeset by the site's own MathJax and
  no TeX left, every figure loaded with its description as ``alt``, every internal link and anchor
  resolving, the Binder, JupyterHub and download links well formed; and an axe scan of every page
  in the theme's light and dark modes (no serious or critical violation). The counts per page go
  to ``test-artifacts/site_axe.json``, a screenshot of each lesson page to
  ``test-artifacts/site_<notebook>.png``.

How the build itself behaves, on a fixture course: tests/test_site.py.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import html
import http.server
import json
import os
import re
import threading
from pathlib import Path
from urllib.parse import parse_qs, unquote, urldefrag, urlparse

import nbformat
import pytest
from _browsers import BROWSER_MARKS  # tests/ is on sys.path (no __init__.py)
from _site import (
    ROOT,
    article_html,
    build_site,
    read_page,
)

ARTIFACTS = ROOT / "test-artifacts"
HUB = "https://hub.example.edu"  # a JupyterHub address for the launch links (never contacted)
STEP_TIMEOUT_MS = 120_000  # opening a page, typesetting its math: generous on a loaded machine
AXE_COUNTS = "site_axe.json"  # in ARTIFACTS: axe's counts per page and colour scheme


# ---------------------------------------------------------------------------------------------
# The course's own site
# ---------------------------------------------------------------------------------------------

COURSE_PAGES = build_site.lesson_pages(build_site.course_notebooks())
REPO_URL = f"https://github.com/{build_site.REPOSITORY}"


def _page_id(page) -> str:
    return Path(page.notebook).stem


def _run_folder(tmp_path_factory) -> Path:
    """A folder of this test run that every pytest-xdist worker shares (the controller's base
    temporary folder; without xdist, the session's own)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def course_site(tmp_path_factory):
    """The site, built once per run: the first worker to take the lock builds it (and starts a
    fresh ``site_axe.json``), every other one waits for it and reads the same pages."""
    shared = _run_folder(tmp_path_factory) / "course-site"
    shared.mkdir(exist_ok=True)
    out = shared / "html"
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "built").exists():
            (ARTIFACTS / AXE_COUNTS).unlink(missing_ok=True)
            build_site.build(out, build_site.Settings(jupyterhub_url=HUB))
            (shared / "built").write_text("")
    return out


def _instructor(page) -> nbformat.NotebookNode:
    return nbformat.read(str(ROOT / "notebooks" / page.notebook), as_version=4)


def _plain(path: Path) -> str:
    """The article's text, tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", article_html(path)))


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
    images = [a for a in read_page(path).all("img") if "_images/" in a.get("src", "")]
    shown = {Path(a["src"]).stem: a.get("alt") for a in images}
    assert set(shown) == set(expected), "figures missing from the page or not from the notebook"
    undescribed = [d for d, text in expected.items() if not text]
    assert not undescribed, f"{len(undescribed)} figures of {page.notebook} have no description"
    for digest, text in expected.items():
        assert shown[digest] == text


# ---------------------------------------------------------------------------------------------
# In Chromium, offline
# ---------------------------------------------------------------------------------------------


def browser_marks(test):
    """Marked ``browser``; skipped, saying why, without Debian's Chromium or playwright."""
    for mark in BROWSER_MARKS:
        test = mark(test)
    return test


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


@pytest.fixture(scope="module")
def browsing(course_site, chromium):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(course_site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    refused: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        # the process's one Chromium (tests/conftest.py); this page has a context of its own
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.set_default_timeout(STEP_TIMEOUT_MS)

            def route(r):
                if r.request.url.startswith(base):
                    r.continue_()
                else:
                    refused.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            yield Browsing(base, page, refused)
        finally:
            page.close()  # and its context
    finally:
        server.shutdown()
        server.server_close()


def _record_axe_counts(course_site: Path, path: str, counts: dict) -> None:
    """Add one page's counts to ``test-artifacts/site_axe.json``: each page's test may run on
    another worker, so the file is read and written under the site's lock."""
    with open(course_site.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        file = ARTIFACTS / AXE_COUNTS
        every = json.loads(file.read_text()) if file.exists() else {}
        every[path] = counts
        file.write_text(json.dumps(every, indent=1, sort_keys=True))


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
    return frozenset(read_page(path).ids)


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
    _axe(browsing, course_site, tab, f"{page.docname}.html")
    assert not browsing.refused, f"the page asked another address: {browsing.refused[:3]}"


def _axe(browsing: Browsing, course_site: Path, tab, path: str) -> None:
    """Axe scans of the page in the theme's light and dark modes (the reader's system setting
    picks one): no serious or critical violation in either; the counts are recorded."""
    from axe_playwright_python.sync_playwright import Axe

    bad, recorded = [], {}
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        tab.wait_for_function(f"() => document.documentElement.dataset.theme === '{scheme}'")
        # the theme's colours change through CSS transitions ("transition: all"): axe scanning
        # mid-transition measures colours no reader settles on, so wait for them to finish
        tab.evaluate("() => Promise.all(document.getAnimations().map(a => a.finished))")
        violations = Axe().run(tab).response["violations"]
        counts: dict[str, int] = {}
        for v in violations:
            counts[v["impact"]] = counts.get(v["impact"], 0) + len(v["nodes"])
        rules = sorted({v["id"] for v in violations})
        recorded[scheme] = {"counts": counts, "rules": rules}
        bad += [
            (scheme, v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in violations
            if v["impact"] in ("serious", "critical")
        ]
    tab.emulate_media(color_scheme="light")
    _record_axe_counts(course_site, path, recorded)
    assert not bad, f"{path}: axe finds {bad}"


@pytest.mark.parametrize("path", ["index.html", "search.html"])
@browser_marks
def test_site_home_and_search_pages_pass_axe_and_link_right(browsing, course_site, path):
    """The pages that are not lessons (each lesson page is scanned by the test above)."""
    tab = _open(browsing, path)
    _axe(browsing, course_site, tab, path)
    if path == "index.html":
        hrefs = tab.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
        lessons = {f"{browsing.base}{p.docname}.html" for p in COURSE_PAGES}
        assert lessons <= {urldefrag(h)[0] for h in hrefs}, "the home page misses a lesson"
        _check_internal_links(browsing, course_site, hrefs, path)
    assert not browsing.refused, f"{path} asked another address: {browsing.refused[:3]}"
