"""The lessons' first cell for Colab and Kaggle (tools/colab_cell.py; issue "a lesson a student
can take alone"): where ``helpers`` is missing it installs the course without touching the torch
already there, and the next cell imports ``helpers``; where ``helpers`` is present it does
nothing and prints nothing. The tool inserts it once (a second run changes nothing), and the
rhythm rules still hold: execution counts 1..N, the estimated minutes unchanged.

Tested offline, on copies of the notebooks: the source is a local wheel (``COURSE_PIP_SOURCE``);
Colab and Kaggle themselves cannot be reached from here and were not tested.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _installs import COURSE_INSTALL  # tests/ is on sys.path

from helpers import notebooks as lessons
from helpers.course import estimated_minutes

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("colab_cell", ROOT / "tools" / "colab_cell.py")
colab_cell = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(colab_cell)

SAMPLE = ("04_positional_encoding.ipynb", "10_trust_but_verify.ipynb")


def _without_setup_cell(nb):
    """``nb`` as it was before the tool first ran: no setup cell, execution counts one down."""
    nb.cells = [c for c in nb.cells if not colab_cell.is_setup_cell(c)]
    for c in _code(nb):
        if c.get("execution_count") is not None:
            c.execution_count -= 1
        for out in c.get("outputs", []):
            if out.get("execution_count") is not None:
                out["execution_count"] -= 1
    return nb


@pytest.fixture
def copies(tmp_path):
    """Two lessons as they were before the tool first ran (in ``before/``), and copies of them to
    run the tool on."""
    (tmp_path / "before").mkdir()
    for name in SAMPLE:
        nb = _without_setup_cell(nbformat.read(str(ROOT / "notebooks" / name), as_version=4))
        nbformat.write(nb, str(tmp_path / "before" / name))
        shutil.copy(tmp_path / "before" / name, tmp_path / name)
    return [tmp_path / name for name in SAMPLE]


def test_the_committed_lessons_hold_the_current_setup_cell():
    assert colab_cell.main(["--check"]) == 0  # python tools/colab_cell.py changes nothing


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_tool_inserts_the_cell_after_the_title_once_and_keeps_the_lessons_rules(copies):
    assert colab_cell.main([*map(str, copies), "--check"]) == 1
    assert colab_cell.main(list(map(str, copies))) == 0
    first_run = [p.read_bytes() for p in copies]
    assert colab_cell.main(list(map(str, copies))) == 0  # idempotent: nothing changes
    assert [p.read_bytes() for p in copies] == first_run
    assert colab_cell.main([*map(str, copies), "--check"]) == 0
    for args in (["format", "--check"], ["check"]):  # tests/test_style.py's rules hold
        ruff = [sys.executable, "-m", "ruff", *args, "--config", str(ROOT / "pyproject.toml")]
        run = subprocess.run([*ruff, *map(str, copies)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
    for path in copies:
        before = nbformat.read(str(path.parent / "before" / path.name), as_version=4)
        after = nbformat.read(str(path), as_version=4)
        setup = after.cells[1]  # after the lesson's title
        assert after.cells[0].cell_type == "markdown" and after.cells[0].source.startswith("# ")
        assert colab_cell.is_setup_cell(setup) and setup.source == colab_cell.cell_source()
        assert sum(colab_cell.is_setup_cell(c) for c in after.cells) == 1
        assert setup.outputs == []
        # every other cell as it was, its execution count one up (what a fresh run gives)
        assert [c.source for c in after.cells if c is not setup] == [c.source for c in before.cells]
        assert [c.outputs for c in _code(after)[1:]] != [] and all(
            a.get("outputs") == b.get("outputs") or _shifted(a, b)
            for a, b in zip(_code(after)[1:], _code(before), strict=True)
        )
        counts = [c.execution_count for c in _code(after) if c.source.strip()]
        assert counts == list(range(1, len(counts) + 1))  # tests/test_notebook_rhythm.py's rule
        assert estimated_minutes(json.loads(path.read_text())) == estimated_minutes(
            path.parent / "before" / path.name
        )
        # the student version keeps it as it is (it has no nbgrader metadata)
        student = lessons.student_version(json.loads(path.read_text()))
        assert "".join(student["cells"][1]["source"]) == setup.source


def _shifted(a, b) -> bool:
    """The same outputs but for execute_result counts one up."""
    strip = [{k: v for k, v in o.items() if k != "execution_count"} for o in a.outputs]
    return strip == [{k: v for k, v in o.items() if k != "execution_count"} for o in b.outputs]


def test_tool_moves_and_updates_a_stale_cell_and_refuses_two(copies):
    path = copies[0]
    colab_cell.main([str(path), "--tag", "v0.0.1"])
    nb = nbformat.read(str(path), as_version=4)
    assert "@v0.0.1" in nb.cells[1].source
    nb.cells.insert(2, nb.cells.pop(1))  # moved by hand
    nbformat.write(nb, str(path))
    colab_cell.main([str(path)])
    nb = nbformat.read(str(path), as_version=4)
    assert (
        colab_cell.is_setup_cell(nb.cells[1])
        and f"@{colab_cell.default_tag()}" in nb.cells[1].source
    )
    nb.cells.append(colab_cell.setup_cell())
    with pytest.raises(ValueError, match="2 cells are tagged"):
        colab_cell.apply(nb)
    with pytest.raises(ValueError, match="repository must be OWNER/NAME"):
        colab_cell.cell_source("not a repository")


def test_cell_installs_from_the_release_tag_of_the_readme_repository():
    source = colab_cell.cell_source()
    readme = (ROOT / "README.md").read_text()
    binder = set(re.findall(r"mybinder\.org/v2/gh/([^/]+/[^/]+)/", readme))
    assert binder == {colab_cell.REPOSITORY}
    tag = colab_cell.default_tag()
    assert f'"git+https://github.com/{colab_cell.REPOSITORY}@{tag}"' in source
    assert "--no-deps" in source
    # torch, numpy and matplotlib are installed only where they are missing, never upgraded
    assert "--upgrade" not in source and "-U " not in source and "==" not in source


def _ipython(python: str, code: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    script = cwd / "cells.ipy"
    script.write_text(code)
    return subprocess.run(
        [python, "-m", "IPython", "--no-banner", "--colors=NoColor", str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_cell_does_nothing_and_prints_nothing_where_helpers_is_installed(tmp_path):
    run = _ipython(sys.executable, colab_cell.cell_source(), tmp_path, dict(os.environ))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "" and "pip" not in run.stderr


@pytest.mark.slow
@pytest.mark.xdist_group(COURSE_INSTALL)  # beside test_installed_course.py: one wheel, one venv
def test_cell_installs_the_course_where_helpers_is_missing_and_keeps_torch(
    tmp_path, course_wheel, student_venv, student_env
):
    wheel, env, outside = course_wheel, dict(student_env), tmp_path / "outside"
    outside.mkdir()
    # what Colab has before the lesson (tests/conftest.py's student_venv): torch, numpy,
    # matplotlib, ipywidgets, IPython; no helpers
    python = str(student_venv / "bin" / "python")
    version = [python, "-c", "import torch, numpy; print(torch.__version__, numpy.__version__)"]
    before = subprocess.run(version, env=env, capture_output=True, text=True, check=True).stdout
    next_cell = (
        "\nimport anywidget\nimport helpers\nprint('next cell:', helpers.TransformerLM.__name__)\n"
    )
    env[colab_cell.ENV] = str(wheel)
    run = _ipython(python, colab_cell.cell_source() + next_cell, outside, env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Installed the course's helpers from {wheel}" in run.stdout
    assert "Also installed: anywidget" in run.stdout
    assert "Left as they were: torch 2.13.0" in run.stdout
    assert "next cell: TransformerLM" in run.stdout
    after = subprocess.run(version, env=env, capture_output=True, text=True, check=True).stdout
    assert after == before, "the cell changed the torch or numpy that was there"
    # run again, now that helpers is there: nothing
    again = _ipython(python, colab_cell.cell_source(), outside, env)
    assert again.returncode == 0 and again.stdout.strip() == "", again.stdout + again.stderr
