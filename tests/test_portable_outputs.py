"""Stored outputs hold on every machine, not only the one that executed them (CONTRIBUTING.md,
"Numbers in stored outputs").

The main nbval run compares every notebook on this machine's fastest CPU kernels and torch's
default thread count. Each notebook is executed once more with torch's portable kernels
(``ATEN_CPU_CAPABILITY=default``) and a different thread count, and its outputs must still match
the stored ones exactly. The same run logs every number printed through
``helpers.printing.fmt``, and ``tools/float_margins.py`` checks that each is farther from a
rounding boundary than its precision's error bound, and that no float was printed without it.

That second execution is the browser run's (tests/test_browser.py, check 8: JupyterLab's kernels
run on the portable kernels, and its outputs are compared with nbval's rules by
tests/_outputs.py), so a notebook is not executed a third time. Where the browser run of a lesson
is not part of the session (deselected, ``-m "not browser"``, or Chromium missing), the test here
runs it in a separate nbval process instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from _outputs import compare_notebook, load_float_margins  # tests/ is on sys.path

from helpers.course import NOTEBOOKS as PARTS

ROOT = Path(__file__).resolve().parent.parent
#: every notebook of the course in course order (helpers.course.NOTEBOOKS: each lesson, then its
#: companion), then any numbered notebook on disk it does not list yet
NOTEBOOKS = [ROOT / "notebooks" / p.notebook for p in PARTS]
NOTEBOOKS = [p for p in NOTEBOOKS if p.exists()] + sorted(
    set((ROOT / "notebooks").glob("[0-9]*.ipynb")) - set(NOTEBOOKS)
)
CHROMIUM = Path("/usr/bin/chromium")

float_margins = load_float_margins()


def browser_run_checks(session, notebook: Path) -> bool:
    """True when this session's browser run executes ``notebook`` under portable kernels and
    compares its outputs (tests/test_browser.py, check 8): its lesson test is among the selected
    tests and can run (Chromium and playwright are here)."""
    if not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None:
        return False
    keys = [p.key for p in PARTS if p.notebook == notebook.name]
    wanted = {f"tests/test_browser.py::test_lesson_in_jupyterlab[lesson{k}]" for k in keys}
    return any(item.nodeid.split("@")[0] in wanted for item in session.items)


def other_thread_count() -> int:
    """A torch thread count different from the one the main nbval run's kernels use."""
    return 1 if torch.get_num_threads() > 1 else 2


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_match_under_portable_kernels_and_other_thread_count(
    notebook, tmp_path, request
):
    if browser_run_checks(request.session, notebook):
        pytest.skip(
            f"{notebook.name} is executed under portable kernels and compared by this session's "
            "browser run (tests/test_browser.py::test_lesson_in_jupyterlab, check 8)"
        )
    log = tmp_path / "floats.jsonl"
    threads = str(other_thread_count())
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    env.update(
        ATEN_CPU_CAPABILITY="default",
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
        HELPERS_FLOAT_LOG=str(log),
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-o",
        "addopts=",
        "-q",
        "--nbval",
        "--nbval-current-env",
        "--nbval-sanitize-with",
        str(ROOT / "tests" / "nbval_sanitize.cfg"),
        str(notebook),
    ]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, (
        f"{notebook.name} under ATEN_CPU_CAPABILITY=default and {threads} thread(s) does not "
        f"reproduce its stored outputs:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    )
    report = float_margins.analyse(notebook, float_margins.read_log(log))
    assert report.ok, "\n".join(report.lines())


def test_float_margins_reads_a_log_and_flags_what_it_should(tmp_path):
    """A check of the tool itself, on a notebook written here."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(fmt(x, 4), fmt(y, 4), 1e-5, 0.25)")
    cell.execution_count = 1
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="0.2679 0.5 1e-5 0.25 3.14\n")
    ]
    nb.cells = [cell]
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    cell_id = hashlib.sha1(cell.source.encode("utf-8")).hexdigest()
    log = [
        # 0.26785 is exactly on the boundary between 0.2678 and 0.2679: margin 0
        {
            "printed": "0.2679",
            "value": "0.267851",
            "precision": "float32",
            "bound": 1e-4,
            "cell": cell_id,
        },
        {
            "printed": "0.5",
            "value": "0.5",
            "precision": "float64",
            "bound": 1e-9,
            "cell": cell_id,
        },
    ]
    report = float_margins.analyse(path, log)
    assert [p.printed for p in report.too_close] == ["0.2679"]
    assert report.too_close[0].margin < 1
    # 1e-5 and 0.25 are literals of the cell's source; 3.14 came from nowhere
    assert report.unaccounted == [(0, "3.14")]


# --- the comparison the browser run uses (tests/_outputs.py): it passes and fails as nbval does ---


def _stored_and_live(tmp_path):
    """A stored notebook and the same notebook as a run computed it again, identical so far."""
    cells = [
        nbformat.v4.new_code_cell("print('loss', 2.5)"),
        nbformat.v4.new_code_cell("fig"),
        nbformat.v4.new_code_cell("explorer()", metadata={"tags": ["nbval-ignore-output"]}),
        nbformat.v4.new_code_cell("print('not run')"),
    ]
    stored = nbformat.v4.new_notebook(cells=cells)
    cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="loss 2.5\n")]
    cells[1].outputs = [
        nbformat.v4.new_output(
            "execute_result",
            data={"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": "AAAA"},
            execution_count=2,
        )
    ]
    widget = {"model_id": "one", "version_major": 2, "version_minor": 0}
    cells[2].outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/plain": "Explorer(...)",
                "application/vnd.jupyter.widget-view+json": widget,
            },
        )
    ]
    for number, cell in enumerate(cells[:3], start=1):
        cell.execution_count = number
    path = tmp_path / "stored.ipynb"
    nbformat.write(stored, path)
    return path, nbformat.reads(nbformat.writes(stored), as_version=4)


def test_compare_notebook_accepts_what_nbval_accepts(tmp_path):
    path, live = _stored_and_live(tmp_path)
    # the stream split in two messages, another figure size, another PNG, another widget id,
    # another execution count, an ignored cell's text, an unexecuted cell's new output
    live.cells[0].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="loss "),
        nbformat.v4.new_output("stream", name="stdout", text="2.5\n"),
    ]
    live.cells[1].outputs[0]["data"] = {"text/plain": "<Figure size 320x240 with 2 Axes>",
                                        "image/png": "BBBB"}  # fmt: skip
    live.cells[1].outputs[0]["execution_count"] = 7
    live.cells[2].outputs[0]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] = "x"
    live.cells[2].outputs[0]["data"]["text/plain"] = "Explorer(other)"
    live.cells[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="not run\n")]
    assert compare_notebook(path, live) == []


@pytest.mark.parametrize("change", ["number", "stream name", "missing output", "extra cell"])
def test_compare_notebook_reports_what_nbval_reports(tmp_path, change):
    path, live = _stored_and_live(tmp_path)
    if change == "number":
        live.cells[0].outputs[0]["text"] = "loss 2.6\n"
    elif change == "stream name":
        live.cells[0].outputs[0]["name"] = "stderr"
    elif change == "missing output":
        live.cells[1].outputs = []
    else:
        live.cells.append(nbformat.v4.new_code_cell("1"))
    problems = compare_notebook(path, live)
    assert len(problems) == 1, problems
    if change == "number":
        assert "code cell 0" in problems[0] and "loss 2.6" in problems[0]
