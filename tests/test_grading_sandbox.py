"""The grading sandbox holds no privilege of the host and one share of the machine per student
(tools/grading/confine.py, execute.py; docs/INSTRUCTORS.md section 3 point 2).

Adversarial notebooks run in the real confined kernel (``grading.execute.run``, the way every
submission and the instructor's reference are run), then one small course autograded with the
documented commands:

* run by a root grader, the notebook's code cannot read a file only root may read
  (``/etc/shadow``) and has no capability;
* several child processes together cannot hold more than the student's memory share, and
  crossing it stops the run with that reason;
* every place the notebook can write is bounded (``/dev/shm``, ``/tmp``, ``/grading``) or
  unwritable (``/dev``, the folder of the kernel's sockets);
* a cell that ignores SIGINT and sleeps is stopped at the limit per cell, the notebook's
  wall-clock limit stops a run too, and either is a zero with the reason in the gradebook's
  comment and on stderr, while an honest notebook keeps its points.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent

from _grading_notebooks import code_cell, python_notebook, run_coursework  # noqa: E402

from helpers.course import Lesson  # noqa: E402
from helpers.grading import PUBLIC_SECRET  # noqa: E402
from tools import coursework as cw  # noqa: E402
from tools.grading import confine, execute  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")


def run_cells(tmp_path: Path, monkeypatch, sources: list[str], **env: str):
    """Run ``sources`` as the cells of a notebook in the confined kernel, with ``env`` set (the
    GRADING_* limits); the notebook (with its outputs) and the outcome."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    nb = python_notebook([code_cell(s) for s in sources])
    course = tmp_path / "course"
    course.mkdir(exist_ok=True)
    outcome = execute.run(nb, nb, nb, course, PUBLIC_SECRET, skip=False)
    return nb, outcome


def text_of(cell) -> str:
    return "".join(o.get("text", "") or o.get("evalue", "") for o in cell.outputs)


def _share_available() -> bool:
    share = confine.Share(64 * 2**20, 16)
    try:
        return share.kind.startswith("cgroup")
    finally:
        share.close()


# ---- no privilege of the host ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the grader must run as root for this property")
def test_sandbox_a_root_grader_lends_the_notebook_no_host_privilege(tmp_path, monkeypatch):
    secret_of_grader = tmp_path / "course" / "gradebook.db"
    secret_of_grader.parent.mkdir()
    secret_of_grader.write_text("the grader's gradebook", encoding="utf-8")
    probe = (
        "import os\n"
        "for _path in ('/etc/shadow', 'GRADEBOOK'):\n"
        "    try:\n"
        "        print('read', _path, len(open(_path).read()))\n"
        "    except OSError as e:\n"
        "        print('refused', _path, type(e).__name__)\n"
        "_caps = [l.split() for l in open('/proc/self/status') if l.startswith('Cap')]\n"
        "print('capabilities', sorted({int(v, 16) for _, v in _caps}))\n"
        "try:\n"
        "    os.setuid(0)\n"
        "    print('became root')\n"
        "except OSError as e:\n"
        "    print('setuid refused', type(e).__name__)\n"
    ).replace("GRADEBOOK", str(secret_of_grader))
    # from the host: every process of the sandbox (bubblewrap included) is the unprivileged
    # host user, seen through the student's control group while a cell sleeps
    seen: dict[int, str] = {}
    done = threading.Event()

    def watch():
        own = confine._own_cgroups().get("memory") or confine._own_cgroups().get("")
        mounts = confine._cgroup_mounts()
        base = (mounts.get("memory") or mounts.get("")) / own.lstrip("/")
        while not done.is_set():
            for procs in base.glob("grading-*/cgroup.procs"):
                for pid in procs.read_text().split():
                    try:
                        status = Path(f"/proc/{pid}/status").read_text()
                    except OSError:
                        continue
                    seen[int(pid)] = re.search(r"^Uid:\s+(.*)$", status, re.M).group(1)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watching = _share_available()
    if watching:
        watcher.start()
    try:
        nb, outcome = run_cells(tmp_path, monkeypatch, [probe, "import time\ntime.sleep(3)"])
    finally:
        done.set()
    if watching:
        watcher.join()
        assert len(seen) >= 3, seen  # timeout, bwrap, the kernel at least
        assert set(seen.values()) == {"65534\t65534\t65534\t65534"}, seen
    out = text_of(nb.cells[0])
    assert "refused /etc/shadow PermissionError" in out, out
    assert f"refused {secret_of_grader} FileNotFoundError" in out, out
    assert "capabilities [0]" in out and "setuid refused" in out, out
    assert "read " not in out and "became root" not in out, out
    assert not outcome.problems, outcome.problems


@pytest.mark.skipif(os.geteuid() != 0, reason="only root has privileges to drop")
def test_sandbox_dropping_privileges_leaves_no_root_id_group_or_capability():
    """confine.drop_privileges, in a child process (it is for good)."""
    import subprocess

    code = (
        "import os; from tools.grading import confine\n"
        "confine.drop_privileges()\n"
        "print(os.getresuid(), os.getresgid(), os.getgroups())\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "(65534, 65534, 65534) (65534, 65534, 65534) []",
        "['0000000000000000']",
    ], out.stdout


def test_sandbox_settings_are_checked_with_a_clear_error(monkeypatch):
    monkeypatch.setenv("GRADING_SANDBOX_UID", "0")
    with pytest.raises(SystemExit, match="GRADING_SANDBOX_UID must be a whole number >= 1"):
        confine.sandbox_ids()
    monkeypatch.setenv("GRADING_SANDBOX_UID", "65534")
    monkeypatch.setenv("GRADING_SHM_MB", "lots")
    with pytest.raises(SystemExit, match="GRADING_SHM_MB must be a whole number >= 1, not 'lots'"):
        confine._env_int("GRADING_SHM_MB", 64)
    monkeypatch.setenv("GRADING_CELL_SECONDS", "0")
    with pytest.raises(ValueError, match="GRADING_CELL_SECONDS must be a whole number"):
        execute._cell_seconds(600)
    monkeypatch.delenv("GRADING_CELL_SECONDS")
    assert execute._cell_seconds(600) == 600
    with pytest.raises(ValueError, match="GRADING_SHARE must be 'auto' or 'watch', not 'cgroup'"):
        confine.Share(2**20, 1, "cgroup")


# ---- one share per student --------------------------------------------------------------------------
def _hog(together: bool) -> str:
    """A cell that starts three children of 600 MB each, all together or each after the one
    before said "held", and prints how many said so and how many hold their 600 MB at once."""
    start = (
        "_kids = [_start() for _ in range(3)]\n"
        if together
        else (
            "_kids = []\n"
            "for _ in range(3):\n"
            "    _kids.append(_start())\n"
            "    _kids[-1].said = _kids[-1].stdout.readline().strip() == 'held'\n"
        )
    )
    return (
        "import subprocess, sys, time\n"
        "_code = 'import time; b = bytes(1) * (600 << 20); print(\"held\", flush=True); time.sleep(30)'\n"
        "def _start():\n"
        "    return subprocess.Popen([sys.executable, '-c', _code], stdout=subprocess.PIPE, text=True)\n"
        + start
        + "for _k in _kids:\n"
        "    if not hasattr(_k, 'said'):\n"
        "        _k.said = _k.stdout.readline().strip() == 'held'\n"
        "time.sleep(1)\n"
        "print('children that said held:', sum(k.said for k in _kids))\n"
        "print('children holding 600 MB at once:', sum(k.said and k.poll() is None for k in _kids))\n"
    )


#: A child that said "held" may be the one the OOM killer chose when the next child's pages
#: crossed the share (the group's OOM killer takes the largest process, not the newest), so a child
#: holds its 600 MB when it said so and is still alive a second after the last one spoke: it only
#: sleeps after that, so three alive then are 1800 MB held together. Started one after another, the
#: control group's run says "held" three times and holds two at once (seen here); counting the
#: "held" lines alone failed once in a fresh-clone run of the children started together.
HOGS = [
    pytest.param(True, id="started-together"),
    pytest.param(False, id="started-one-after-another"),
]


#: Each share case runs under both ways of holding the share. Both stay for every case: a
#: control group and the watch hold it by different code for each (the HOG: memory.max against
#: the sum of the processes' proportional set sizes; the in-memory files: the group's page
#: accounting against what the watch reads of the sandbox's tmpfs folders; the threads: pids.max
#: against the watch's count of threads), so no variant is covered by another. They cost little
#: CPU: this whole file took 17.3 s user + 2.7 s system (/usr/bin/time, -n 0) in 155 s of wall
#: time, most of it waiting (kernels starting, limits reached, sleeps), so the root conftest.py
#: gives each case a group of its own (SPREAD) rather than keep the file on one worker.
SHARES = [
    pytest.param("auto", id="control-group"),
    pytest.param("watch", id="watched-by-the-grader"),
]


def _share_mode(mode: str) -> None:
    if mode == "auto" and not _share_available():
        pytest.skip("no control group can be made here (the grader watches instead)")


@pytest.mark.slow
@pytest.mark.parametrize("together", HOGS)
@pytest.mark.parametrize("mode", SHARES)
def test_sandbox_processes_together_hold_at_most_the_students_memory_share(
    tmp_path, monkeypatch, mode, together
):
    _share_mode(mode)
    # three children of 600 MB each, under a share of 1500 MB (each child is far under the
    # per-process address-space limit, which is the same 1500 MB)
    nb, outcome = run_cells(
        tmp_path,
        monkeypatch,
        [_hog(together), "print('after')"],
        GRADING_MEMORY_MB="1500",
        GRADING_SHARE=mode,
    )
    held = re.search(r"at once: (\d)", text_of(nb.cells[0]))
    assert held is None or int(held.group(1)) <= 2, text_of(nb.cells[0])
    assert outcome.stopped.startswith("the notebook used more than its share of memory (1500 MB")
    assert outcome.problems[0] == outcome.stopped
    expected = "per student (cgroup" if mode == "auto" else "per student, watched by the grader"
    assert outcome.sandbox.startswith(expected), outcome.sandbox


FILL_MEMORY = (
    "import time\n"
    "def fill(folder, mb):\n"
    "    for k in range(mb // 100):\n"
    "        with open(f'{folder}/f{k}', 'wb') as f:\n"
    "            for _ in range(100):\n"
    "                f.write(b'x' * 2**20)\n"
    "fill('/tmp', 400)\n"
    "fill('/grading', 400)\n"
    "time.sleep(2)\n"
    "print('all written')\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", SHARES)
def test_sandbox_in_memory_files_count_against_the_same_share(tmp_path, monkeypatch, mode):
    """800 MB in /tmp and /grading (each under its own 512 MB size, each file under the 256 MB
    file limit) and the kernel itself cross a 900 MB share together."""
    _share_mode(mode)
    nb, outcome = run_cells(
        tmp_path,
        monkeypatch,
        ["import torch", FILL_MEMORY],
        GRADING_MEMORY_MB="900",
        GRADING_SHARE=mode,
    )
    assert "all written" not in text_of(nb.cells[1])
    assert outcome.stopped.startswith("the notebook used more than its share of memory (900 MB")


THREADS = (
    "import threading, time\n"
    "_stop = threading.Event()\n"
    "_started = 0\n"
    "try:\n"
    "    for _ in range(80):\n"
    "        threading.Thread(target=_stop.wait, daemon=True).start()\n"
    "        _started += 1\n"
    "        time.sleep(0.02)\n"
    "except RuntimeError as e:\n"
    "    print('refused:', e)\n"
    "time.sleep(1)\n"
    "print('threads started:', _started)\n"
    "_stop.set()\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", SHARES)
def test_sandbox_processes_and_threads_are_bounded_per_student(tmp_path, monkeypatch, mode):
    _share_mode(mode)
    nb, outcome = run_cells(
        tmp_path, monkeypatch, [THREADS], GRADING_PROCESSES="60", GRADING_SHARE=mode
    )
    started = re.search(r"threads started: (\d+)", text_of(nb.cells[0]))
    assert started is None or int(started.group(1)) < 60, text_of(nb.cells[0])
    assert outcome.stopped == (
        "the notebook ran more processes and threads than its share (60 together); it was stopped"
    )


FILL = (
    "import os, ipykernel.connect\n"
    "def fill(path, mb):\n"
    "    n = 0\n"
    "    try:\n"
    "        with open(path, 'wb') as f:\n"
    "            for _ in range(mb):\n"
    "                f.write(b'x' * 2**20)\n"
    "                f.flush()\n"
    "                n += 1\n"
    "    except OSError as e:\n"
    "        return f'{path}: {n} MB, then {type(e).__name__}'\n"
    "    return f'{path}: {n} MB, all written'\n"
    "_sockets = os.path.dirname(ipykernel.connect.get_connection_file())\n"
    "for _path in ('/dev/shm/a', '/dev/a', '/tmp/a', '/grading/a', _sockets + '/a'):\n"
    "    print(fill(_path, 40).replace(_sockets, 'SOCKETS'))\n"
    "try:\n"
    "    os.chmod(_sockets, 0o777)\n"
    "    print('SOCKETS: made writable')\n"
    "except OSError as e:\n"
    "    print('SOCKETS: chmod refused', type(e).__name__)\n"
)


@pytest.mark.slow
def test_sandbox_every_place_the_notebook_can_write_is_bounded_or_unwritable(tmp_path, monkeypatch):
    nb, outcome = run_cells(
        tmp_path, monkeypatch, [FILL], GRADING_SHM_MB="8", GRADING_TMPFS_MB="16"
    )
    lines = dict(line.split(": ", 1) for line in text_of(nb.cells[0]).splitlines())
    assert lines["/dev/shm/a"] == "8 MB, then OSError", lines  # full: ENOSPC at 8 MB
    assert lines["/dev/a"] == "0 MB, then OSError", lines  # read-only
    assert lines["/tmp/a"] in ("15 MB, then OSError", "16 MB, then OSError"), lines
    assert lines["/grading/a"] in ("15 MB, then OSError", "16 MB, then OSError"), lines
    if os.geteuid() == 0:  # the grader can take the folder back only when it is root
        assert lines["SOCKETS/a"] == "0 MB, then PermissionError", lines
        assert lines["SOCKETS"] == "chmod refused PermissionError", lines
    assert not outcome.problems, outcome.problems


# ---- time: the sandbox is stopped, not interrupted ---------------------------------------------------
DEAF_SLEEP = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(300)\n"


@pytest.mark.slow
def test_sandbox_a_cell_that_ignores_sigint_is_stopped_at_the_limit_per_cell(tmp_path, monkeypatch):
    nb, outcome = run_cells(
        tmp_path,
        monkeypatch,
        ["print('first')", DEAF_SLEEP, "print('after')"],
        GRADING_CELL_SECONDS="5",
    )
    assert outcome.stopped == (
        "cell 2 ran longer than the grader's limit per cell (5 s); the notebook was stopped there"
    )
    assert outcome.problems[0] == outcome.stopped
    assert outcome.seconds < 60, outcome.seconds  # 5 s, the kernel's start, and a kill
    assert text_of(nb.cells[0]) == "first\n" and "after" not in text_of(nb.cells[2])


@pytest.mark.slow
def test_sandbox_the_wall_clock_limit_stops_the_run_with_its_reason(tmp_path, monkeypatch):
    _, outcome = run_cells(
        tmp_path, monkeypatch, [DEAF_SLEEP], GRADING_WALL_SECONDS="15", GRADING_CELL_SECONDS="200"
    )
    assert outcome.stopped == (
        "the notebook ran longer than the grader's wall-clock limit (15 s); it was stopped"
    ), outcome.problems
    assert outcome.seconds < 60, outcome.seconds


# ---- through the pipeline: a zero with the reason, an honest notebook untouched ----------------------
LESSON = Lesson(98, "sandbox exercise", "sandbox.ipynb", (), None, "sandbox")
SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
CHECK = (
    "assert double(2) == 4, 'double(2) is not 4'\n"
    "print('✓ passed')\n"
    "### BEGIN HIDDEN TESTS\n"
    "record('s_ex1', double, torch.arange(4, dtype=torch.float64))\n"
    "### END HIDDEN TESTS"
)


@pytest.mark.slow
def test_sandbox_a_notebook_over_its_time_scores_zero_with_the_reason_and_honest_ones_do_not(
    tmp_path, monkeypatch
):
    notebooks, course, downloads = tmp_path / "notebooks", tmp_path / "course", tmp_path / "dl"
    for folder in (notebooks, downloads):
        folder.mkdir()
    nb = python_notebook(
        [
            code_cell("import torch\nfrom helpers.grading import record"),
            code_cell(SOLUTION, solution=True, grade=False, locked=False, grade_id="s_ex1"),
            code_cell(CHECK, solution=False, grade=True, locked=True, points=2, grade_id="c1"),
        ]
    )
    nbformat.write(nb, notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    release_nb = nbformat.read(cw.student_notebook(LESSON, course), as_version=4)
    honest = nbformat.reads(nbformat.writes(release_nb), as_version=4)
    honest.cells[1].source = "def double(x):\n    return x + x"
    # the right answer, recorded, then a cell added at the end that ignores SIGINT and sleeps
    deaf = nbformat.reads(nbformat.writes(honest), as_version=4)
    deaf.cells.append(nbformat.v4.new_code_cell(DEAF_SLEEP))
    for name, sub in {"honest": honest, "deaf": deaf}.items():
        nbformat.write(sub, downloads / f"{name}.ipynb")
    assert run_coursework(cw, LESSON, course, "collect", "lesson98", str(downloads)).returncode == 0
    monkeypatch.setenv("GRADING_CELL_SECONDS", "30")
    monkeypatch.setenv("GRADING_WALL_SECONDS", "240")
    start = time.monotonic()
    graded = run_coursework(cw, LESSON, course, "autograde", "lesson98", "--jobs", "2")
    seconds = time.monotonic() - start
    scores = dict(re.findall(r"^(\w+): (\d+/\d+)", graded.stdout, flags=re.M))
    assert scores == {"honest": "2/2", "deaf": "0/2"}, (graded.stdout, graded.stderr)
    why = (
        "cell 4 ran longer than the grader's limit per cell (30 s); the notebook was stopped there"
    )
    assert f"deaf: NOT GRADED (0 points): {why}" in graded.stderr, graded.stderr
    assert seconds < 200, seconds  # far under the wall limit: stopped at 30 s
    # the run's log says which limits held the sandbox
    log = json.loads((course / ".grading" / "log" / "lesson98" / "deaf.json").read_text())
    expected = "per student (cgroup" if _share_available() else "per process only"
    assert log["sandbox"].startswith(expected), log

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db", "transformer-block") as gb:
        comment = gb.find_comment("s_ex1", "sandbox", "lesson98", "deaf").auto_comment
        assert why in comment, comment
        assert gb.find_comment("s_ex1", "sandbox", "lesson98", "honest").auto_comment.startswith(
            "✓"
        )
