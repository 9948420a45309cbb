"""Run a notebook in the confined grading kernel, and the nbgrader preprocessor that does it.

:func:`run` is the one way the course executes a notebook to grade it (a submission, or the
instructor's source for the reference): the cells :mod:`plan` keeps, in order, in a kernel
started by ``confine.py`` from a folder private to this process (:mod:`channel`); each check
cell's visible part and its hidden tests are sent as two requests, so that the hidden tests run
whatever the visible check did, and their outputs are kept out of the notebook (the feedback and
the autograded notebook never show them). The records come back through the channel only
(:class:`channel.Receiver`, a socket): after each request completes, what arrived during it is
labelled with it, and only what arrived during a hidden-test request can count as a case, so
nothing the notebook's code does afterwards (a cell added at the end, a hook, the kernel's
shutdown) changes a record already taken.

:class:`ConfinedExecute` puts :func:`run` in nbgrader's autograde pipeline in place of nbgrader's
``Execute`` (the course's ``nbgrader_config.py`` configures it), so that ``nbgrader autograde``,
the formgrader's button included, grades confined.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbgrader.preprocessors import Execute

from . import channel, limits, settings
from . import plan as planner
from .confine import Share, seal_sockets, stage_folder

HERE = Path(__file__).resolve().parent
KERNEL = "course-confined"
BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def split_hidden(source: str) -> tuple[str, str]:
    """(the visible part, the hidden tests with their markers) of a check cell's source."""
    lines = source.splitlines(keepends=True)
    begin = next((i for i, line in enumerate(lines) if BEGIN in line), None)
    if begin is None:
        return source, ""
    end = next((i for i in range(begin, len(lines)) if END in lines[i]), len(lines) - 1)
    visible = "".join(lines[:begin] + lines[end + 1 :]).rstrip("\n")
    return visible, "".join(lines[begin : end + 1])


def _nbg(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def solution_ids(nb) -> list[str]:
    return [
        _nbg(c)["grade_id"]
        for c in nb.cells
        if _nbg(c).get("solution") and not _nbg(c).get("grade")
    ]


def hidden_tests(source_nb) -> dict[str, str]:
    """{check cell grade_id: its hidden tests}, from the instructor's source."""
    found = {}
    for cell in source_nb.cells:
        meta = _nbg(cell)
        if cell.cell_type == "code" and meta.get("grade"):
            hidden = split_hidden(cell.source)[1]
            if hidden:
                found[meta["grade_id"]] = hidden
    return found


def install_kernel(folder: Path) -> str:
    """Write the confined kernelspec under ``folder`` and return the JUPYTER_PATH entry."""
    spec_dir = Path(folder) / "kernels" / KERNEL
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, str(HERE / "confine.py"), "{connection_file}"],
        "display_name": "Python 3 (confined, for grading)",
        "language": "python",
    }
    path = spec_dir / "kernel.json"
    text = json.dumps(spec, indent=1)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return str(folder)


@dataclass
class Outcome:
    """What one graded run did."""

    records: channel.Records
    skipped: list[int]
    problems: list[str] = field(default_factory=list)
    hidden_outputs: dict[str, list] = field(default_factory=dict)
    seconds: float = 0.0
    #: which limits held the sandbox: a control group, or the grader's watch (``Share``)
    sandbox: str = ""
    #: why the run was stopped and the notebook scores 0 (a limit crossed, the kernel dead);
    #: also the first of ``problems``, and then no record counts
    stopped: str = ""


def grading_folder(course_root: Path) -> Path:
    """The course folder's private working folder (0700): kernels, runs, references, logs."""
    folder = Path(course_root) / ".grading"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def seeds_for(source_nb, secret: bytes) -> dict:
    """{exercise: seed} derived from the instructor's secret (empty for the public default)."""
    import helpers.grading as recorder

    if secret == recorder.PUBLIC_SECRET:
        return {}
    return {x: recorder.derive_seed(secret, x) for x in solution_ids(source_nb)}


def run(
    nb,
    source_nb,
    release_nb,
    course_root: Path,
    secret: bytes,
    *,
    skip: bool = True,
    timeout: int = 600,
    startup_timeout: int = 120,
    log=None,
) -> Outcome:
    """Execute ``nb`` (changed in place: outputs, execution counts) confined; see the module
    docstring. Never raises for what the notebook does; problems are reported in the outcome.

    The whole sandbox is stopped (killed, not interrupted) when a cell runs longer than
    ``timeout`` seconds (``GRADING_CELL_SECONDS`` overrides it), when the notebook crosses its
    wall-clock limit or its memory share, or when the kernel dies: the outcome's ``stopped``
    says which, no record of that run counts, and the notebook scores 0 with that reason."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    start = time.perf_counter()
    course_root = Path(course_root)
    try:
        limits.check_notebook(nb)  # before anything parses a cell
    except limits.OverLimit as e:
        return Outcome(channel.Records(), [], [f"over the grader's limits: {e}"])
    private = grading_folder(course_root)
    kernels = install_kernel(private / "kernels")
    plan = planner.plan(nb, release_nb, enabled=skip)
    hidden = hidden_tests(source_nb)
    seeds = seeds_for(source_nb, secret)
    box = channel.new_run(private / "runs")
    timeout = _cell_seconds(timeout)
    wall = int(os.environ.get("GRADING_WALL_SECONDS", "1200"))
    share = Share.from_env()  # this student's share of memory and processes
    # the kernel's sockets: Unix sockets in a folder of their own, bound into the sandbox (which
    # has no network); a short path, as a Unix socket's path holds at most 107 bytes
    sockets = Path(tempfile.mkdtemp(prefix="grading-ipc-", dir=_short_tmp()))
    outcome = Outcome(channel.Records(), plan.skipped)
    outcome.sandbox = share.describe()
    receiver = None
    index = -1
    started = time.monotonic()
    try:
        channel.write_startup(box, not seeds, seeds, list(hidden.values()))
        receiver = channel.Receiver(box)
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
        env.update(
            GRADING_STARTUP=str(box.startup),
            GRADING_RECORDS=str(box.records),
            JUPYTER_PATH=os.pathsep.join(
                p for p in (kernels, os.environ.get("JUPYTER_PATH", "")) if p
            ),
            PYDEVD_DISABLE_FILE_VALIDATION="1",
            **share.env(),
        )
        os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]  # the kernelspec manager reads it here
        client = CappedClient(
            nb,
            km=_kernel_manager(sockets),
            timeout=timeout,
            startup_timeout=startup_timeout,
            kernel_name=KERNEL,
            allow_errors=True,
            # a cell over its time is not interrupted (a cell can ignore SIGINT): the run stops
            # there, and the kernel is killed on the way out (its whole sandbox, below)
            interrupt_on_timeout=False,
            shutdown_kernel="immediate",
            resources={"metadata": {"path": str(box.folder)}},
        )
        try:
            # cleanup_kc: the kernel manager is ours, the kernel is shut down all the same
            with client.setup_kernel(env=env, cwd=str(box.folder), cleanup_kc=True):
                seal_sockets(sockets)  # the kernel has bound its sockets: no more writing there
                share.watch(client.km.provisioner.process.pid)  # where no control group holds it
                _no_blocking_send(client)
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    if index not in plan.run:
                        cell.outputs, cell.execution_count = [], None
                        continue
                    _alive(client, index)
                    if _too_deep(cell.source):
                        cell.outputs, cell.execution_count = [_TOO_DEEP], None
                        continue
                    grade_id = _nbg(cell).get("grade_id")
                    if _nbg(cell).get("grade") and grade_id in hidden:
                        _run_check_cell(client, cell, index, hidden[grade_id], outcome, receiver)
                    else:
                        try:
                            client.execute_cell(cell, index)
                        finally:
                            receiver.mark("cell", f"cell {index}")
        except CellTimeoutError:
            outcome.stopped = (
                f"cell {index + 1} ran longer than the grader's limit per cell ({timeout} s); "
                "the notebook was stopped there"
            )
        except DeadKernelError as e:
            outcome.stopped = f"the kernel died ({str(e).splitlines()[0][:120]})"
            if time.monotonic() - started >= wall - 1:
                outcome.stopped = (
                    f"the notebook ran longer than the grader's wall-clock limit ({wall} s); "
                    "it was stopped"
                )
        except Exception as e:  # noqa: BLE001 - a kernel that would not start ...
            outcome.problems.append(f"the notebook could not be run: {type(e).__name__}: {e}"[:300])
        share.kill()  # whatever the kernel left running, at once
        if share.over_processes():
            outcome.stopped = (
                f"the notebook ran more processes and threads than its share ({share.processes} "
                "together); it was stopped"
            )
        if share.oom_kills():
            outcome.stopped = (
                f"the notebook used more than its share of memory ({share.memory // 2**20} MB "
                "for all its processes and in-memory files together); it was stopped"
            )
        outcome.records = receiver.records()
        if outcome.stopped:  # a zero with the reason, whatever was recorded before
            outcome.problems.insert(0, outcome.stopped)
            outcome.records = channel.Records()
    finally:
        if receiver is not None:
            receiver.close()
        share.close()
        box.remove()
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(stage_folder(sockets), ignore_errors=True)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _cell_seconds(timeout: int) -> int:
    """The limit per cell: ``GRADING_CELL_SECONDS`` if set, else ``timeout`` (nbgrader's)."""
    raw = os.environ.get("GRADING_CELL_SECONDS")
    if raw is None:
        return int(timeout)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"GRADING_CELL_SECONDS must be a whole number of seconds >= 1, not {raw!r}"
        )
    return value


#: What a cell too deeply nested to compile gets instead of running (IPython lets the compiler's
#: RecursionError escape its cell runner: the kernel never answers, and the run would wait for
#: nbgrader's per-cell timeout). Python cannot run such a cell anyway.
_TOO_DEEP = nbformat.v4.new_output(
    "error",
    ename="RecursionError",
    evalue="this cell is nested too deeply for Python to compile it (not run)",
    traceback=["RecursionError: this cell is nested too deeply for Python to compile it (not run)"],
)


def _too_deep(source: str) -> bool:
    """Whether Python's compiler gives up on this cell (RecursionError, MemoryError)."""
    import ast

    code, _ = planner.python_source(source)
    try:
        ast.parse(code)
    except (RecursionError, MemoryError):
        return True
    except (SyntaxError, ValueError):
        return False  # the kernel says what is wrong, at once
    return False


def _short_tmp() -> str | None:
    """The system's temporary folder if its path is short enough for Unix sockets in it."""
    folder = tempfile.gettempdir()
    return folder if len(folder) < 40 else ("/tmp" if os.path.isdir("/tmp") else None)


def _kernel_manager(sockets: Path):
    """A kernel manager whose kernel listens on Unix sockets in ``sockets`` (transport "ipc":
    the confined kernel has no network, not even the grader's loopback), its ZeroMQ context set
    to refuse messages over :data:`limits.MAX_MESSAGE_BYTES` (not shown to hold, see there)."""
    import zmq
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(
        kernel_name=KERNEL,
        transport="ipc",
        ip=str(sockets / "k"),
        connection_file=str(sockets / "kernel.json"),
    )
    km.context.setsockopt(zmq.MAXMSGSIZE, limits.MAX_MESSAGE_BYTES)
    return km


class CappedClient(NotebookClient):
    """nbclient's client, except that each cell keeps at most :data:`limits.MAX_OUTPUT_PER_CELL`
    of output, counted as the messages arrive: the rest is dropped, and the cell's outputs end
    with a note saying so (the worker's memory no longer grows with what a cell prints)."""

    CAPPED = ("stream", "display_data", "execute_result", "error", "update_display_data")

    def process_message(self, msg, cell, cell_index):
        kind = msg.get("msg_type", "")
        if kind in self.CAPPED or kind.startswith("comm"):
            kept = getattr(self, "_kept", None)
            if kept is None:
                kept = self._kept = {}
            used, noted = kept.get(id(cell), (0, False))
            size = limits.output_size(msg.get("content") or {})
            if used + size > limits.MAX_OUTPUT_PER_CELL:
                if not noted:
                    cell.outputs.append(
                        nbformat.v4.new_output(
                            "stream",
                            name="stderr",
                            text=f"[the grader kept the first {limits.MAX_OUTPUT_PER_CELL // 2**20}"
                            " MiB of this cell's output; the rest was left out]\n",
                        )
                    )
                kept[id(cell)] = (used, True)
                return None
            kept[id(cell)] = (used + size, noted)
        return super().process_message(msg, cell, cell_index)


def _no_blocking_send(client) -> None:
    """A request to a kernel that died (the notebook's code can kill its own kernel) fails
    after a few seconds instead of blocking forever (a ZMQ send with no peer waits)."""
    import zmq

    for wire in (client.kc.shell_channel, client.kc.control_channel):
        wire.socket.setsockopt(zmq.SNDTIMEO, 10_000)


def _alive(client, index: int) -> None:
    from jupyter_core.utils import run_sync
    from nbclient.exceptions import DeadKernelError

    if not run_sync(client.km.is_alive)():
        raise DeadKernelError(f"the kernel had died before cell {index}")


def _run_check_cell(client, cell, index: int, hidden: str, outcome: Outcome, receiver) -> None:
    """The visible part, then the instructor's hidden tests as their own request (their outputs
    kept aside, never in the notebook); the channel marked after each (only the second's cases
    count)."""
    visible, _ = split_hidden(cell.source)
    shown = nbformat.v4.new_code_cell(visible)
    try:
        client.execute_cell(shown, index)
    finally:
        receiver.mark("cell", f"cell {index}, the visible check")
    _alive(client, index)
    secret_part = nbformat.v4.new_code_cell(hidden)
    try:
        client.execute_cell(secret_part, index, store_history=False)
    finally:
        receiver.mark(channel.HIDDEN, _nbg(cell).get("grade_id", f"cell {index}"))
    client.nb.cells[index] = (
        cell  # nbclient puts the cell it ran in the notebook: the real one back
    )
    cell.outputs, cell.execution_count = shown.outputs, shown.execution_count
    outcome.hidden_outputs[_nbg(cell)["grade_id"]] = secret_part.outputs


# ---------------------------------------------------------------------------------------------
# nbgrader's side
# ---------------------------------------------------------------------------------------------


def course_paths(config, resources) -> tuple[Path, Path, Path]:
    """(course root, instructor source notebook, student release notebook) of a notebook
    nbgrader is autograding."""
    root = Path(config.CourseDirectory.root or os.getcwd()).resolve()
    meta = resources["nbgrader"]
    name = f"{meta['notebook']}.ipynb"
    source = root / "source" / meta["assignment"] / name
    release = root / "release" / meta["assignment"] / name
    return root, source, release


class ConfinedExecute(Execute):
    """nbgrader's ``Execute``, replaced: the notebook runs in the confined grading kernel, from a
    private folder, with the course's demonstration cells skipped (:func:`run`). The records it
    wrote go to ``resources["grading"]`` for :class:`grading.saveverdicts.SaveVerdicts`."""

    def preprocess(self, nb, resources):
        root, source_path, release_path = course_paths(self.config, resources)
        options = settings.CourseGrading(config=self.config)
        grading = resources.setdefault("grading", {})
        try:
            source = nbformat.read(str(source_path), as_version=4)
            release = nbformat.read(str(release_path), as_version=4)
            secret, _ = settings.secret(options)
        except (OSError, ValueError, SystemExit) as e:
            grading["outcome"] = Outcome(channel.Records(), [], [f"cannot grade: {e}"])
            return nb, resources
        grading["outcome"] = run(
            nb,
            source,
            release,
            root,
            secret,
            skip=options.skip_demonstrations,
            timeout=self.timeout or 600,
        )
        grading["source"] = source
        return nb, resources
