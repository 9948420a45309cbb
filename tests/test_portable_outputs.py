"""Stored outputs hold on every machine, not only the one that executed them (CONTRIBUTING.md,
"Numbers in stored outputs").

The main nbval run compares every notebook on this machine's fastest CPU kernels and torch's
default thread count. Here each notebook is executed again, in a separate pytest process, with
torch's portable kernels (``ATEN_CPU_CAPABILITY=default``) and a different thread count, and its
outputs must still match the stored ones exactly. The same run logs every number printed through
``helpers.printing.fmt``, and ``tools/float_margins.py`` checks that each is farther from a
rounding boundary than its precision's error bound, and that no float was printed without it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))

_spec = importlib.util.spec_from_file_location("float_margins", ROOT / "tools" / "float_margins.py")
float_margins = importlib.util.module_from_spec(_spec)
sys.modules["float_margins"] = float_margins  # dataclasses look their module up
_spec.loader.exec_module(float_margins)


def other_thread_count() -> int:
    """A torch thread count different from the one the main nbval run's kernels use."""
    return 1 if torch.get_num_threads() > 1 else 2


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_match_under_portable_kernels_and_other_thread_count(notebook, tmp_path):
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
