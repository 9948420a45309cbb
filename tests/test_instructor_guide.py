"""docs/INSTRUCTORS.md, "A term, step by step", run as written: every ``bash`` block marked
``<!-- guide test: run -->`` is taken from the guide itself (not a paraphrase) and run in order
with bash, in a temporary copy of the course (the working tree's tracked files), with a home of
its own for the secret and the course environment first on PATH (what ``source
.venv/bin/activate`` does). The test plays the learning platform: between the release and the
collect it writes the platform's bulk download (Canvas names, the files' modification times as
submission times), two students who both answer every exercise right, Alice late within her
extension (the example settings give her two days), Bob a day late without one.

It checks what each step promises: the release exists; collect maps the Canvas names through the
roster and says which time it used; autograde names the secret file in use (never its content); the CSV gives Alice full marks and Bob the late penalty; the feedback
pages exist; after the guide's extension for Bob, a plain autograde grades him again and the CSV
gives him full marks.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "INSTRUCTORS.md"
SECTION = "## A term, step by step"
MARK = "<!-- guide test: run -->"
NOTEBOOK = "04_positional_encoding.ipynb"


def guide_blocks() -> list[str]:
    """The marked bash blocks of the walkthrough section, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    section = text[start:end]
    return re.findall(MARK + r"\n```bash\n(.*?)```", section, flags=re.DOTALL)


def test_the_walkthrough_has_its_steps_marked():
    blocks = guide_blocks()
    joined = "\n".join(blocks)
    for step in ("release", "collect", "autograde", "scores", "--csv", "generate_feedback"):
        assert step in joined, f"no marked block of the walkthrough runs {step}"
    assert len(blocks) >= 5


def _why_not() -> str | None:
    if shutil.which("bwrap") is None:
        return "grading is confined: `apt-get install bubblewrap`"
    if not (ROOT / "notebooks" / NOTEBOOK).exists():
        return f"notebooks/{NOTEBOOK} does not exist"
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return "the course copy is made from git's list of tracked files"
    return None


def _copy_course(dest: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (t.decode() for t in tracked)):
        if name.startswith("nbgrader/course_settings.py"):
            continue
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _download(course: Path, name: str, when: datetime) -> None:
    """The platform's copy of a submission: the instructor's answers, under a Canvas name."""
    downloads = course / "downloads"
    downloads.mkdir(exist_ok=True)
    path = downloads / name
    shutil.copy(course / "notebooks" / NOTEBOOK, path)
    os.utime(path, (when.timestamp(), when.timestamp()))


def _totals(csv_path: Path) -> dict[str, str]:
    with csv_path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return {r["SIS User ID"]: r["lesson04 total"] for r in rows if r["SIS User ID"]}


@pytest.mark.slow
@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
def test_the_guides_walkthrough_runs_as_written(tmp_path):
    blocks = guide_blocks()
    course, home = tmp_path / "course", tmp_path / "home"
    _copy_course(course)
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "JUPYTER"))}
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")]),
        VIRTUAL_ENV=sys.prefix,
        PIP_NO_BUILD_ISOLATION="0",  # build with this environment's setuptools, offline
    )
    outputs = []
    for block in blocks:
        if "tools.coursework collect" in block:
            # the platform's bulk download (due 2027-03-01 17:00 UTC in the example settings)
            _download(
                course, f"doealice_12345_6789012_{NOTEBOOK}", datetime(2027, 3, 2, 12, tzinfo=UTC)
            )
            _download(
                course,
                f"roebob_late_23456_6789013_{NOTEBOOK}",
                datetime(2027, 3, 2, 10, tzinfo=UTC),
            )
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=course,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert done.returncode == 0, (
            f"{block}\nexited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        outputs.append((block, done.stdout + done.stderr))
        if "--csv grades.csv" in block:
            outputs[-1] += (_totals(course / "grades.csv"),)

    # 2. the secret, 0600, in the instructor's home
    key = home / ".config" / "transformer-block-course" / "hidden-cases.key"
    assert key.exists() and (key.stat().st_mode & 0o077) == 0
    secret = key.read_text().strip()
    # 3. the students' wheel and their requirements, without the clone's editable line
    assert list((course / "dist").glob("transformer_block_course-*.whl"))
    assert "-e ." not in (course / "dist" / "requirements-student.txt").read_text()
    # 4. the release
    assert (course / "nbgrader" / "release" / "lesson04" / NOTEBOOK).exists()
    # 5. collect: Canvas names through the roster, the time it used
    collect = next(out for block, out, *_ in outputs if "tools.coursework collect" in block)
    assert "alice: submitted 2027-03-02 12:00:00" in collect, collect
    assert "from the file's modification time" in collect and "Canvas marked it late" in collect
    # 6. autograde says which secret, never what it holds
    grading = [(b, o, *r) for b, o, *r in outputs if "tools.coursework autograde" in b]
    first, regrade = grading[0], grading[1]
    assert f"grading with the secret in {key}" in first[1], first[1][-3000:]
    assert all(secret not in out for _, out, *_ in outputs)
    # nor the confined kernel's start-up banner (its standard output goes nowhere)
    assert not any("ipython kernel" in out or "--existing" in out for _, out, *_ in grading)
    totals = first[2]
    assert float(totals["S-001"]) == 6.0, totals  # alice: late, within her extension
    assert float(totals["S-002"]) < 6.0, totals  # bob: a day late, 10 % off
    feedback = course / "nbgrader" / "feedback"
    for student in ("alice", "bob"):
        assert list((feedback / student / "lesson04").glob("*.html")), student
    # 7. bob's extension: graded again, full marks
    assert "bob: the due date, extension or late policy changed" in regrade[1], regrade[1][-3000:]
    assert float(regrade[2]["S-002"]) == 6.0, regrade[2]
