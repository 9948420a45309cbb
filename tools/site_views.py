"""The reading site's view of one notebook (tools/build_site.py): what a page shows of it.

Each figure's description and the name myst-nb gives its PNG; the student view (nbgrader's own
release preprocessors) and the instructor view; each explorer (a live widget output) as a still of
its default view, from the notebook's saved widget state. Nothing here knows the other pages:
the place in the course and the launch links are ``site_navigation.py``'s.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NBGRADER_CONFIG = ROOT / "nbgrader" / "nbgrader_config.py"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


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


def read_notebook(path: Path):
    """A committed notebook (nbformat 4), read without a schema validation pass (seconds of CPU
    for the course's large notebooks; nbval and nbformat.write have validated them)."""
    nb = nbformat.v4.reads(Path(path).read_text())  # nbformat.read less its validate()
    if nb.get("nbformat") != 4:
        raise ValueError(f"{path}: nbformat {nb.get('nbformat')}, the site reads version 4")
    return nb
