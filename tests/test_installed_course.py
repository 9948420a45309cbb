"""The course installed, not cloned (issue "a lesson a student can take alone"): a wheel of the
project keeps the torch already there, ``python -m helpers.notebooks DIR`` writes the lessons,
and each lesson run alone in an empty folder outside the repository gives its stored outputs.

The student versions ``helpers.notebooks`` writes are nbgrader's (the same code cells as
``tools/coursework.py release``); the wheel holds those student versions only (no solution, no
hidden test), written from the committed ``notebooks/`` at build time (setup.py).

The outside-the-repository test executes the *full* versions (the student versions stop at each
exercise's ``NotImplementedError``) and compares their outputs with the stored ones by nbval's
rules (tests/_outputs.py). Measured on the shared 2-core machine (a fresh venv, torch 2.13.0 from
the local wheel cache, then nine lessons one by one): 9 min 18 s at a load average near 10; this
whole file, 4 min 5 s at a load average of 3 to 4. More than the couple of minutes aimed at.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest
from _grading_notebooks import load_coursework
from _installs import COURSE_INSTALL, run_ok
from _outputs import compare_notebook  # tests/ is on sys.path

from helpers import notebooks as lessons
from helpers.course import NOTEBOOKS, part

ROOT = Path(__file__).resolve().parent.parent
TORCH = "2.13.0"


def _code_sources(nb) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _cell(kind, source, **nbgrader):
    cell = {
        "cell_type": kind,
        "source": source,
        "metadata": {"nbgrader": nbgrader} if nbgrader else {},
    }
    if kind == "code":
        cell.update(
            outputs=[{"output_type": "stream", "name": "stdout", "text": "4\n"}], execution_count=3
        )
    return cell


def test_student_version_stubs_solutions_drops_hidden_tests_and_clears_outputs():
    nb = {
        "cells": [
            _cell(
                "code",
                "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                solution=True,
            ),
            _cell("code", "x = 1\n", solution=True),
            _cell("markdown", "Why? ### BEGIN SOLUTION\nBecause.\n### END SOLUTION", solution=True),
            _cell("markdown", "Explain.", solution=True, grade=True),
            _cell(
                "code", "check(f)\n### BEGIN HIDDEN TESTS\nassert f(3) == 6\n### END HIDDEN TESTS\n"
            ),
            _cell("code", "print(4)"),
        ],
        "metadata": {},
    }
    before = json.dumps(nb)
    out = lessons.student_version(nb)
    assert json.dumps(nb) == before, "the instructor's notebook was changed in place"
    sources = ["".join(c["source"]) for c in out["cells"]]
    assert sources[0] == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    assert sources[1] == "# YOUR CODE HERE\nraise NotImplementedError()"
    assert sources[2] == "YOUR ANSWER HERE"
    assert sources[3] == "YOUR ANSWER HERE"
    assert sources[4] == "check(f)\n"
    assert sources[5] == "print(4)"
    code = [c for c in out["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def test_student_version_refuses_an_unclosed_solution_and_a_non_notebook():
    nb = {"cells": [_cell("code", "### BEGIN SOLUTION\nx = 1", solution=True)]}
    with pytest.raises(ValueError, match="END SOLUTION"):
        lessons.student_version(nb)
    with pytest.raises(TypeError, match="notebook must be"):
        lessons.student_version("04_positional_encoding.ipynb")


@pytest.mark.slow
def test_student_version_has_the_code_cells_of_the_nbgrader_release(tmp_path):
    coursework_ = load_coursework()
    lesson = part("6")
    built = coursework_.release([lesson], course_dir=tmp_path / "course", db=False)
    released = nbformat.read(str(built[coursework_.assignment_id(lesson)]), as_version=4)
    instructor = json.loads((ROOT / "notebooks" / lesson.notebook).read_text())
    mine = lessons.student_version(instructor)
    assert _code_sources(mine) == _code_sources(released)
    assert any("raise NotImplementedError()" in s for s in _code_sources(mine))


def test_write_lessons_writes_every_lesson_and_refuses_to_overwrite(tmp_path):
    written = lessons.write_lessons(tmp_path / "mine")
    assert sorted(p.name for p in written) == sorted(e.notebook for e in NOTEBOOKS)
    for path in written:
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, path.name
    with pytest.raises(FileExistsError, match="nothing was written"):
        lessons.write_lessons(tmp_path / "mine")
    with pytest.raises(ValueError, match="source must be a folder"):
        lessons.write_lessons(tmp_path / "other", source=tmp_path / "missing")
    with pytest.raises(TypeError, match="full must be"):
        lessons.write_lessons(tmp_path / "other", full="yes")


#: run by the fresh environment's Python: each notebook given executed alone, in its own folder
#: and with its kernel started there, one after the other in this one process (one interpreter
#: start and one import of nbclient for all the lessons, not one each); a lesson that fails is
#: reported and the next one still runs
RUNNER = """
import json, sys, traceback, nbformat
from nbclient import NotebookClient
failed = {}
for path, folder, executed in json.loads(sys.argv[1]):
    nb = nbformat.read(path, as_version=4)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": folder}}).execute()
    except Exception:
        failed[path] = traceback.format_exc()[-3000:]
    nbformat.write(nb, executed)
print(json.dumps(failed))
"""


@pytest.mark.slow
@pytest.mark.xdist_group(COURSE_INSTALL)  # beside test_colab_cell.py's install: one wheel, one venv
def test_wheel_keeps_torch_and_each_lesson_runs_alone_outside_the_repository(
    tmp_path, course_wheel, student_venv, student_env
):
    wheel, env = course_wheel, student_env
    # the wheel holds the student versions of the committed notebooks/, and nothing more
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            Path(n).name: json.loads(archive.read(n))
            for n in archive.namelist()
            if n.startswith("helpers/lessons/") and n.endswith(".ipynb")
        }
        leaked = [
            n
            for n in archive.namelist()
            if not n.endswith(".py")  # code may name the markers (helpers.notebooks removes them)
            and any(m in archive.read(n) for m in (b"BEGIN SOLUTION", b"BEGIN HIDDEN TESTS"))
        ]
    assert not leaked, f"the wheel holds solutions or hidden tests: {leaked}"
    assert sorted(shipped) == sorted(e.notebook for e in NOTEBOOKS)
    for name, nb in shipped.items():
        committed = json.loads((ROOT / "notebooks" / name).read_text())
        assert nb == lessons.student_version(committed), f"the wheel's {name} is not notebooks/'s"

    # a student's fresh environment: torch (and numpy, matplotlib, ipywidgets, IPython) already
    # there, the course not (tests/conftest.py's student_venv)
    python = str(student_venv / "bin" / "python")
    outside = tmp_path / "outside"  # this test's own folder outside the repository
    outside.mkdir()
    version = [python, "-c", "import torch; print(torch.__version__, torch.__file__)"]
    before = run_ok(version, env=env, cwd=outside).stdout
    install = run_ok(
        [python, "-m", "pip", "install", str(wheel), "ipykernel", "nbclient", "nbformat"],
        env=env,
        cwd=outside,
    )
    installed = [line for line in install.stdout.splitlines() if "Successfully installed" in line]
    assert installed and "transformer-block-course" in installed[0]
    assert " torch-" not in installed[0], installed[0]
    assert run_ok(version, env=env, cwd=outside).stdout == before, (
        "installing the course replaced torch"
    )
    assert before.startswith(TORCH)

    # the student versions, from the installed package
    students = outside / "lessons"
    out = run_ok([python, "-m", "helpers.notebooks", str(students)], env=env, cwd=outside)
    assert f"student versions of {len(NOTEBOOKS)} lessons" in out.stdout
    for name, nb in shipped.items():
        assert json.loads((students / name).read_text()) == nb
    # the full versions are not in the wheel
    refused = subprocess.run(
        [python, "-m", "helpers.notebooks", str(outside / "f"), "--full"],
        env=env,
        cwd=outside,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "student versions only" in refused.stderr
    # the full versions, given as an instructor would (--source), each executed alone
    full = outside / "full"
    run_ok(
        [
            python,
            "-m",
            "helpers.notebooks",
            str(full),
            "--full",
            "--source",
            str(ROOT / "notebooks"),
        ],
        env=env,
        cwd=outside,
    )
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    jobs = []
    for entry in NOTEBOOKS:
        alone = outside / entry.key  # an empty folder holding this one notebook
        alone.mkdir()
        (alone / entry.notebook).write_bytes((full / entry.notebook).read_bytes())
        executed = tmp_path / f"executed-{entry.notebook}"
        jobs.append((str(alone / entry.notebook), str(alone), str(executed)))
    ran = run_ok([python, str(runner), json.dumps(jobs)], env=env, cwd=outside)
    failed = json.loads(ran.stdout.splitlines()[-1])
    assert not failed, "\n\n".join(f"{path}:\n{error}" for path, error in failed.items())
    problems = []
    for entry, (_, _, executed) in zip(NOTEBOOKS, jobs, strict=True):
        live = nbformat.read(executed, as_version=4)  # sources joined, as stored
        problems += [
            f"{entry.notebook}: {p}"
            for p in compare_notebook(ROOT / "notebooks" / entry.notebook, live)
        ]
    assert not problems, "\n\n".join(problems)


def test_full_versions_from_a_clone_are_the_committed_notebooks(tmp_path, capsys):
    assert lessons.main([str(tmp_path / "full"), "--full"]) == 0
    assert f"full versions of {len(NOTEBOOKS)} lessons" in capsys.readouterr().out
    for entry in NOTEBOOKS:
        written = json.loads((tmp_path / "full" / entry.notebook).read_text())
        assert written == json.loads((ROOT / "notebooks" / entry.notebook).read_text())
