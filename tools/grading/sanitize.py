"""What the instructor's browser and the feedback render from a student is inert.

Everything in a graded notebook's outputs was written by a kernel that ran the student's code, and
every markdown or raw cell the student edited or added is the student's text. The formgrader
renders the autograded notebook inside the instructor's logged-in page, and ``generate_feedback``
writes an HTML page; a script in either could, for example, call the formgrader's API and set the
student's manual scores. :class:`SanitizeStudentContent` makes a notebook safe to render, the way
a public site treats user HTML (an allowlist, never a blocklist):

* outputs keep plain text (streams, errors, ``text/plain``), PNG, JPEG and GIF images given as
  base64 data, and ``text/html`` cleaned by bleach to a small allowlist of tags (tables, lists,
  emphasis, ``img`` whose ``src`` is a ``data:image/png|jpeg|gif`` URI, ``a`` with an http(s) or
  mailto link, ``style`` reduced to a few text and table properties), every attribute outside
  the allowlist (``on*``, ``srcdoc``, ...) removed and every other tag shown as text; any other type (``application/javascript``,
  ``image/svg+xml``, ``text/markdown``, ``text/latex``, widget views, ...) is dropped, and an
  output left empty says what was removed; output metadata keeps only image sizes;
* a markdown or raw cell whose source is not, verbatim, a cell of the released notebook (the
  student wrote or changed it) has every ``<`` and ``[`` replaced by its character reference:
  no raw HTML, autolink, link or image can form, and the text reads the same; its attachments
  keep only PNG, JPEG and GIF images;
* the grader's and the instructor's comments (``metadata.nbgrader.comment``, which nbgrader's
  feedback renders as markdown) are escaped the same way;
* the notebook's saved widget state is removed, and a cell whose nbgrader ``grade_id`` is not
  letters, digits, ``_`` and ``-`` loses its nbgrader metadata (the formgrader writes it into
  HTML attributes unescaped).

The course's configuration runs it three times (``nbgrader/nbgrader_config.py``): last in
``autograde`` (the stored autograded notebook is clean), in ``generate_feedback``, and as a
preprocessor of every ``HTMLExporter`` nbgrader makes, which is what the formgrader renders a
submission with (a notebook graded some other way is cleaned when it is shown). Lesson: the
coursework (docs/INSTRUCTORS.md), lessons 4 to 10.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path

import bleach
import nbformat
from bleach.css_sanitizer import CSSSanitizer
from nbconvert.preprocessors import Preprocessor
from nbgrader.coursedir import CourseDirectory
from traitlets import Bool

#: Images kept as they are (valid base64 only); ``text/plain`` is kept too and ``text/html``
#: cleaned, every other output type dropped.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")

#: Tags of student HTML that stay tags (the course's own outputs use these: figures as
#: ``<img src="data:...">`` with alt text, tables, lists); anything else is shown as text.
HTML_TAGS = frozenset(
    "a abbr b blockquote br caption code dd del div dl dt em h1 h2 h3 h4 h5 h6 hr i img ins kbd "
    "li ol p pre s samp small span strong sub sup table tbody td tfoot th thead tr u ul".split()
)
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]+", re.I)
_LINK = re.compile(r"(https?://|mailto:|#)[^\s\"'<>`]*", re.I)
_SAFE_ID = re.compile(r"[A-Za-z0-9_\-]+")
#: A script URL's scheme, as browsers read it (case and ASCII whitespace ignored): MathJax's
#: ``\href`` in a student's math makes links markdown never sees.
_SCRIPT_SCHEME = re.compile(
    r"(" + r"\s*".join("javascript") + r"|" + r"\s*".join("vbscript") + r")\s*:", re.I
)
_BLANK = frozenset("\t\n\r ")


#: CSS properties a ``style`` attribute keeps (layout of text and tables, colours: none can load
#: anything, cover the page or run code); the others are removed by bleach's CSS sanitizer.
CSS_PROPERTIES = frozenset(
    "text-align vertical-align white-space color background-color font-size font-weight "
    "font-style font-family margin padding border border-collapse width".split()
)


def _attribute_allowed(tag: str, name: str, value: str) -> bool:
    if name in ("title", "style"):
        return True
    if tag == "img":
        if name == "src":
            return _IMAGE_DATA.fullmatch(value.strip()) is not None
        return name in ("alt", "width", "height")
    if tag == "a":
        return name == "href" and _LINK.fullmatch(value.strip()) is not None
    if tag in ("td", "th"):
        return name in ("colspan", "rowspan", "align")
    return False


def clean_html(html: str) -> str:
    """Student HTML made inert (coursework, lessons 4 to 10): the tags of :data:`HTML_TAGS` with
    their safe attributes, anything else escaped so that it shows as text."""
    if not isinstance(html, str):
        raise TypeError(f"html must be a str, got {type(html).__name__}")
    return bleach.clean(
        html,
        tags=HTML_TAGS,
        attributes=_attribute_allowed,
        protocols={"http", "https", "mailto", "data"},
        css_sanitizer=CSSSanitizer(allowed_css_properties=CSS_PROPERTIES),
        strip=False,
        strip_comments=True,
    )


def inert_markdown(text: str) -> str:
    """Markdown (or a comment nbgrader renders as markdown) in which no raw HTML, autolink, link
    or image can form (coursework, lessons 4 to 10): every ``<`` becomes ``&lt;`` and every
    ``[`` ``&#91;``, which render as the same characters, and the colon of a ``javascript:`` or
    ``vbscript:`` scheme ``&#58;`` (MathJax's ``\\href`` makes links in math, which markdown
    leaves alone). Code spans show the references as written: a cost paid only by a student's
    own markdown."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = text.replace("<", "&lt;").replace("[", "&#91;")
    return _SCRIPT_SCHEME.sub(lambda m: m.group(1) + "&#58;", text)


def _valid_base64(data) -> bool:
    if not isinstance(data, str):
        return False
    compact = "".join(ch for ch in data if ch not in _BLANK)
    try:
        base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _image_metadata(metadata) -> dict:
    kept = {}
    if not isinstance(metadata, dict):
        return kept
    for mime in IMAGE_TYPES:
        meta = metadata.get(mime)
        if not isinstance(meta, dict):
            continue
        clean = {
            k: v
            for k, v in meta.items()
            if k in ("width", "height") and type(v) in (int, float) and 0 < v < 100_000
        }
        if meta.get("needs_background") in ("light", "dark"):
            clean["needs_background"] = meta["needs_background"]
        if clean:
            kept[mime] = clean
    return kept


def inert_output(output: dict) -> dict:
    """One code cell output made inert (coursework, lessons 4 to 10): see the module docstring.
    ``output`` is an nbformat output (a dict with ``output_type``); a new one is returned."""
    if not isinstance(output, dict) or "output_type" not in output:
        raise TypeError("output must be an nbformat output (a dict with an 'output_type')")
    kind = output["output_type"]
    if kind == "stream":
        text = output.get("text", "")
        return nbformat.v4.new_output(
            "stream",
            name="stderr" if output.get("name") == "stderr" else "stdout",
            text=text if isinstance(text, str) else str(text),
        )
    if kind == "error":
        trace = output.get("traceback", [])
        return nbformat.v4.new_output(
            "error",
            ename=str(output.get("ename", "")),
            evalue=str(output.get("evalue", "")),
            traceback=[str(line) for line in trace] if isinstance(trace, list) else [],
        )
    if kind not in ("display_data", "execute_result"):
        return nbformat.v4.new_output(
            "stream", name="stdout", text=f"[an output of kind {kind!r} was removed]\n"
        )
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    kept, removed = {}, []
    for mime, value in data.items():
        if mime == "text/plain" and isinstance(value, str):
            kept[mime] = value
        elif mime in IMAGE_TYPES and _valid_base64(value):
            kept[mime] = value
        elif mime == "text/html" and isinstance(value, str):
            kept[mime] = clean_html(value)
        else:
            removed.append(str(mime))
    if not kept:
        shown = ", ".join(sorted(removed)) or "nothing"
        kept["text/plain"] = f"[an output of type {shown} was removed: it is not shown here]"
    new = nbformat.v4.new_output(kind, data=kept, metadata=_image_metadata(output.get("metadata")))
    if kind == "execute_result":
        count = output.get("execution_count")
        new["execution_count"] = count if type(count) is int else None
    return new


def release_sources(config, assignment: str | None, notebook: str | None) -> set[str] | None:
    """The sources of the markdown and raw cells of the released notebook (the student version
    nbgrader wrote under ``release/``), or None when it cannot be read."""
    if not assignment or not notebook:
        return None
    try:
        course = CourseDirectory(config=config)
        root = Path(course.root or os.getcwd())
        path = root / course.release_directory / str(assignment) / f"{notebook}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # noqa: BLE001 - unknown: every markdown cell is then treated as the student's
        return None
    return {c.source for c in nb.cells if c.cell_type in ("markdown", "raw")}


def _names(resources: dict) -> tuple[str | None, str | None]:
    meta = resources.get("nbgrader") or {}
    assignment = meta.get("assignment") or resources.get("assignment_id")
    notebook = meta.get("notebook") or resources.get("notebook_id")
    return assignment, notebook


def sanitize_notebook(nb, course_sources: set[str] | None):
    """``nb`` made inert in place (coursework, lessons 4 to 10): every output, every markdown
    or raw cell not among ``course_sources`` (all of them when it is None), every comment, the
    widget state and unsafe grade ids. Returns ``nb``."""
    if not hasattr(nb, "cells") or not hasattr(nb, "metadata"):
        raise TypeError(f"nb must be an nbformat notebook, got {type(nb).__name__}")
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        grading = meta.get("nbgrader")
        if isinstance(grading, dict):
            grade_id = grading.get("grade_id")
            if grade_id is not None and not (
                isinstance(grade_id, str) and _SAFE_ID.fullmatch(grade_id)
            ):
                del meta["nbgrader"]
            elif isinstance(grading.get("comment"), str):
                grading["comment"] = inert_markdown(grading["comment"])
        if cell.cell_type == "code":
            cell.outputs = [inert_output(o) for o in cell.get("outputs", [])]
        elif cell.cell_type in ("markdown", "raw"):
            if course_sources is None or cell.source not in course_sources:
                cell.source = inert_markdown(cell.source)
                attachments = cell.get("attachments")
                if isinstance(attachments, dict):
                    cell.attachments = {
                        name: {
                            m: v for m, v in files.items() if m in IMAGE_TYPES and _valid_base64(v)
                        }
                        for name, files in attachments.items()
                        if isinstance(files, dict)
                    }
    return nb


class SanitizeStudentContent(Preprocessor):
    """The notebook made inert before it is stored or rendered (see the module docstring)."""

    # nbgrader registers its pipelines' preprocessors without enabling them: on unless turned off
    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        sources = release_sources(self.config, *_names(resources))
        return sanitize_notebook(nb, sources), resources
