"""The grader's caps, its sandbox without network, and hidden inputs drawn from the instructor's
secret (tools/grading/limits.py, confine.py, helpers.grading.hidden_seed / hidden_cases).

Unit tests of the caps (fast), then one small nbgrader course autograded with the documented
commands, first with the public hidden cases, then with an instructor's secret:

* a submission over a cap (a cell too long, brackets nested too deep, a file too large) gets 0
  with the reason and is never parsed nor run, and the others are graded;
* a cell that prints more than a cell may keep keeps its points, and its output ends with a note;
* the notebook's code cannot open a connection, neither to the outside nor to the grader's own
  loopback, while the notebook is graded as usual;
* with a secret, the hidden cases' inputs differ from the public ones (their digests in the
  instructor's records), honest answers keep full marks and a wrong one 0, and the feedback
  shows no hidden test, seed or secret.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent

from _grading_notebooks import code_cell, python_notebook, run_coursework  # noqa: E402

from helpers.course import Lesson  # noqa: E402
from helpers.grading import derive_seed  # noqa: E402
from tools import coursework as cw  # noqa: E402
from tools.grading import limits  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"


# ---- the caps, in this process -----------------------------------------------------------------
def test_limits_a_cell_too_long_or_nested_too_deep_is_refused_unparsed():
    with pytest.raises(limits.OverLimit, match="cell 2 is 50,001 characters long"):
        limits.check_notebook({"cells": [{"source": "x = 1"}, {"source": "#" * 50_001}]})
    with pytest.raises(limits.OverLimit, match="nests brackets 51 deep"):
        limits.check_source("(" * 51 + ")" * 51)
    with pytest.raises(limits.OverLimit, match="not text"):
        limits.check_notebook({"cells": [{"source": 3}]})
    limits.check_source("f(" * 50 + ")" * 50)  # at the cap: accepted


def test_limits_leave_the_lessons_room():
    """A check of the caps: every committed lesson (instructor version, outputs included) is
    well under each of them (a tenth of each size cap, a fifth of the nesting cap)."""
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        limits.check_file(path)
        assert path.stat().st_size < limits.MAX_NOTEBOOK_BYTES / 10, path.name
        nb = json.loads(path.read_text(encoding="utf-8"))
        sources = ["".join(c["source"]) for c in nb["cells"]]
        assert max(map(len, sources)) < limits.MAX_CELL_CHARS / 10, path.name
        assert sum(map(len, sources)) < limits.MAX_SOURCE_CHARS / 5, path.name
        assert max(map(limits.nesting, sources)) < limits.MAX_NESTING / 5, path.name


# ---- a small course, autograded -------------------------------------------------------------------
LESSON = Lesson(99, "synthetic exercise", "synthetic.ipynb", (), None, "synthetic")
SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
CHECK = (
    "assert torch.allclose(double(torch.ones(2)), 2 * torch.ones(2)), 'double(ones) is not 2'\n"
    "print('✓ passed')\n"
    "### BEGIN HIDDEN TESTS\n"
    "_g = torch.Generator().manual_seed(hidden_seed('s_ex1', 5))\n"
    "record('s_ex1', double, torch.randn(3, generator=_g, dtype=torch.float64))\n"
    "for _n in hidden_cases('s_ex1', (2, 7), lambda rng: [rng.randrange(2, 9) for _ in range(2)]):\n"
    "    record('s_ex1', double, torch.arange(_n, dtype=torch.float64))\n"
    "### END HIDDEN TESTS"
)
NETWORK = (
    "import socket\n"
    "def double(x):\n    return x + x\n"
    "for _addr in (('127.0.0.1', PORT), ('1.1.1.1', 53)):\n"
    "    try:\n"
    "        socket.create_connection(_addr, timeout=3).close()\n"
    "        print('connected', _addr)\n"
    "    except OSError as e:\n"
    "        print('blocked', _addr, type(e).__name__)"
)
ANSWERS = {
    "honest": "def double(x):\n    return x + x",
    "wrong": "def double(x):\n    return 2.02 * x",
    "loud": "print('x' * 5_000_000)\ndef double(x):\n    return x * 2",
    "long_cell": "def double(x):\n    return x + x\n" + "#" * 60_000,
    "deep_nesting": "def double(x):\n    return x + x\n_ = " + "[" * 60 + "]" * 60,
    "network": NETWORK,
}
OVER = ("long_cell", "deep_nesting", "big_file")


def _scores(out: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+): (\d+/\d+)", out, flags=re.M))


def _run(course: Path, *args: str) -> subprocess.CompletedProcess:
    """The documented command line, in this process (lesson99 is not one of the course's)."""
    return run_coursework(cw, LESSON, course, *args)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`")
    base = tmp_path_factory.mktemp("limits")
    notebooks, course, downloads = base / "notebooks", base / "course", base / "downloads"
    for folder in (notebooks, downloads):
        folder.mkdir()
    cell = code_cell
    nb = python_notebook(
        [
            cell("import torch\nfrom helpers.grading import hidden_cases, hidden_seed, record"),
            cell(SOLUTION, solution=True, grade=False, locked=False, grade_id="s_ex1"),
            cell(CHECK, solution=False, grade=True, locked=True, points=2, grade_id="s_ex1_check"),
        ]
    )
    nbformat.write(nb, notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    release_nb = nbformat.read(cw.student_notebook(LESSON, course), as_version=4)
    server = socket.socket()  # a service on the grader's loopback, for the notebook to reach
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    subs = {"instructor": nbformat.read(notebooks / LESSON.notebook, as_version=4)}
    for name, answer in ANSWERS.items():
        sub = nbformat.reads(nbformat.writes(release_nb), as_version=4)
        sub.cells[1].source = answer.replace("PORT", str(server.getsockname()[1]))
        subs[name] = sub
    big = nbformat.reads(nbformat.writes(subs["honest"]), as_version=4)
    big.cells[0].outputs = [nbformat.v4.new_output("stream", text="y" * (21 * 2**20))]
    subs["big_file"] = big
    for name, sub in subs.items():
        nbformat.write(sub, downloads / f"{name}.ipynb")
    assert _run(course, "collect", "lesson99", str(downloads)).returncode == 0

    start = time.perf_counter()
    public = _run(course, "autograde", "lesson99", "--jobs", "2")
    seconds = time.perf_counter() - start
    server.setblocking(False)
    try:
        server.accept()
        reached = True
    except BlockingIOError:
        reached = False
    server.close()
    public_scores = _run(course, "scores", "lesson99").stdout
    autograded = {
        name: nbformat.read(course / "autograded" / name / "lesson99" / LESSON.notebook, 4)
        for name in ("loud", "network")
    }
    references = set((course / ".grading" / "reference" / "lesson99").glob("*.json"))

    # the same course graded again with an instructor's secret
    secret = base / "secret" / "hidden-cases.key"
    secret.parent.mkdir(mode=0o700)
    secret.write_text("a secret of the instructor's, 0123456789abcdef\n", encoding="utf-8")
    secret.chmod(0o600)
    os.environ["COURSE_GRADING_SECRET_FILE"] = str(secret)
    try:
        with_secret = _run(course, "autograde", "lesson99", "--jobs", "2", "--force")
        secret_scores = _run(course, "scores", "lesson99").stdout
        feedback = cw.nbgrader(course, "generate_feedback", "lesson99", "--force", check=False)
    finally:
        del os.environ["COURSE_GRADING_SECRET_FILE"]
    (secret_reference,) = set((course / ".grading" / "reference" / "lesson99").glob("*.json")) - (
        references
    )
    return {
        "course": course,
        "public": public,
        "public_scores": _scores(public_scores),
        "seconds": seconds,
        "reached": reached,
        "autograded": autograded,
        "public_reference": references,
        "secret": secret,
        "with_secret": with_secret,
        "secret_scores": _scores(secret_scores),
        "secret_reference": secret_reference,
        "feedback": feedback,
    }


needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")


@needs_bwrap
@pytest.mark.slow
def test_limits_a_submission_over_a_cap_scores_zero_with_the_reason_and_the_others_are_graded(
    graded,
):
    scores, err = graded["public_scores"], graded["public"].stderr
    for name in OVER:
        assert scores[name] == "0/2", (name, scores, err)
        assert re.search(
            rf"^{name}: NOT GRADED \(0 points\): over the grader's limits: ", err, re.M
        )
        # never run: nbgrader wrote no autograded notebook for it
        assert not (graded["course"] / "autograded" / name).exists()
    assert "long_cell: NOT GRADED (0 points): over the grader's limits: cell 2 is" in err
    assert "deep_nesting: NOT GRADED (0 points): over the grader's limits: cell 2 nests" in err
    assert "big_file: NOT GRADED (0 points): over the grader's limits: the notebook file is" in err
    assert scores["instructor"] == scores["honest"] == "2/2" and scores["wrong"] == "0/2", scores


@needs_bwrap
@pytest.mark.slow
def test_limits_a_cell_that_prints_too_much_keeps_its_points_and_says_what_was_left_out(graded):
    assert graded["public_scores"]["loud"] == "2/2", graded["public"].stderr
    outputs = graded["autograded"]["loud"].cells[1].outputs
    text = "".join(o.get("text", "") for o in outputs)
    assert "of this cell's output; the rest was left out" in text
    assert len(text) < limits.MAX_OUTPUT_PER_CELL + 1000  # the 5,000,000 characters cut


@needs_bwrap
@pytest.mark.slow
def test_limits_the_graded_notebook_reaches_no_network_and_is_graded(graded):
    text = "".join(o.get("text", "") for o in graded["autograded"]["network"].cells[1].outputs)
    assert "blocked ('127.0.0.1'" in text and "blocked ('1.1.1.1', 53)" in text, text
    assert "connected" not in text and not graded["reached"]
    assert graded["public_scores"]["network"] == "2/2", graded["public"].stderr


@needs_bwrap
@pytest.mark.slow
def test_secret_the_graded_inputs_differ_from_the_public_ones_and_grades_agree(graded):
    def inputs(path):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return [e["inputs"] for cases in data["cases"].values() for c in cases.values() for e in c]

    (public,) = graded["public_reference"]
    public_inputs, secret_inputs = inputs(public), inputs(graded["secret_reference"])
    assert len(public_inputs) == len(secret_inputs) == 3  # one hidden_seed case, two hidden_cases
    assert not set(public_inputs) & set(secret_inputs), (public_inputs, secret_inputs)
    assert "no secret set" not in graded["with_secret"].stderr
    scores = graded["secret_scores"]
    for name in ("instructor", "honest", "loud", "network"):
        assert scores[name] == "2/2", (name, scores, graded["with_secret"].stderr)
    for name in ("wrong", *OVER):
        assert scores[name] == "0/2", (name, scores)


@needs_bwrap
@pytest.mark.slow
def test_secret_feedback_shows_no_hidden_test_seed_or_secret(graded):
    pages = sorted((graded["course"] / "feedback").glob("*/lesson99/*.html"))
    assert {p.parent.parent.name for p in pages} >= {"instructor", "honest", "wrong"}, graded[
        "feedback"
    ].stderr[-3000:]
    secret = graded["secret"].read_bytes().strip()
    seed = str(derive_seed(secret, "s_ex1"))
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "✓ passed" in html or page.parent.parent.name != "instructor"
        # the hidden tests' code (the import cell, which names hidden_seed, is not theirs)
        for hidden in ("BEGIN HIDDEN", "manual_seed(hidden_seed", "hidden_cases(", "record(",
                       "rng.randrange", seed, secret.decode()):  # fmt: skip
            assert hidden not in html, (page, hidden)
