"""Stored outputs against outputs computed again, with nbval's own rules, outside nbval.

nbval executes a notebook and compares each code cell's new outputs with the stored ones. The
browser run executes every lesson once more, in JupyterLab; ``compare_notebook`` applies the
same comparison to the outputs JupyterLab computed (read from its notebook model), so that run
doubles as the portable-kernels check (tests/test_browser.py, tests/test_portable_outputs.py).

The rules are nbval 0.11's, called, not copied: per cell its tags and comment markers
(``nbval-ignore-output``, ``nbval-skip``, ``NBVAL_IGNORE_OUTPUT``, ...), consecutive stream
outputs merged, the keys nbval never compares skipped (metadata, tracebacks, execution counts,
widget model ids, PNG images), the sanitize file's patterns applied to both sides, and
``IPyNbCell.compare_outputs`` itself to decide and to describe the difference. A cell stored
unexecuted is not compared, as in nbval.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import nbformat
from nbval import plugin as nbval_plugin

ROOT = Path(__file__).resolve().parent.parent
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"

#: What nbval 0.11 never compares (IPyNbFile.skip_compare without --nbdime).
SKIP_COMPARE = (
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
)


def load_float_margins():
    """tools/float_margins.py, the module ``tools.float_margins``."""
    from tools import float_margins

    return float_margins


class _File:
    def __init__(self, patterns):
        self.skip_compare = SKIP_COMPARE
        self.sanitize_patterns = patterns


class _NoAssertRepr:
    @staticmethod
    def pytest_assertrepr_compare(**kwargs):
        return []  # nbval then prints both outputs in full (its fallback)


class _Cell:
    """What IPyNbCell.compare_outputs reads from ``self``: the file's settings, colours off."""

    compare_outputs = nbval_plugin.IPyNbCell.compare_outputs
    sanitize = nbval_plugin.IPyNbCell.sanitize
    format_output_compare = nbval_plugin.IPyNbCell.format_output_compare
    ihook = _NoAssertRepr()
    config = None

    def __init__(self, patterns):
        self.parent = _File(patterns)
        self.colors = nbval_plugin.nocolors
        self.comparison_traceback: list[str] = []


def _options(cell) -> dict:
    options = defaultdict(bool, nbval_plugin.find_metadata_tags(cell.metadata))
    options.update(dict(nbval_plugin.find_comment_markers(cell.source)))
    options.setdefault("check", True)
    return options


def _outputs(cell) -> list:
    outs = []
    for out in cell.get("outputs", []):
        out = nbformat.from_dict(dict(out))
        if out.get("output_type") == "stream" and isinstance(out.get("text"), list):
            out["text"] = "".join(out["text"])
        outs.append(out)
    return nbval_plugin.coalesce_streams(outs)


def compare_notebook(stored_path: Path, live: dict, sanitize: Path = SANITIZE) -> list[str]:
    """Compare the code cells of the notebook computed again (``live``, nbformat as a dict) with
    those stored in ``stored_path``, cell by cell, as nbval does. Returns one message per cell
    that differs (empty: they all agree); a different number of code cells is one message."""
    stored = nbformat.read(str(stored_path), as_version=4)
    live = nbformat.from_dict(live)
    patterns = dict(nbval_plugin.get_sanitize_patterns(sanitize.read_text()))  # as nbval: in order
    s_cells = [c for c in stored.cells if c.cell_type == "code"]
    l_cells = [c for c in live.cells if c.cell_type == "code"]
    if len(s_cells) != len(l_cells):
        return [f"{len(l_cells)} code cells were run, the file has {len(s_cells)}"]
    problems = []
    for number, (ref, new) in enumerate(zip(s_cells, l_cells, strict=True)):
        if ref.source != new.source:
            problems.append(f"code cell {number}: its source is not the stored cell's")
            continue
        options = _options(ref)
        if options["skip"] or not options["check"] or ref.get("execution_count") is None:
            continue
        cell = _Cell(patterns)
        if not cell.compare_outputs(_outputs(new), _outputs(ref)):
            first = ref.source.splitlines()[0][:80] if ref.source else ""
            problems.append(
                f"code cell {number} ({first!r}) differs from its stored outputs:\n"
                + "\n".join(cell.comparison_traceback)
            )
    return problems
