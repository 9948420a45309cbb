"""What the instructor's browser and the feedback render from a student is inert, and the feedback
shows no hidden input (tools/grading/sanitize.py, tools/grading/feedbackoutputs.py).

Fast tests first: a notebook holding every kind of active content a student can put in outputs,
markdown, attachments, widget state and comments is rendered with nbgrader's own formgrade and
feedback templates; unsanitised, each payload is live (in a script, an attribute, an iframe: the
vectors are real), sanitised, none is, and the course's own figures, tables and links stay.

Then one small nbgrader course through the documented commands (release, collect, autograde with
an instructor's secret, generate_feedback), with an attacker among honest students:

* the stored autograded notebook holds no active output type, no raw HTML in the student's
  markdown and no widget state;
* in Chromium, the instructor opens the attacker's submission in the formgrader (a Jupyter server
  with nbgrader's formgrader, on loopback with a token): no payload runs (each would mark the page
  and call the formgrader's API to give every grade its maximum), the gradebook's scores are
  unchanged, and the formgrader's own page works;
* the feedback pages opened in Chromium run no student script;
* the feedback shows neither the secret-drawn hidden inputs nor what the student's code printed
  while it held them, though the autograded notebook shows that it did.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest
import torch
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

import nbgrader

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str):
    """``tools/NAME.py`` loaded from its file (tools/ is not an installed package; this module
    edits no import path: ``coursework.py`` itself makes its ``grading`` package importable)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


cw = _tool("coursework")
from _browsers import CHROMIUM, free_port, stop_group  # noqa: E402
from _grading_notebooks import code_cell, python_notebook, run_coursework  # noqa: E402
from grading.feedbackoutputs import NOTE, hide_outputs_after_hidden_tests  # noqa: E402
from grading.sanitize import (  # noqa: E402
    clean_html,
    inert_markdown,
    inert_output,
    sanitize_notebook,
)

from helpers.course import Lesson  # noqa: E402
from helpers.grading import derive_seed  # noqa: E402

TEMPLATES = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"

# ---- the payloads ------------------------------------------------------------------------------
#: What every payload runs: marks the page (the top window, from an iframe too), logs, and, in the
#: formgrader, gives every grade of the submission its maximum through the formgrader's API with
#: the instructor's session (what the attack of issue 36 did).
SCRIPT = """(function () {
  var w = window.top, d = w.document.documentElement;
  d.setAttribute('data-pwned', (d.getAttribute('data-pwned') || '') + 'x');
  console.log('PWNED');
  var m = w.location.pathname.match(/\\/formgrader\\/submissions\\/([^/]+)/);
  if (!m) { return; }
  var base = w.location.pathname.split('/formgrader/')[0];
  var x = (w.document.cookie.match(/_xsrf=([^;]*)/) || [])[1] || '';
  var h = {'X-XSRFToken': decodeURIComponent(x), 'X-CSRFToken': decodeURIComponent(x)};
  w.fetch(base + '/formgrader/api/grades?submission_id=' + m[1], {headers: h})
    .then(function (r) { return r.json(); })
    .then(function (grades) { grades.forEach(function (g) {
      w.fetch(base + '/formgrader/api/grade/' + g.id, {method: 'PUT', headers: h,
        body: JSON.stringify({manual_score: g.max_score, extra_credit: 0})});
    }); });
})();"""
RUN = "eval(atob('" + base64.b64encode(SCRIPT.encode()).decode() + "'))"
#: A string every live payload carries, in an attribute or a script: it must appear only as text.
MARK = "atob("

HTML_VECTORS = [
    f'<img src=x onerror="{RUN}">',
    f'<svg onload="{RUN}"><circle r="3"/></svg>',
    f'<iframe srcdoc="<script>{RUN}</script>"></iframe>',
    f'<details open ontoggle="{RUN}"><summary>more</summary></details>',
    f'<meta http-equiv="refresh" content="0;url=javascript:{RUN}">',
    f'<style>@import url("javascript:{RUN}");</style>',
    f'<a href="javascript:{RUN}">a link</a>',
    f"<script>{RUN}</script>",
    f'<object data="javascript:{RUN}"></object>',
    f'<math><a xlink:href="javascript:{RUN}">m</a></math>',
    f'<img src="data:image/svg+xml;base64,{base64.b64encode(b"<svg/>").decode()}" onload="{RUN}">',
]
MARKDOWN_VECTORS = [
    *HTML_VECTORS,
    f"[click me](javascript:{RUN})",
    f"<javascript:{RUN}>",
    f"![an image](javascript:{RUN})",
    f"[ref link][r]\n\n[r]: javascript:{RUN}",
]
SVG = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{RUN}"><script>{RUN}</script></svg>'
LATEX = rf"$\href{{javascript:{RUN}}}{{click}}$"
PNG = (  # one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
COURSE_FIGURE = f'<img src="data:image/png;base64,{PNG}" alt="course figure">'
COURSE_TABLE = (
    "<table><thead><tr><th>d</th></tr></thead><tbody><tr><td>64</td></tr></tbody></table>"
)
WIDGET_STATE = {
    "application/vnd.jupyter.widget-state+json": {
        "version_major": 2,
        "version_minor": 0,
        "state": {
            "m1": {
                "model_name": "HTMLModel",
                "model_module": "@jupyter-widgets/controls",
                "model_module_version": "2.0.0",
                "state": {"value": HTML_VECTORS[0]},
            }
        },
    }
}


def active_places(html: str, mark: str = MARK) -> list[str]:
    """Where ``mark`` sits in ``html`` somewhere a browser could run it: an attribute's value, a
    script, a style, an iframe, object or embed (anything but a text node in ordinary markup)."""
    found = []
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(True):
        for name, value in tag.attrs.items():
            text = " ".join(value) if isinstance(value, list) else str(value)
            if mark in text:
                found.append(f"<{tag.name} {name}=...>")
        if tag.name in ("script", "style", "iframe", "object", "embed", "svg", "math"):
            if mark in tag.decode_contents():
                found.append(f"<{tag.name}> content")
    return found


def display(data: dict, kind: str = "display_data") -> dict:
    out = nbformat.v4.new_output(kind, data=data)
    if kind == "execute_result":
        out["execution_count"] = 1
    return out


def attacked_notebook() -> nbformat.NotebookNode:
    """A graded notebook as a student could leave it: every vector in outputs and markdown, a
    course cell with the course's own figure, table and link, and a comment quoting a name."""
    nb = python_notebook([])
    course = code_cell("show_figure()")
    course.outputs = [
        display({"text/html": COURSE_FIGURE, "image/png": PNG, "text/plain": "<Figure>"}),
        display({"text/html": COURSE_TABLE, "text/plain": "table"}),
    ]
    course_md = nbformat.v4.new_markdown_cell("See [the guide](https://example.org/guide) first.")
    answer = code_cell("def double(x): ...", solution=True, grade=True, grade_id="ex", points=2)
    answer.metadata.nbgrader.update(score=0, comment=f"✗ the answer is a {HTML_VECTORS[0]}")
    answer.outputs = [
        *(display({"text/html": v, "text/plain": "x"}) for v in HTML_VECTORS),
        display({"application/javascript": RUN}),
        display({"image/svg+xml": SVG, "text/plain": "svg"}),
        display({"text/markdown": "\n\n".join(MARKDOWN_VECTORS)}),
        display({"text/latex": LATEX}),
        display(
            {
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": "m1",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/plain": "HTML(value=...)",
            }
        ),
        display({"text/html": HTML_VECTORS[0]}, "execute_result"),
        nbformat.v4.new_output("stream", name="stdout", text=f"printed {HTML_VECTORS[0]}\n"),
    ]
    student_md = nbformat.v4.new_markdown_cell("\n\n".join(MARKDOWN_VECTORS))
    student_md.attachments = {
        "x.svg": {"image/svg+xml": base64.b64encode(SVG.encode()).decode()},
        "x.png": {"image/png": PNG},
    }
    raw = nbformat.v4.new_raw_cell("\n".join(HTML_VECTORS))
    raw.metadata["raw_mimetype"] = "text/html"
    nb.cells = [course_md, course, answer, student_md, raw]
    nb.metadata["widgets"] = copy.deepcopy(WIDGET_STATE)
    return nb


def render(nb, template: str) -> str:
    """``nb`` as nbgrader's formgrader (``formgrade``) or feedback (``feedback``) renders it."""
    css = TEMPLATES.parent / "static" / "node_modules" / "bootstrap" / "dist" / "css"
    exporter = HTMLExporter(
        template_name=template,
        extra_template_basedirs=[str(TEMPLATES)],
        extra_template_paths=[str(css)],
    )
    resources = {
        "nbgrader": {"notebook": "n", "score": 0, "max_score": 2, "late_penalty": 0},
        "base_url": "",
        "assignment_id": "a",
        "notebook_id": "n",
        "submission_id": "s",
        "index": 0,
        "total": 1,
        "student": "st",
        "last_name": "",
        "first_name": "",
        "notebook_path": "n.ipynb",
    }
    html, _ = exporter.from_notebook_node(nb, resources=resources)
    return html


# ---- fast: the rules, on nbgrader's own templates ---------------------------------------------------
@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_sanitize_every_vector_is_live_unsanitised_and_inert_sanitised(template):
    raw = render(attacked_notebook(), template)
    live = active_places(raw)
    # the vectors are real: unsanitised, nbgrader's template puts them where a browser runs them
    for where in (
        "<img onerror=...>",
        "<iframe srcdoc=...>",
        "<script> content",
        "<svg onload=...>",
    ):
        assert where in live, (where, live)
    nb = sanitize_notebook(
        attacked_notebook(), {"See [the guide](https://example.org/guide) first."}
    )
    html = render(nb, template)
    assert active_places(html) == [], active_places(html)
    soup = BeautifulSoup(html, "html.parser")
    assert not soup.find_all(["iframe", "object", "embed", "base", "form"])
    assert not soup.find_all("meta", attrs={"http-equiv": True})
    assert not [a for a in soup.find_all("a") if "javascript" in a.get("href", "").lower()]
    # the course's own outputs and markdown stay readable: the figure (data URI, alt text), the
    # table, the link of a markdown cell that is the release's own
    figure = soup.find("img", alt="course figure")
    assert figure is not None and figure["src"].startswith("data:image/png;base64,"), html[:500]
    assert soup.find("th", string="d") is not None
    assert soup.find("a", href="https://example.org/guide") is not None
    assert "printed <img" in soup.get_text()  # the student's print, as text


def test_sanitize_a_markdown_cell_the_student_wrote_has_no_link_image_or_html():
    from nbconvert.filters.markdown import markdown2html

    for vector in MARKDOWN_VECTORS:
        html = markdown2html(inert_markdown(vector))
        soup = BeautifulSoup(html, "html.parser")
        assert [t.name for t in soup.find_all(True) if t.name not in ("p",)] == [], (vector, html)
        assert MARK in soup.get_text(), html  # shown, as text
    # MathJax's \href makes a link inside math, where markdown leaves the text alone
    for math in (r"$\href{javascript:alert(1)}{x}$", "$\\href{JavaScript\t :alert(1)}{x}$"):
        assert not re.search(
            r"j\s*a\s*v\s*a\s*s\s*c\s*r\s*i\s*p\s*t\s*:", inert_markdown(math), re.I
        )


def test_sanitize_outputs_keep_text_images_and_clean_html_and_drop_the_rest():
    kept = inert_output(display({"text/plain": "1", "image/png": PNG, "text/html": COURSE_TABLE}))
    assert set(kept["data"]) == {"text/plain", "image/png", "text/html"}
    assert kept["data"]["text/html"] == COURSE_TABLE
    dropped = inert_output(display({"application/javascript": RUN, "image/svg+xml": SVG}))
    assert set(dropped["data"]) == {"text/plain"}
    assert "application/javascript" in dropped["data"]["text/plain"]
    bad_png = inert_output(display({"image/png": '"><script>x</script>', "text/plain": "p"}))
    assert "image/png" not in bad_png["data"]
    meta = inert_output(
        {
            "output_type": "display_data",
            "data": {"image/png": PNG},
            "metadata": {"image/png": {"width": 10, "filenames": {"image/png": "/etc/passwd"}}},
        }
    )
    assert meta["metadata"] == {"image/png": {"width": 10}}
    assert (
        clean_html('<a href="https://e.org" onclick="x">e</a>') == '<a href="https://e.org">e</a>'
    )


def test_sanitize_the_lessons_own_outputs_read_the_same():
    """Every HTML output the committed lessons store (figures with alt text, the audit's tables)
    keeps its text and its images once cleaned; only widget views are dropped."""
    checked = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if "data" not in out:
                    continue
                data, kept = out["data"], inert_output(out)["data"]
                assert set(data) - set(kept) <= {"application/vnd.jupyter.widget-view+json"}
                if "text/html" not in data:
                    continue
                before = BeautifulSoup(data["text/html"], "html.parser")
                after = BeautifulSoup(kept["text/html"], "html.parser")
                assert after.get_text() == before.get_text(), (path.name, kept["text/html"][:300])
                images = [(i.get("src"), i.get("alt")) for i in before.find_all("img")]
                assert [(i.get("src"), i.get("alt")) for i in after.find_all("img")] == images
                checked += 1
    assert checked >= 10, checked


def test_sanitize_a_verdict_quoting_a_name_the_student_chose_opens_no_html():
    """The grader's comment quotes the type of the answer (a class the student may name with
    HTML): rendered as markdown, as nbgrader's feedback does, it is text."""
    from types import SimpleNamespace

    from grading.verdicts import judge_all
    from nbconvert.filters.markdown import markdown2html

    want = {"tensor": {"shape": [1], "dtype": "float32", "data": [1.0]}}
    reference = {"x": {0: [{"exercise": "x", "case": 0, "inputs": "d", "value": want}]}}
    got = {"unsupported": HTML_VECTORS[0]}
    entry = {"exercise": "x", "case": 0, "inputs": "d", "value": got, "calls": [], "seq": 0}
    records = SimpleNamespace(cases=[entry], flags=[], broken_at=None)
    verdict = judge_all(["x"], reference, records)["x"]
    assert not verdict.correct and "does not accept" in verdict.message
    html = markdown2html(verdict.message)
    assert active_places(html) == [] and MARK in BeautifulSoup(html, "html.parser").get_text()


def test_sanitize_refuses_what_is_not_a_notebook_output_or_text():
    with pytest.raises(TypeError, match="output must be an nbformat output"):
        inert_output({"data": {}})
    with pytest.raises(TypeError, match="html must be a str"):
        clean_html(b"<b>")
    with pytest.raises(TypeError, match="text must be a str"):
        inert_markdown(None)
    with pytest.raises(TypeError, match="nb must be an nbformat notebook"):
        sanitize_notebook({"cells": []}, None)
    with pytest.raises(TypeError, match="nb must be an nbformat notebook"):
        hide_outputs_after_hidden_tests([])


def test_feedback_outputs_after_the_first_check_are_removed_with_a_note():
    nb = python_notebook(
        [
            code_cell("a = 1"),
            code_cell("def f(x): ...", solution=True, grade=False, grade_id="s1"),
            code_cell("check(f)", solution=False, grade=True, grade_id="c1", points=1),
            code_cell("print(kept_inputs)"),
            code_cell("check(g)", solution=False, grade=True, grade_id="c2", points=1),
        ]
    )
    for i, cell in enumerate(nb.cells):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"out {i}\n")]
    hide_outputs_after_hidden_tests(nb)
    texts = ["".join(o.get("text", "") for o in c.get("outputs", [])) for c in nb.cells]
    assert texts == ["out 0\n", "out 1\n", "out 2\n", "", "", ""]
    assert nb.cells[3].cell_type == "markdown" and nb.cells[3].source == NOTE


# ---- a small course, through the documented commands ----------------------------------------------
LESSON = Lesson(99, "synthetic exercise", "synthetic.ipynb", (), None, "synthetic")
SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
CHECK = (
    "assert torch.allclose(double(torch.ones(2)), 2 * torch.ones(2)), 'double(ones) is not 2'\n"
    "print('✓ passed')\n"
    "### BEGIN HIDDEN TESTS\n"
    "_g = torch.Generator().manual_seed(hidden_seed('s_ex1', 5))\n"
    "record('s_ex1', double, torch.randn(3, generator=_g, dtype=torch.float64))\n"
    "### END HIDDEN TESTS"
)
COURSE_FIRST = (
    "import torch\n"
    "from IPython.display import display\n"
    "from helpers.grading import hidden_cases, hidden_seed, record\n"
    f"display({{'text/html': {COURSE_FIGURE!r}, 'image/png': {PNG!r}, 'text/plain': 'figure'}},"
    " raw=True)"
)
ATTACK = f"""from IPython.display import HTML, Javascript, display
_seen = []
class _Evil:
    pass
_Evil.__name__ = {HTML_VECTORS[0]!r}
def double(x):
    if x.numel() == 2 and bool((x == 1).all()):
        return 2 * x
    _seen.append(x.tolist())
    print("HIDDEN" + "-PRINT", x.tolist())
    return _Evil()
for _v in {HTML_VECTORS!r}:
    display(HTML(_v))
display(Javascript({RUN!r}))
display({{"image/svg+xml": {SVG!r}, "text/plain": "svg"}}, raw=True)
display({{"text/markdown": {chr(10).join(MARKDOWN_VECTORS)!r}}}, raw=True)
display({{"text/latex": {LATEX!r}}}, raw=True)
display({{"application/vnd.jupyter.widget-view+json": {{"model_id": "m1", "version_major": 2,
    "version_minor": 0}}, "text/plain": "HTML(value=...)"}}, raw=True)
HTML({HTML_VECTORS[2]!r})"""
LEAK = "print('CAPT' + 'URED', _seen)"  # what it prints is not in its source


def _scores(out: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+): (\d+/\d+)", out, flags=re.M))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`")
    base = tmp_path_factory.mktemp("inert")
    notebooks, course, downloads = base / "notebooks", base / "course", base / "downloads"
    for folder in (notebooks, downloads):
        folder.mkdir()
    nb = python_notebook(
        [
            code_cell(COURSE_FIRST),
            code_cell(SOLUTION, solution=True, grade=False, locked=False, grade_id="s_ex1"),
            code_cell(CHECK, solution=False, grade=True, locked=True, points=2, grade_id="s_ex1_c"),
            nbformat.v4.new_markdown_cell("See [the guide](https://example.org/guide)."),
        ]
    )
    nbformat.write(nb, notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    release_nb = nbformat.read(cw.student_notebook(LESSON, course), as_version=4)

    def submission(answer: str) -> nbformat.NotebookNode:
        sub = copy.deepcopy(release_nb)
        sub.cells[1].source = answer
        return sub

    attacker = submission(ATTACK)
    attacker.cells.insert(2, nbformat.v4.new_markdown_cell("\n\n".join(MARKDOWN_VECTORS)))
    attacker.cells.append(code_cell(LEAK))
    attacker.metadata["widgets"] = copy.deepcopy(WIDGET_STATE)
    subs = {
        "instructor": nbformat.read(notebooks / LESSON.notebook, as_version=4),
        "honest": submission("def double(x):\n    return x + x"),
        "attacker": attacker,
    }
    for name, sub in subs.items():
        nbformat.write(sub, downloads / f"{name}.ipynb")
    run = lambda *a: run_coursework(cw, LESSON, course, *a)  # noqa: E731
    assert run("collect", "lesson99", str(downloads)).returncode == 0

    secret = base / "secret" / "hidden-cases.key"
    secret.parent.mkdir(mode=0o700)
    secret.write_text("the instructor's secret for the inert tests, 42\n", encoding="utf-8")
    secret.chmod(0o600)
    os.environ["COURSE_GRADING_SECRET_FILE"] = str(secret)
    try:
        graded = run("autograde", "lesson99", "--jobs", "2")
        scores = run("scores", "lesson99").stdout
        feedback = cw.nbgrader(course, "generate_feedback", "lesson99", "--force", check=False)
    finally:
        del os.environ["COURSE_GRADING_SECRET_FILE"]
    seed = derive_seed(secret.read_bytes().strip(), "s_ex1")
    hidden = torch.randn(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return {
        "course": course,
        "graded": graded,
        "scores": _scores(scores),
        "feedback": feedback,
        "hidden": hidden.tolist(),
        "public": torch.randn(
            3, generator=torch.Generator().manual_seed(5), dtype=torch.float64
        ).tolist(),
    }


def _autograded(course: dict, student: str) -> nbformat.NotebookNode:
    path = course["course"] / "autograded" / student / "lesson99" / LESSON.notebook
    return nbformat.read(path, as_version=4)


def _feedback(course: dict, student: str) -> Path:
    return course["course"] / "feedback" / student / "lesson99" / "synthetic.html"


def _grades(course: dict, student: str) -> list[tuple]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course['course'] / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook("synthetic", "lesson99", student)
        return sorted((g.name, g.auto_score, g.manual_score, g.extra_credit) for g in nb.grades)


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"
)


@needs_bwrap
@pytest.mark.slow
def test_inert_the_course_grades_as_before_with_an_attacker_among_honest_students(course):
    assert course["scores"] == {"instructor": "2/2", "honest": "2/2", "attacker": "0/2"}, (
        course["graded"].stdout[-3000:] + course["graded"].stderr[-3000:]
    )
    assert course["feedback"].returncode == 0, course["feedback"].stderr[-3000:]


@needs_bwrap
@pytest.mark.slow
def test_inert_the_stored_autograded_notebook_holds_no_active_content(course):
    nb = _autograded(course, "attacker")
    types = {m for c in nb.cells for o in c.get("outputs", []) for m in o.get("data", {})}
    assert types <= {"text/plain", "text/html", "image/png"}, types
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "widgets" not in nb.metadata
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            assert "<" not in cell.source, cell.source[:300]
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html")
            if html:
                assert active_places(html) == [], html[:300]
    # the student's displays were made and kept as text; the course's figure stays an image
    assert "HIDDEN-PRINT" not in printed  # the hidden tests' own output is kept out (execute.py)
    shown = "".join(
        o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", [])
    )
    assert "&lt;iframe srcdoc=" in shown  # the student's displays, kept as escaped text
    figure = nb.cells[0].outputs[0]["data"]["text/html"]
    assert figure.startswith('<img src="data:image/png;base64,') and 'alt="course figure"' in figure


@needs_bwrap
@pytest.mark.slow
def test_inert_the_feedback_shows_no_hidden_input_nor_what_the_student_printed_holding_one(course):
    leaked = "".join(
        "".join(o.get("text", "") for o in c.get("outputs", []))
        for c in _autograded(course, "attacker").cells
    )
    # the leak path is real: the student's cell after the check printed the hidden inputs, and
    # the instructor's autograded notebook shows it
    assert "CAPTURED" in leaked and repr(course["hidden"][0]) in leaked, leaked[-500:]
    assert course["hidden"] != course["public"]  # drawn from the secret
    for student in ("instructor", "honest", "attacker"):
        html = _feedback(course, student).read_text(encoding="utf-8")
        for value in course["hidden"]:
            assert repr(value) not in html and f"{value:.4f}" not in html, (student, value)
        for printed in ("CAPTURED", "HIDDEN-PRINT", "BEGIN HIDDEN", "hidden_seed('s_ex1'"):
            assert printed not in html, (student, printed)
        assert "✓ passed" in html  # the first check's visible part ran before any hidden test
    attacker = _feedback(course, "attacker").read_text(encoding="utf-8")
    assert "they ran after the hidden tests" in attacker  # the note, after the check cell
    assert "does not accept" in attacker  # the verdict, as the exercise's comment
    assert 'href="https://example.org/guide"' in attacker  # the course's markdown keeps its link
    assert active_places(attacker) == [], active_places(attacker)


@needs_bwrap
@needs_chromium
@pytest.mark.browser
@pytest.mark.slow
def test_inert_feedback_pages_run_no_student_script_in_chromium(course, chromium):
    for student in ("attacker", "honest"):
        page = chromium.new_page()  # a context of its own, closed with the page
        try:
            logs: list[str] = []
            page.on("console", lambda msg, logs=logs: logs.append(msg.text))
            page.on("dialog", lambda d, logs=logs: (logs.append("dialog"), d.dismiss()))
            page.goto(_feedback(course, student).as_uri())
            page.wait_for_timeout(1500)
            pwned = page.evaluate("document.documentElement.getAttribute('data-pwned')")
            assert pwned is None and "PWNED" not in logs, (student, pwned, logs)
            assert page.evaluate("document.querySelectorAll('iframe, object, embed').length") == 0
            body = page.inner_text("body")
            assert "Comments" in body or student == "honest"
        finally:
            page.close()


@pytest.fixture(scope="module")
def formgrader(course):
    """A Jupyter server with nbgrader's formgrader, started in the course folder (so that it
    reads the course's nbgrader_config.py, as docs/INSTRUCTORS.md says), on loopback, a token."""
    home = course["course"].parent / "server-home"
    home.mkdir(exist_ok=True)
    port, token = free_port(), secrets.token_hex(24)
    log = home / "server.log"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env.update(JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_DATA_DIR=str(home / "data"))
    cmd = [sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root"]
    cmd += ["--ServerApp.ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0"]
    cmd += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course['course']}"]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=course["course"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                req = urllib.request.Request(
                    f"{url}/api/status", headers={"Authorization": f"token {token}"}
                )
                urllib.request.urlopen(req, timeout=5).read()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"the server did not answer in 90 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield {"url": url, "token": token, "log": log}
    finally:
        stop_group(proc)


@needs_bwrap
@needs_chromium
@pytest.mark.browser
@pytest.mark.slow
def test_inert_the_instructor_opens_the_submission_in_the_formgrader_and_nothing_runs(
    course, formgrader, chromium
):
    from nbgrader.api import Gradebook

    before = _grades(course, "attacker")
    assert all(manual is None for _, _, manual, _ in before), before
    with Gradebook(f"sqlite:///{course['course'] / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook("synthetic", "lesson99", "attacker").id
    page = chromium.new_page()  # a context of its own, closed with the page
    try:
        logs, api_writes = [], []
        page.on("console", lambda msg: logs.append(msg.text))
        page.on("dialog", lambda dialog: (logs.append("dialog"), dialog.dismiss()))
        page.on(
            "request",
            lambda r: api_writes.append(r.url) if r.method in ("PUT", "POST") else None,
        )
        base = formgrader["url"]
        # the instructor logs in (the token sets the session cookie), then opens the submission
        page.goto(f"{base}/formgrader?token={formgrader['token']}")
        page.goto(f"{base}/formgrader/submissions/{submission}/")
        # the formgrader's own page works: its script loaded the grades into the form
        page.wait_for_function(
            "() => { const s = document.querySelector('input.score');"
            " return s !== null && s.placeholder === '0'; }",
            timeout=60_000,
        )
        page.wait_for_timeout(3000)  # what a payload would do has had time to happen
        pwned = page.evaluate("document.documentElement.getAttribute('data-pwned')")
        places = page.evaluate(
            """(mark) => {
                const out = [];
                for (const el of document.querySelectorAll('*')) {
                    for (const a of el.attributes) {
                        // a form field's text (the comment box shows the verdict) is not run
                        if (['placeholder', 'value'].includes(a.name)) continue;
                        if (a.value.includes(mark)) out.push(el.tagName + ' ' + a.name);
                    }
                    if (['SCRIPT', 'STYLE', 'IFRAME', 'OBJECT', 'EMBED'].includes(el.tagName)
                        && el.innerHTML.includes(mark)) out.push(el.tagName);
                }
                return out;
            }""",
            MARK,
        )
        body = page.inner_text("body")
        figures = page.evaluate("document.querySelectorAll('img[alt=\"course figure\"]').length")
        links = page.evaluate(
            "document.querySelectorAll('a[href=\"https://example.org/guide\"]').length"
        )
        page.close()
    finally:
        page.close()
    after = _grades(course, "attacker")
    ran = {
        "page marked": pwned,
        "console": [line for line in logs if "PWNED" in line or line == "dialog"],
        "live in the page": places,
        "API writes": api_writes,
        "grades changed": None if after == before else (before, after),
    }
    assert not any(ran.values()), ran
    # the student's attempts are visible to the instructor, as text; the course's figure is shown
    # and the course's own markdown keeps its link
    assert "onerror" in body and figures >= 1 and links == 1, (figures, links)
