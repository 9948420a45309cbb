"""Build the course's reading site: static HTML of every lesson, from the committed notebooks.

    python tools/build_site.py                       # student view, into build/site/
    python tools/build_site.py --out DIR             # somewhere else
    python tools/build_site.py --solutions           # instructor view: solutions and hidden tests, folded
    python tools/build_site.py --jupyterhub-url https://hub.example.edu   # adds JupyterHub launch links

Nothing is executed and nothing is downloaded: each page is a committed, executed notebook with
its stored outputs (those nbval compares), rendered by Sphinx + myst-nb + sphinx-book-theme, math
by a MathJax copied into the site. Sphinx runs with warnings as errors (``-W``): a broken internal
link, an unknown output type or a figure without a description stops the build.

What a page gets, from its notebook (``helpers/course.py``'s ``NOTEBOOKS`` says which notebooks,
in course order: each lesson's core, then its "Going further" companion if it has one):

* **student view** (default): nbgrader's own ``ClearSolutions`` (with the course's stub from
  ``nbgrader/nbgrader_config.py``) and ``ClearHiddenTests``, as the release runs them, and the
  exercises' stored outputs (the instructor's answers' verdicts) removed. ``--solutions`` keeps
  solutions and hidden tests instead, each such cell folded;
* a box "About this lesson": its place in the course (previous, next, the notebook's own "What you
  need" line), launch links (Binder, Colab; JupyterHub through nbgitpuller when ``--jupyterhub-url`` is
  given), the notebook to download (the page's own notebook) and how to run it locally;
* each explorer (a live ipywidgets output, which a static page cannot run) becomes a still: the
  PNG the explorer's Image widget held when the notebook was executed (its default view, from the
  notebook's saved widget state), its description, its controls with their defaults, and how to
  run it live. Other widget outputs (a progress bar) are named, not shown;
* every figure's ``alt`` is its description (CONTRIBUTING.md, "Figure descriptions").
"""

from __future__ import annotations

import argparse
import base64
import copy
import dataclasses
import hashlib
import importlib.util
import io
import json
import re
import shutil
import sys
import tempfile
import warnings as warnings_module
from pathlib import Path
from urllib.parse import quote, urlencode

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SITE_SOURCE = ROOT / "site"
NBGRADER_CONFIG = ROOT / "nbgrader" / "nbgrader_config.py"
DEFAULT_OUT = ROOT / "build" / "site"

#: Where the course is published (README.md, "Open on Binder"); a fork passes --repository.
REPOSITORY = "transformer-block-course/course"
BRANCH = "main"
BINDERHUB_URL = "https://mybinder.org"
TITLE = "The Transformer block, from one block to the full model"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

__all__ = [
    "Page",
    "Settings",
    "lesson_pages",
    "figure_description",
    "student_view",
    "instructor_view",
    "explorer_still",
    "launch_links",
    "page_notebook",
    "download_notebook",
    "write_source",
    "Built",
    "build",
]


# ---------------------------------------------------------------------------------------------
# The course's lessons, without importing the helpers package (torch): helpers/course.py alone
# ---------------------------------------------------------------------------------------------


def course_notebooks(path: Path = ROOT / "helpers" / "course.py"):
    """``NOTEBOOKS`` of ``helpers/course.py`` (each core lesson, then its "Going further"
    companion, in course order), loaded from that file alone; ``LESSONS`` if it has no NOTEBOOKS.

    ``import helpers.course`` would import the whole package (torch, ~2 s of CPU, and a 750 MB
    install for a job that only builds the site); the module itself needs only the standard library.
    """
    spec = importlib.util.spec_from_file_location("_course_for_site", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up while building the class
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return getattr(module, "NOTEBOOKS", module.LESSONS)


@dataclasses.dataclass(frozen=True)
class Page:
    """One page of the site: a notebook under ``notebooks/`` and its entry in helpers.course."""

    lesson: object  # a helpers.course.Lesson
    notebook: str  # file name under notebooks/

    @property
    def companion(self) -> bool:
        """A lesson's "Going further" companion notebook (``Lesson.further``), not its core."""
        return bool(getattr(self.lesson, "further", False))

    @property
    def docname(self) -> str:
        return "notebooks/" + Path(self.notebook).stem


def lesson_pages(entries, notebooks: Path = NOTEBOOKS) -> list[Page]:
    """One page per entry of ``helpers.course.NOTEBOOKS``, in course order."""
    pages = []
    for entry in entries:
        if not (Path(notebooks) / entry.notebook).exists():
            raise FileNotFoundError(
                f"lesson {entry.number} names notebooks/{entry.notebook}, which does not exist"
            )
        pages.append(Page(entry, entry.notebook))
    return pages


# ---------------------------------------------------------------------------------------------
# Figure descriptions (CONTRIBUTING.md, "Figure descriptions")
# ---------------------------------------------------------------------------------------------


def figure_description(output) -> str | None:
    """The one-sentence description of a figure output, or None.

    The course's format: the description is ``output.metadata["image/png"]["alt"]``, nbformat's
    per-type output metadata (where ``width`` and ``height`` already go).
    """
    meta = (output.get("metadata") or {}).get("image/png") or {}
    text = meta.get("alt") if isinstance(meta, dict) else None
    if isinstance(text, str) and text.strip():
        return " ".join(text.split())
    return None


def image_digest(output) -> str:
    """SHA-256 of an output's PNG bytes: the name myst-nb gives the image file."""
    data = output["data"]["image/png"]
    data = "".join(data) if isinstance(data, list) else data
    return hashlib.sha256(base64.b64decode(data)).hexdigest()


# ---------------------------------------------------------------------------------------------
# Student and instructor views
# ---------------------------------------------------------------------------------------------


def _nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _is_exercise_cell(cell) -> bool:
    meta = _nbgrader_meta(cell)
    return bool(meta.get("solution") or meta.get("grade"))


def _release_preprocessors():
    """nbgrader's ClearSolutions and ClearHiddenTests, configured by the course's nbgrader_config."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    if NBGRADER_CONFIG.exists():
        loader = PyFileConfigLoader(NBGRADER_CONFIG.name, str(NBGRADER_CONFIG.parent))
        config = loader.load_config()
    return [ClearSolutions(config=config), ClearHiddenTests(config=config)]


def student_view(nb):
    """The notebook as the release gives it to students, with the lesson's stored outputs.

    Solutions become the course's stub and hidden tests go, by nbgrader's own preprocessors (as
    ``nbgrader generate_assignment`` runs them); the exercise cells' stored outputs (the verdicts
    on the instructor's answers) are removed. Every other cell keeps its stored outputs.
    """
    nb = copy.deepcopy(nb)
    resources: dict = {}
    for preprocessor in _release_preprocessors():
        nb, resources = preprocessor.preprocess(nb, resources)
    for cell in nb.cells:
        if cell.cell_type == "code" and _is_exercise_cell(cell):
            cell.outputs = []
            cell.execution_count = None
    return nb


def instructor_view(nb):
    """The committed notebook, each solution and graded check cell folded (tag ``hide-input``)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if _is_exercise_cell(cell):
            tags = cell.metadata.setdefault("tags", [])
            if cell.cell_type == "code" and "hide-input" not in tags:
                tags.append("hide-input")
    return nb


# ---------------------------------------------------------------------------------------------
# Explorers: a still of the default view, from the saved widget state
# ---------------------------------------------------------------------------------------------


def _widget_state(nb) -> dict:
    return ((nb.metadata.get("widgets") or {}).get(WIDGET_STATE) or {}).get("state") or {}


def _children(state: dict, model_id: str) -> list[str]:
    model = state.get(model_id) or {}
    return [
        c.removeprefix("IPY_MODEL_")
        for c in (model.get("state") or {}).get("children") or []
        if isinstance(c, str)
    ]


def _walk(state: dict, model_id: str) -> list[tuple[str, dict, dict]]:
    """The widget tree under ``model_id``, depth first: (model name, its state, the model)."""
    found, todo, seen = [], [model_id], set()
    while todo:
        mid = todo.pop(0)
        if mid in seen or mid not in state:
            continue
        seen.add(mid)
        model = state[mid]
        found.append((model.get("model_name", ""), model.get("state") or {}, model))
        todo[0:0] = _children(state, mid)
    return found


def _is_picture(model: dict) -> bool:
    """A widget that shows a PNG: ipywidgets' ``Image`` or the course's ``Picture`` (anywidget),
    recognised by what they hold (a ``value`` buffer and ``format``), not by their class name."""
    state = model.get("state") or {}
    paths = {tuple(b.get("path") or ()) for b in model.get("buffers") or []}
    return ("value",) in paths and "format" in state


def _picture_description(state: dict) -> str | None:
    """The picture's description: the Picture's ``description`` (its ``<img alt>``), else an
    ipywidgets Image's ``tooltip``."""
    for key in ("description", "tooltip"):
        text = state.get(key)
        if isinstance(text, str) and text.strip():
            return " ".join(text.split())
    return None


def _control_line(name: str, s: dict) -> str | None:
    """One control of an explorer in words: its label, its kind, its range or options, its default.

    Works from the saved state alone, for ipywidgets' controls and the course's own (anywidget
    models, whose traits have the same names: value, min, max, step, description, index).
    """
    label = (s.get("description") or "").strip() or "(unlabelled)"
    value = s.get("value")
    labels = s.get("_options_labels") or s.get("_labels")
    if {"min", "max"} <= s.keys() and isinstance(value, list | tuple) and len(value) == 2:
        lo, hi = value
        return f"`{label}`: a range slider from {s['min']} to {s['max']}, set to {lo}–{hi}"
    if {"min", "max"} <= s.keys() and isinstance(value, int | float) and "Progress" not in name:
        step = f", step {s.get('step')}" if s.get("step") not in (None, 1) else ""
        return f"`{label}`: a slider from {s['min']} to {s['max']}{step}, set to {value}"
    if isinstance(labels, list) and "index" in s:
        index = s.get("index")
        current = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else None
        return f"`{label}`: a choice of {', '.join(map(str, labels))}; set to {current}"
    if name in {"CheckboxModel", "ToggleButtonModel"} or (isinstance(value, bool) and "_esm" in s):
        return f"`{label}`: a check box, {'on' if value else 'off'}"
    if name in {"TextModel", "TextareaModel"}:
        return f"`{label}`: a text box, set to “{value}”"
    return None


def explorer_still(nb, output, links: dict) -> list:
    """The outputs that replace a widget view on the site: a still and how to run it live.

    An explorer (a widget tree holding a picture) becomes that picture's PNG, as the notebook's
    run left it (the explorer's default view), with its description, then its controls at their
    defaults and the launch links. Any other widget (a progress bar) becomes one line naming it.
    Text the widgets held (an explorer's status line, a progress bar's loss) is left out: it is
    not in the outputs nbval compares, and the site shows no number the tests did not check.
    """
    state = _widget_state(nb)
    model_id = output["data"][WIDGET_VIEW]["model_id"]
    tree = _walk(state, model_id)
    if not tree:
        raise ValueError(
            f"widget output {model_id} has no saved state in the notebook (execute it with "
            "tools/run_notebooks.py, which stores the widget state)"
        )
    pictures = [(s, model) for _, s, model in tree if _is_picture(model)]
    run = "run the lesson" + (
        " (" + ", ".join(f"[{k}]({v})" for k, v in links.items()) + ")" if links else ""
    )
    if not pictures:
        names = {n.removesuffix("Model") for n, _, _ in tree}
        layout = {"Layout", "HBox", "VBox", "Box", "HTML", "Label"}
        kinds = sorted(n for n in names - layout if not n.endswith("Style"))
        text = (
            f"*A live output ({', '.join(kinds) or 'a widget'}), shown while the cell runs in "
            f"JupyterLab: {run} to see it.*"
        )
        return [nbformat.v4.new_output("display_data", data={"text/markdown": text})]
    picture_state, picture = pictures[0]
    buffer = next(b for b in picture["buffers"] if tuple(b["path"]) == ("value",))
    if buffer.get("encoding") != "base64" or picture_state.get("format") != "png":
        raise ValueError(f"the picture of widget output {model_id} holds no stored PNG")
    described = _picture_description(picture_state)
    still = nbformat.v4.new_output(
        "display_data",
        data={"image/png": buffer["data"], "text/plain": f"Explorer still: {described or ''}"},
        metadata={"image/png": {"alt": described}} if described else {},
    )
    controls = [line for name, s, _ in tree if (line := _control_line(name, s))]
    text = (
        "*A still of the explorer's default view: the picture the code drew when the notebook "
        f"was executed. To move its controls, {run} and run this cell.*"
    )
    if controls:
        text += "\n\nIts controls, at their defaults:\n\n" + "\n".join(f"- {c}" for c in controls)
    return [still, nbformat.v4.new_output("display_data", data={"text/markdown": text})]


# ---------------------------------------------------------------------------------------------
# The page: launch links, the place in the course, the whole notebook
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Settings:
    repository: str = REPOSITORY  # owner/name on GitHub
    branch: str = BRANCH
    binderhub_url: str = BINDERHUB_URL
    jupyterhub_url: str | None = None  # a JupyterHub with nbgitpuller installed
    solutions: bool = False  # instructor view
    title: str = TITLE
    #: a figure without a description stops the build; False only to preview a lesson whose
    #: figures are still being described (its figures then carry no alt text: not for publishing)
    require_descriptions: bool = True

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", self.repository):
            raise ValueError(f"repository must be OWNER/NAME on GitHub, got {self.repository!r}")
        for name in ("binderhub_url", "jupyterhub_url"):
            value = getattr(self, name)
            if value is not None and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
                raise ValueError(f"{name} must be an http(s) address, got {value!r}")

    @property
    def repository_url(self) -> str:
        return f"https://github.com/{self.repository}"


def launch_links(page: Page, settings: Settings) -> dict[str, str]:
    """Binder, Colab, and JupyterHub through nbgitpuller if a hub is set: the lesson opened in
    JupyterLab (Colab: in Colab's own notebook, from GitHub).

    The same addresses sphinx-book-theme's launch buttons build (Binder's ``/v2/gh/OWNER/NAME/
    BRANCH?urlpath=lab/tree/PATH``; nbgitpuller's ``/hub/user-redirect/git-pull?repo=…&urlpath=
    lab/tree/NAME/PATH&branch=…``, nbgitpuller cloning into a folder named after the repository).
    """
    path = f"notebooks/{page.notebook}"
    links = {
        "Binder": f"{settings.binderhub_url.rstrip('/')}/v2/gh/{settings.repository}/"
        f"{settings.branch}?urlpath=lab/tree/{quote(path)}",
        # Colab opens the notebook from GitHub; its first cell (tools/colab_cell.py) installs
        # the course there
        "Colab": f"https://colab.research.google.com/github/{settings.repository}/blob/"
        f"{settings.branch}/{quote(path)}",
    }
    if settings.jupyterhub_url:
        name = settings.repository.split("/")[1]
        query = urlencode(
            {
                "repo": settings.repository_url,
                "urlpath": f"lab/tree/{name}/{path}",
                "branch": settings.branch,
            },
            safe="/",
        )
        links["JupyterHub"] = (
            f"{settings.jupyterhub_url.rstrip('/')}/hub/user-redirect/git-pull?{query}"
        )
    return links


def _what_you_need(nb) -> str | None:
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for para in re.split(r"\n\s*\n", cell.source):
            if para.lstrip().startswith("**What you need:**"):
                return " ".join(para.split()).removeprefix("**What you need:**").strip()
    return None


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, flags=re.M)
            if match:
                return match.group(1).strip()
    raise ValueError("the notebook has no '# title' heading")


def _has_heading(nb, text: str) -> str | None:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(rf"^#+\s+({re.escape(text)}[^\n]*)$", cell.source, flags=re.M | re.I)
            if match:
                return match.group(1).strip()
    return None


def _slug(heading: str) -> str:
    """The anchor of a heading, as JupyterLab and the site make it (site/_ext/course_site.py)."""
    return heading.strip().replace(" ", "-")


def _place_cell(page: Page, pages: list[Page], nb, settings: Settings, titles: dict) -> object:
    """The box "About this lesson": place in the course, what it needs, how to run it."""
    mains = [p for p in pages if not p.companion]
    index = next(i for i, p in enumerate(pages) if p == page)
    prev_page = pages[index - 1] if index > 0 else None
    next_page = pages[index + 1] if index + 1 < len(pages) else None

    def link(p: Page) -> str:
        return f"[{titles[p.notebook]}]({Path(p.notebook).name})"

    kind = "Going further, the companion of lesson" if page.companion else "Lesson"
    numbers = [p.lesson.number for p in mains]
    lines = [
        f"**{kind} {page.lesson.number}** of this course (lessons {numbers[0]} to {numbers[-1]}).",
        "",
        f"- Previous: {link(prev_page) if prev_page else 'none here; lessons 1 to 3 (tokens, embeddings, attention) come before this course'}.",
        f"- Next: {link(next_page) if next_page else 'none: this is the last page'}.",
    ]
    needs = _what_you_need(nb)
    if needs:
        lines.append(f"- What you need: {needs}")
    further = _has_heading(nb, "Going further")
    if further:
        lines.append(
            f"- This page holds the core lesson up to its recap, then [{further}](#{_slug(further)})."
        )
    links = launch_links(page, settings)
    run = " · ".join(f"[{k}]({v})" for k, v in links.items())
    lines += [
        f"- Run it: {run} · {{download}}`download the notebook <download/{page.notebook}>` · "
        f"or locally, after the README's set-up: `jupyter lab notebooks/{page.notebook}`.",
    ]
    if settings.solutions:
        lines.append(
            "- Instructor view: each exercise's solution and hidden tests are folded below."
        )
    else:
        lines.append(
            "- Exercises appear as students get them (solutions replaced by a stub, no hidden tests)."
        )
    body = "\n".join(lines)
    return nbformat.v4.new_markdown_cell(
        f":::{{admonition}} About this page\n:class: course-place\n\n{body}\n:::"
    )


def read_notebook(path: Path):
    """A committed notebook (nbformat 4), read without a schema validation pass (seconds of CPU
    for the course's large notebooks; nbval and nbformat.write have validated them)."""
    nb = nbformat.v4.reads(Path(path).read_text())  # nbformat.read less its validate()
    if nb.get("nbformat") != 4:
        raise ValueError(f"{path}: nbformat {nb.get('nbformat')}, the site reads version 4")
    return nb


def page_notebook(
    page: Page,
    pages: list[Page],
    settings: Settings,
    notebooks: Path = NOTEBOOKS,
    titles: dict | None = None,
):
    """The notebook of one site page, and ``{sha256: description}`` of its figures.

    A figure without a description is not in ``figures``: the Sphinx extension then warns,
    naming the page and the figure.
    """
    nb = read_notebook(Path(notebooks) / page.notebook)
    view = instructor_view(nb) if settings.solutions else student_view(nb)
    # the install cell for Colab and Kaggle (tools/colab_cell.py) is no part of the page to read
    view.cells = [c for c in view.cells if "course-setup" not in c.metadata.get("tags", [])]
    if titles is None:
        titles = {p.notebook: _title(read_notebook(Path(notebooks) / p.notebook)) for p in pages}
    links = launch_links(page, settings)
    figures: dict[str, str] = {}
    for cell in view.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                outputs += explorer_still(view, output, links)
            else:
                outputs.append(output)
        cell.outputs = outputs
        for output in outputs:
            if "image/png" in output.get("data", {}):
                text = figure_description(output)
                if text:
                    figures[image_digest(output)] = text
    view.metadata.pop("widgets", None)  # the stills replace the live widgets; no widget JS
    # the box comes right after the title (and its lead paragraphs), before the first section
    first = next(i for i, c in enumerate(view.cells) if c.cell_type == "markdown")
    head, sep, rest = view.cells[first].source.partition("\n## ")
    box = _place_cell(page, pages, nb, settings, titles)
    if sep:
        view.cells[first].source = head.rstrip()
        tail = nbformat.v4.new_markdown_cell("## " + rest)
        view.cells[first + 1 : first + 1] = [box, tail]
    else:
        view.cells.insert(first + 1, box)
    return view, figures


def download_notebook(page: Page, settings: Settings, notebooks: Path = NOTEBOOKS):
    """The notebook a page offers: its view (student or instructor), live widgets' state kept."""
    nb = read_notebook(Path(notebooks) / page.notebook)
    return nb if settings.solutions else student_view(nb)


def _index(pages: list[Page], settings: Settings, titles: dict, intro: str) -> str:
    rows = []
    for p in pages:
        indent = "  " if p.companion else ""
        rows.append(f"{indent}- [{titles[p.notebook]}](notebooks/{Path(p.notebook).name})")
    toc = "\n".join(p.docname for p in pages)
    view = (
        "This is the **instructor view**: solutions and hidden tests are on the pages, folded."
        if settings.solutions
        else "Exercises appear as students get them: solutions replaced by a stub, no hidden tests."
    )
    return (
        f"# {settings.title}\n\n{intro.strip()}\n\n## Lessons\n\n" + "\n".join(rows) + "\n\n"
        f"{view}\n\n"
        f"```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toc}\n```\n"
    )


def _write(nb, path: Path) -> None:
    """nbformat.write less its validation pass (myst-nb validates when it reads the page)."""
    Path(path).write_text(nbformat.v4.writes(nb))


def write_source(
    src: Path,
    settings: Settings,
    lessons=None,
    notebooks: Path = NOTEBOOKS,
    site_source: Path = SITE_SOURCE,
) -> list[Page]:
    """Lay out the Sphinx source folder ``src``: conf.py and friends, index, one notebook a page."""
    lessons = course_notebooks() if lessons is None else lessons
    pages = lesson_pages(lessons, notebooks)
    listed = {p.notebook for p in pages}
    unlisted = sorted(p.name for p in Path(notebooks).glob("*.ipynb") if p.name not in listed)
    src = Path(src)
    shutil.copytree(site_source, src, dirs_exist_ok=True, ignore=shutil.ignore_patterns("_build"))
    (src / "notebooks").mkdir(exist_ok=True)
    titles = {p.notebook: _title(read_notebook(Path(notebooks) / p.notebook)) for p in pages}
    figures = {}
    (src / "notebooks" / "download").mkdir(exist_ok=True)
    for page in pages:
        nb, described = page_notebook(page, pages, settings, notebooks, titles)
        _write(nb, src / f"{page.docname}.ipynb")
        figures[page.docname] = described
        _write(
            download_notebook(page, settings, notebooks),
            src / "notebooks" / "download" / page.notebook,
        )
    intro = (site_source / "intro.md").read_text() if (site_source / "intro.md").exists() else ""
    (src / "index.md").write_text(_index(pages, settings, titles, intro))
    (src / "site_settings.json").write_text(
        json.dumps(
            {
                "title": settings.title,
                "repository_url": settings.repository_url,
                "branch": settings.branch,
                "binderhub_url": settings.binderhub_url,
                "jupyterhub_url": settings.jupyterhub_url,
                "solutions": settings.solutions,
                "require_descriptions": settings.require_descriptions,
                "figures": figures,
                "unlisted": unlisted,
            },
            indent=1,
        )
    )
    return pages


@dataclasses.dataclass(frozen=True)
class Built:
    """What a build left: the site's folder and Sphinx's messages."""

    out: Path
    status: str
    warnings: str


def build(
    out: Path = DEFAULT_OUT,
    settings: Settings | None = None,
    lessons=None,
    notebooks: Path = NOTEBOOKS,
    strict: bool = True,
) -> Built:
    """Write the source into a temporary folder and run Sphinx on it (``strict``: warnings are
    errors, as ``sphinx-build -W``), then move the HTML to ``out``.

    Sphinx runs in this process (one interpreter start and one ``nbformat`` import fewer than
    a ``sphinx-build`` subprocess: about 2 s of CPU per build here). Raises RuntimeError with
    Sphinx's warnings if the build fails; ``out`` is replaced only by a build that succeeded.
    """
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    settings = settings or Settings()
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()) and not (out / ".buildinfo").exists():
        raise ValueError(f"out: {out} is a folder that holds something else than a site; refusing")
    status, warnings = io.StringIO(), io.StringIO()
    saved_path = list(sys.path)  # conf.py puts its _ext folder on sys.path
    with tempfile.TemporaryDirectory(prefix="course-site-") as tmp:
        src, html = Path(tmp) / "src", Path(tmp) / "build" / "html"
        write_source(src, settings, lessons, notebooks)
        try:
            with patch_docutils(src), docutils_namespace(), warnings_module.catch_warnings():
                # the theme's and myst's own use of APIs Sphinx 11 removes: not the site's to fix
                warnings_module.simplefilter("ignore", PendingDeprecationWarning)
                warnings_module.simplefilter("ignore", DeprecationWarning)
                app = Sphinx(
                    src,
                    src,
                    html,
                    Path(tmp) / "build" / "doctrees",
                    "html",  # myst-nb writes
                    status=status,
                    warning=warnings,
                    freshenv=True,  # beside html: keep it in tmp
                    warningiserror=strict,
                )
                app.build(force_all=True)
        except Exception as exc:
            raise RuntimeError(
                f"the site's build failed: {exc}\n{warnings.getvalue()[-6000:]}"
            ) from exc
        finally:
            sys.path[:] = saved_path
        if app.statuscode != 0:
            raise RuntimeError(
                f"the site's build failed (warnings are errors):\n{warnings.getvalue()[-6000:]}"
            )
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(html), str(out))
    return Built(out, status.getvalue(), warnings.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (build/site)")
    parser.add_argument("--solutions", action="store_true", help="instructor view")
    parser.add_argument("--jupyterhub-url", default=None, help="a hub with nbgitpuller installed")
    parser.add_argument("--binderhub-url", default=BINDERHUB_URL)
    parser.add_argument("--repository", default=REPOSITORY, help="OWNER/NAME on GitHub")
    parser.add_argument("--branch", default=BRANCH)
    parser.add_argument(
        "--allow-undescribed-figures",
        action="store_true",
        help="preview only: build although some figure has no description (no alt text)",
    )
    args = parser.parse_args(argv)
    settings = Settings(
        repository=args.repository,
        branch=args.branch,
        binderhub_url=args.binderhub_url,
        jupyterhub_url=args.jupyterhub_url,
        solutions=args.solutions,
        require_descriptions=not args.allow_undescribed_figures,
    )
    try:
        built = build(args.out, settings)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(built.warnings, end="", file=sys.stderr)
    pages = [p for p in built.out.rglob("*.html") if "_static" not in p.parts]
    print(f"site: {built.out / 'index.html'} ({len(pages)} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
