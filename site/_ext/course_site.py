"""Sphinx extension of the course's reading site: every figure gets its description as ``alt``.

myst-nb writes each image output of a notebook to a file named by the SHA-256 of its bytes and
takes no per-output alternative text. ``tools/build_site.py`` reads each figure's description from
the notebook (the course's format, CONTRIBUTING.md "Figure descriptions") and lists, per page,
``{sha256 of the image: description}`` in ``site_settings.json``. Here each image of a page gets
its description as ``alt``; an image of a lesson page with none is a warning (an error in the
strict build), naming the page and the image.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def jupyterlab_slug(title: str) -> str:
    """A heading's anchor as JupyterLab makes it (its text, spaces turned into hyphens).

    So a lesson's own links to its headings (``[C4.9](#C4.9-a-causal-mask-...)``), written and
    followed in JupyterLab, resolve on the site too (``myst_heading_slug_func``).
    """
    return title.strip().replace(" ", "-")


def _settings(app: Sphinx) -> dict:
    if not hasattr(app, "_course_site_settings"):
        path = Path(app.confdir) / "site_settings.json"
        app._course_site_settings = json.loads(path.read_text())
    return app._course_site_settings


def apply_descriptions(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    pages = _settings(app).get("figures", {})
    if docname not in pages:
        return
    described = pages[docname]
    for number, image in enumerate(doctree.findall(nodes.image), start=1):
        digest = PurePosixPath(image["uri"]).stem
        text = described.get(digest)
        if text:
            image["alt"] = text
        elif not _settings(app).get("require_descriptions", True):
            logger.info(f"{docname}: figure {number} has no description (allowed: a preview)")
        elif not image.get("alt"):
            logger.warning(
                f"{docname}: figure {number} ({image['uri']}) has no description; "
                "give it one (CONTRIBUTING.md, 'Figure descriptions')",
                location=image,
                type="course_site",
                subtype="figure_description",
            )


def warn_unlisted(app: Sphinx) -> None:
    """A notebook under notebooks/ that no lesson of helpers.course.LESSONS names is not on the site."""
    for name in _settings(app).get("unlisted", []):
        logger.warning(
            f"notebooks/{name} belongs to no lesson of helpers/course.py's LESSONS, so it is not "
            "on the site: add it there (as a lesson or a lesson's companion notebook)",
            type="course_site",
            subtype="unlisted_notebook",
        )


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", warn_unlisted)
    app.connect("doctree-read", apply_descriptions)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
