"""The reading site's navigation (tools/build_site.py): which pages, in which order, and how
each page says where it stands in the course and how to run it.

The course's lessons read from ``helpers/course.py`` alone (no torch); the site's settings (the
repository, the hubs); each lesson's launch links (Binder, Colab, JupyterHub through nbgitpuller);
the box "About this lesson" of each page; the index page with its table of contents.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: Where the course is published (README.md, "Open on Binder"); a fork passes --repository.
REPOSITORY = "transformer-block-course/course"
BRANCH = "main"
BINDERHUB_URL = "https://mybinder.org"
TITLE = "The Transformer block, from one block to the full model"


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
