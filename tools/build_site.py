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
import dataclasses
import io
import json
import shutil
import sys
import tempfile
import warnings as warnings_module
from pathlib import Path

import nbformat

# tools/ is on sys.path: this script's own folder (python tools/build_site.py), or the tests'
from site_navigation import (
    BINDERHUB_URL,
    BRANCH,
    NOTEBOOKS,
    REPOSITORY,
    ROOT,
    Page,
    Settings,
    _index,
    _place_cell,
    _title,
    course_notebooks,
    launch_links,
    lesson_pages,
)
from site_views import (
    WIDGET_VIEW,
    _is_exercise_cell,  # noqa: F401 - tests/test_site_course.py reads it here
    explorer_still,
    figure_description,
    image_digest,
    instructor_view,
    read_notebook,
    student_view,
)

SITE_SOURCE = ROOT / "site"
DEFAULT_OUT = ROOT / "build" / "site"


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
