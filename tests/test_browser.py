"""The lessons as a student sees them: JupyterLab in a real browser (headless Chromium).

nbval proves the kernel side; this proves the page. One JupyterLab server (loopback, free port,
random token, the repository root as root dir) and one Chromium per pytest-xdist worker that runs
any of these tests, kept for the worker's whole session; both are stopped at the end whatever
happened. For each notebook of ``helpers.course.NOTEBOOKS`` (every lesson and its "Going
further" companion) that exists, in JupyterLab:

1. open it, clear the stored outputs (Edit > Clear Outputs of All Cells), Run > Run All Cells,
   wait until the kernel is idle;
2. every code cell ran in this session (a fresh execution count, in order);
3. no error output anywhere (tracebacks and stderr) except in cells tagged ``raises-exception``,
   and each of those does show its error;
4. every widget output rendered (a widget view, no "Error displaying widget", nothing left
   "Loading widget...");
5. the explorer's picture is present (an ``<img>`` inside the widget, decoded, non-empty) and
   carries the explorer's description as its ``alt``;
6. the explorer's main control (its first slider, range or choice) moved from the keyboard, as a
   student without a mouse moves it (focus, then End/Home or the arrow keys; for a choice the
   down arrow, which on an ipywidgets dropdown moves JupyterLab's cell instead, ipywidgets
   #3912), changes the picture (the image's bytes differ, not only its URL) and its description,
   and leaves JupyterLab's active cell where it was;
7. the page never tried to save the notebook (autosave is off, and the test server refuses and
   records any save, so the committed files are never rewritten);
8. the outputs JupyterLab computed reproduce the stored ones, compared cell by cell with nbval's
   own rules (``tests/_outputs.py``), and every number printed through ``helpers.printing.fmt``
   is farther from a rounding boundary than its error bound (``tools/float_margins.py``). The
   server's kernels run with torch's portable kernels (``ATEN_CPU_CAPABILITY=default``) and
   another thread count than nbval's, so this run is also the portable-outputs check of
   CONTRIBUTING.md, "Numbers in stored outputs" (``tests/test_portable_outputs.py`` runs it
   without a browser when this run does not).
9. axe (``axe-playwright-python``, axe-core 4.12) finds no serious or critical violation inside
   the notebook's output areas (the course's stored figures when the notebook opens; the fresh
   figures and the explorer's controls after Run All; the moved explorer's cell after the move);
   every violation elsewhere on the page is JupyterLab's own and must be one of the rules
   recorded in ``tests/axe_jupyterlab_baseline.json`` (a new one fails, so the baseline is kept,
   not hidden). One scan per page state: the whole page after Run All; when the notebook opens,
   only its output areas (JupyterLab's page around them is the same one the after-run scan
   covers); after the move, only the moved explorer's cell (the rest of the page is as it was
   after Run All). Counts go to ``test-artifacts/axe_<notebook name>.json``.

A screenshot of each lesson is saved to ``test-artifacts/browser_<notebook name>.png``. A
self-test runs the same checks on two small generated notebooks, one that must pass and one with
an untagged error that must be reported, so the harness itself is known to fail when it should.

Chromium is Debian's ``/usr/bin/chromium`` (``apt-get install chromium``); playwright never
downloads a browser. Without it these tests are skipped with a message.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from _browsers import BROWSER_MARKS, free_port, stop_group  # tests/ is on sys.path
from _outputs import compare_notebook, load_float_margins

from helpers.course import NOTEBOOKS

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
RUN_ALL_TIMEOUT_S = 900  # a whole lesson, kernel start included
STEP_TIMEOUT_MS = 60_000  # opening a page, a menu, a widget update

try:
    from axe_playwright_python.sync_playwright import Axe
except ImportError:  # pragma: no cover - requirements-dev.txt has it
    Axe = None

#: JupyterLab's own axe violations (outside the output areas), rule id -> impact, as measured
#: here on JupyterLab 4.6.6; a rule not listed fails the test.
AXE_BASELINE = ROOT / "tests" / "axe_jupyterlab_baseline.json"
SERIOUS = ("serious", "critical")
OUTPUTS = ".jp-OutputArea-output"

pytestmark = BROWSER_MARKS

# JupyterLab user settings for the test server: no autosave (the committed notebooks are never
# rewritten), every cell in the DOM (no virtual windowing), no news or update notifications.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


SAVE_HOOK = """
from tornado.web import HTTPError


def refuse_save(model=None, path=None, contents_manager=None, **kwargs):
    with open({log!r}, "a") as f:
        f.write(str(path) + "\\n")
    # an HTTPError (not any other exception) makes jupyter_server refuse the save
    raise HTTPError(403, "the browser test server never saves: " + str(path))
"""


# ---------------------------------------------------------------------------------------------
# Server and browser, one each for the module
# ---------------------------------------------------------------------------------------------


def other_thread_count() -> int:
    """A torch thread count different from the one the main nbval run's kernels use."""
    import torch

    return 1 if torch.get_num_threads() > 1 else 2


@dataclass
class Lab:
    url: str
    token: str
    log: Path
    saves: Path  # one line per save the page attempted (all refused)
    floats: Path  # every fmt call of the kernels (HELPERS_FLOAT_LOG), for tools/float_margins.py

    def saved(self) -> list[str]:
        return self.saves.read_text().splitlines() if self.saves.exists() else []

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def page_url(self, relpath: str) -> str:
        return f"{self.url}/lab/tree/{relpath}?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        for session in self.api("/api/sessions"):
            with contextlib.suppress(urllib.error.URLError, OSError):
                self.api(f"/api/sessions/{session['id']}", method="DELETE")


# JupyterLab and Chromium live for the worker's whole session: each lesson is a group of its own
# (conftest.py), and a worker's lessons come between other modules' groups, where a module
# fixture would stop and start both again for every lesson.
@pytest.fixture(scope="session")
def lab():
    ARTIFACTS.mkdir(exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="lab-browser-test-"))
    settings = home / "settings"
    for name, value in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    # a save from the page is refused and recorded (autosave is off; nothing should ever save)
    (home / "lab_browser_test_hooks.py").write_text(SAVE_HOOK.format(log=str(home / "saves.log")))
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(home), env.get("PYTHONPATH")])),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
    )
    env.pop("MPLBACKEND", None)  # as in a student's session: the kernel picks inline itself
    # the kernels compute on torch's portable kernels with another thread count than nbval's
    # (check 8: the portable-outputs run), and log every number fmt prints
    threads = str(other_thread_count())
    env.update(
        ATEN_CPU_CAPABILITY="default",
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
        HELPERS_FLOAT_LOG=str(home / "floats.jsonl"),
    )
    port, token = free_port(), secrets.token_hex(24)
    # one server per pytest-xdist worker that runs browser tests: each its own log
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    log = ARTIFACTS / f"browser_jupyterlab{'_' + worker if worker else ''}.log"
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root"]
    cmd += ["--ServerApp.ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0"]
    cmd += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}"]
    cmd += ["--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True"]  # window.jupyterapp
    cmd += ["--FileContentsManager.pre_save_hook=lab_browser_test_hooks.refuse_save"]
    with open(log, "w") as log_file:
        proc = subprocess.Popen(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    server = Lab(f"http://127.0.0.1:{port}", token, log, home / "saves.log", home / "floats.jsonl")
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                server.api("/api/status")
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer in 90 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield server
    finally:
        stop_group(proc)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def page(lab, chromium):  # the process's one Chromium (tests/conftest.py), a context of its own
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(STEP_TIMEOUT_MS)
    pg = context.new_page()
    try:
        yield pg
    finally:
        context.close()
        lab.shutdown_kernels()  # one kernel at a time: a torch kernel holds hundreds of MB


# ---------------------------------------------------------------------------------------------
# What the checks read from the page
# ---------------------------------------------------------------------------------------------

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"

# One report per cell of the open notebook, in order.
CELLS_JS = """
(sel) => {
  const nb = document.querySelector(sel);
  if (!nb) return null;
  return [...nb.querySelectorAll('.jp-Cell')].map((cell) => {
    const kind = cell.classList.contains('jp-CodeCell') ? 'code'
               : cell.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw';
    const prompt = cell.querySelector('.jp-InputArea-prompt');
    const errors = [...cell.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"],' +
        '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map((e) => e.innerText.slice(0, 600));
    const widgetOutputs = [...cell.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.widget-view+json"]')];
    const outText = [...cell.querySelectorAll('.jp-OutputArea')].map((o) => o.innerText).join('\\n');
    return {
      kind,
      prompt: prompt ? prompt.innerText.trim() : '',
      errors,
      nWidgetOutputs: widgetOutputs.length,
      nWidgetsRendered: widgetOutputs.filter((o) => o.querySelector('.jupyter-widgets')).length,
      widgetError: outText.includes('Error displaying widget'),
      widgetLoading: outText.includes('Loading widget'),
      nImages: [...cell.querySelectorAll('.jupyter-widgets img')].length,
    };
  });
}
"""

# SHA-256 of the bytes behind the explorer's image (blob: or data: URL), and its size on screen.
IMAGE_JS = """
async (img) => {
  const buf = await (await fetch(img.src)).arrayBuffer();
  const digest = await crypto.subtle.digest('SHA-256', buf);
  const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
  return {src: img.src, sha: hex, bytes: buf.byteLength,
          width: img.naturalWidth, height: img.naturalHeight, complete: img.complete};
}
"""


ACTIVE_CELL_JS = """
(sel) => [...document.querySelector(sel).querySelectorAll('.jp-Cell')]
  .findIndex((c) => c.classList.contains('jp-mod-active'))
"""


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    entry = page.locator(".lm-Menu-content .lm-Menu-item:visible").filter(
        has=page.locator(".lm-Menu-itemLabel", has_text=item)
    )
    entry.first.click()


def _cells(page) -> list[dict]:
    return page.evaluate(CELLS_JS, NOTEBOOK)


def _kernel_idle(page) -> bool:
    """The status bar says "<kernel name> | Idle" and the toolbar's execution indicator agrees."""
    return page.evaluate(
        """() => {
          const ind = document.querySelector(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
          const items = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
            .map((e) => e.innerText.trim());
          const kernel = items.some((t) => / \\| Idle$/.test(t) && !t.startsWith('No Kernel'));
          return kernel && ind !== null && ind.getAttribute('data-status') === 'idle';
        }"""
    )


def _wait(predicate, timeout_s: float, what: str, page=None, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        if page is not None:
            page.wait_for_timeout(interval_s * 1000)
        else:
            time.sleep(interval_s)


def _notebook_cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


# The open notebook as JupyterLab holds it (nbformat JSON, outputs included); the server exposes
# the application as window.jupyterapp (--LabApp.expose_app_in_browser).
LIVE_NOTEBOOK_JS = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel && panel.context ? panel.context.model.toJSON() : null;
}
"""


@dataclass
class LabRun:
    seconds_to_idle: float
    cells: list[dict]
    image_before: dict | None
    image_after: dict | None
    control: str | None
    live: dict | None  # the notebook JupyterLab computed (read before the explorer moved)
    moves: list  # (what moved, image before, image after) for each explorer cell moved
    axe: dict | None = None


#: A marker put on the cells an explorer-moved scan covers (a data attribute: no axe rule reads it).
AXE_SCOPE = "data-course-axe-scope"


def axe_scan(page, context: str | None = None) -> dict:
    """axe on the page (``context``: only the elements matching that selector, and what they
    hold), split into the output areas' violations (ours) and the rest (JupyterLab's):
    ``{"ours": {rule: [impact, nodes]}, "jupyterlab": {...}}``."""
    if Axe is None:
        pytest.skip("axe-playwright-python is not installed")
    split = {"ours": {}, "jupyterlab": {}}
    if context is not None and not page.locator(context).count():
        return split  # nothing to scan (axe refuses a context that matches no element)
    violations = Axe().run(page, context=context).response["violations"]
    nodes = [(v, node) for v in violations for node in v["nodes"]]
    # where each node is, in one round trip to the page
    inside = page.evaluate(
        "([sels, out]) => sels.map((sel) => { const e = document.querySelector(sel);"
        " return !!(e && e.closest(out)); })",
        [[n["target"][0] if isinstance(n["target"][0], str) else "" for _, n in nodes], OUTPUTS],
    )
    for (v, node), ours in zip(nodes, inside, strict=True):
        side = split["ours" if ours else "jupyterlab"]
        entry = side.setdefault(v["id"], [v["impact"], 0, []])
        entry[1] += 1
        if len(entry[2]) < 3:
            entry[2].append(str(node["target"])[:160])
    return split


def check_axe(scan: dict, where: str) -> None:
    ours = {k: v for k, v in scan["ours"].items() if v[0] in SERIOUS}
    assert not ours, f"axe in the output areas ({where}): {ours}"
    baseline = json.loads(AXE_BASELINE.read_text())["rules"]
    new = {k: v for k, v in scan["jupyterlab"].items() if k not in baseline}
    assert not new, (
        f"axe outside the output areas ({where}) found rules not in {AXE_BASELINE.name}: {new}"
    )


def _move_explorer(page, cell) -> tuple[str, dict, dict]:
    """Checks 5 and 6 on one explorer cell: its picture is there, and moving its main control (the
    first slider, range or choice, from the keyboard) changes it, leaves JupyterLab's active cell
    where it was, and changes the picture's description (its alt and live region). Returns (what
    moved, image before, image after)."""
    # 5. the explorer's picture
    img = cell.locator(".jupyter-widgets img").first
    img.wait_for(state="visible")
    cell.scroll_into_view_if_needed()
    _wait(
        lambda: img.evaluate("i => i.complete && i.naturalWidth > 0"),
        30,
        "the explorer's image to decode",
        page,
    )
    image_before = img.evaluate(IMAGE_JS)
    assert image_before["bytes"] > 1000 and image_before["width"] > 50, image_before
    alt_before = img.get_attribute("alt") or ""
    assert alt_before.endswith(".") and len(alt_before) > 20, (
        f"the explorer's picture has no description as its alt: {alt_before!r}"
    )

    # 6. move the main control from the keyboard: the first slider, range or choice
    control = cell.locator(".course-slider, .course-range, .course-select").first
    control.wait_for(state="visible")
    classes = control.get_attribute("class") or ""
    if "course-slider" in classes:
        handle = control.locator("input[type=range]").first
        name = control.locator("label").first.inner_text().strip()
        now, hi = float(handle.input_value()), float(handle.get_attribute("max"))
        handle.focus()  # focusing a control makes its cell JupyterLab's active one
        active_before = page.evaluate(ACTIVE_CELL_JS, NOTEBOOK)
        page.keyboard.press("Home" if now == hi else "End")
        _wait(lambda: float(handle.input_value()) != now, 10, "the slider to move", page)
        control_name = f"{name} {now:g} -> {float(handle.input_value()):g}"
    elif "course-range" in classes:
        handle = control.locator("input[type=range]").last
        name = control.locator("[id^=course-range-label]").first.inner_text().strip()
        before = float(handle.input_value())
        key = "ArrowLeft" if before == float(handle.get_attribute("max")) else "ArrowRight"
        handle.focus()  # focusing a control makes its cell JupyterLab's active one
        active_before = page.evaluate(ACTIVE_CELL_JS, NOTEBOOK)
        for _ in range(5):
            page.keyboard.press(key)
        control_name = f"{name} upper {before:g} -> {float(handle.input_value()):g}"
    else:
        select = control.locator("select").first
        name = control.locator("label").first.inner_text().strip()
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        last = select.evaluate("s => s.selectedIndex === s.options.length - 1")
        select.focus()
        active_before = page.evaluate(ACTIVE_CELL_JS, NOTEBOOK)
        page.keyboard.press("ArrowUp" if last else "ArrowDown")
        other = select.evaluate("s => s.options[s.selectedIndex].text")
        assert other != current, f"the arrow key did not change {name!r}"
        control_name = f"{name} {current} -> {other}"
    active_after = page.evaluate(ACTIVE_CELL_JS, NOTEBOOK)
    assert active_after == active_before, (
        f"the key press on {control_name} moved JupyterLab's active cell "
        f"{active_before} -> {active_after}"
    )

    _wait(
        lambda: img.get_attribute("src") != image_before["src"],
        60,
        f"the explorer's image to update after moving {control_name}",
        page,
    )
    _wait(lambda: _kernel_idle(page), 60, "the kernel to be idle after the update", page)
    _wait(
        lambda: img.evaluate("i => i.complete && i.naturalWidth > 0"),
        30,
        "the updated image to decode",
        page,
    )
    image_after = img.evaluate(IMAGE_JS)
    assert image_after["sha"] != image_before["sha"], (
        f"moving {control_name} sent a new image with the same picture"
    )
    alt_after = img.get_attribute("alt") or ""
    assert alt_after != alt_before, f"moving {control_name} left the description as it was"
    live = cell.locator(".course-picture [aria-live]").first
    # the live region is written after the picture's description: give it a moment, then it
    # must say exactly the new description (a region that never follows still fails)
    _wait(lambda: live.inner_text().strip() == alt_after, 10, "the announcement", page)
    announced = live.inner_text()
    assert announced.strip() == alt_after, (announced, alt_after)
    cell.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    return control_name, image_before, image_after


def run_in_lab(
    page, lab: Lab, notebook: Path, explorer: str | None, screenshot: Path, every_explorer=False
) -> LabRun:
    """Open ``notebook`` in JupyterLab, run it all, check it, move the explorer (the first cell
    that calls it, or with ``every_explorer`` each one); see the module doc."""
    relpath = notebook.relative_to(ROOT).as_posix()
    saves_before = len(lab.saved())
    source = _notebook_cells(notebook)
    try:
        page.goto(lab.page_url(relpath), wait_until="domcontentloaded")
        # JupyterLab's first load in a fresh server (and on a busy machine) can take longer than
        # one step's timeout: the same budget as the kernel's start
        page.locator(f"{NOTEBOOK} .jp-Cell").first.wait_for(state="attached", timeout=180_000)
        _wait(lambda: _kernel_idle(page), 180, "the kernel to start (idle)", page)
        dom = _wait(
            lambda: len(_cells(page)) == len(source) and _cells(page),
            30,
            f"JupyterLab to show the {len(source)} cells",
            page,
        )
        assert len(dom) == len(source), (
            f"JupyterLab shows {len(dom)} cells, the file has {len(source)}"
        )

        # 9. the stored outputs (the course's figures as committed) in axe's eyes: the output
        # areas only; JupyterLab's own page around them (the same cells, menus and toolbars) is
        # scanned whole after Run All
        page.wait_for_timeout(500)
        axe_report = {"stored": axe_scan(page, f"{NOTEBOOK} {OUTPUTS}")}
        check_axe(axe_report["stored"], "stored outputs")

        _menu(page, "Edit", "Clear Outputs of All Cells")
        _wait(
            lambda: not any(c["prompt"] not in ("[ ]:", "") for c in _cells(page)),
            30,
            "the stored outputs to clear",
            page,
        )
        start = time.monotonic()
        _menu(page, "Run", "Run All Cells")
        code_idx = [i for i, c in enumerate(source) if c["cell_type"] == "code"]

        def finished():
            cells = _cells(page)
            prompts = [cells[i]["prompt"] for i in code_idx]
            if any("*" in p for p in prompts):
                return None
            return cells if _kernel_idle(page) else None

        # Run All queues every cell at once; a cell still queued shows [*]
        page.wait_for_timeout(1000)
        cells = _wait(finished, RUN_ALL_TIMEOUT_S, "Run All Cells to finish", page, 1.0)
        seconds = time.monotonic() - start

        # 2. every code cell ran now, top to bottom
        counts = []
        for i in code_idx:
            prompt = cells[i]["prompt"]
            assert prompt.startswith("[") and prompt[1:-2].isdigit(), (
                f"code cell {i} did not run in this session (prompt {prompt!r}); "
                f"source starts {''.join(source[i]['source'])[:120]!r}"
            )
            counts.append(int(prompt[1:-2]))
        assert counts == sorted(counts) and len(set(counts)) == len(counts), counts

        # 3. errors only where a cell is tagged raises-exception, and there always
        for i in code_idx:
            tags = source[i].get("metadata", {}).get("tags", [])
            first_line = "".join(source[i]["source"]).split("\n", 1)[0][:100]
            if "raises-exception" in tags:
                assert cells[i]["errors"], (
                    f"code cell {i} ({first_line!r}) is tagged raises-exception "
                    "but shows no error in JupyterLab"
                )
            else:
                if cells[i]["errors"]:  # the screenshot shows the error
                    page.locator(f"{NOTEBOOK} .jp-Cell").nth(i).scroll_into_view_if_needed()
                assert not cells[i]["errors"], (
                    f"error output in code cell {i} ({first_line!r}):\n"
                    + "\n---\n".join(cells[i]["errors"])
                )

        # 4. every widget rendered
        def widgets_settled():
            cs = _cells(page)
            return None if any(c["widgetLoading"] for c in cs) else cs

        cells = _wait(widgets_settled, 60, "widgets to finish loading", page)
        for i, c in enumerate(cells):
            assert not c["widgetError"], f"cell {i}: Error displaying widget"
            assert c["nWidgetsRendered"] == c["nWidgetOutputs"], (
                f"cell {i}: {c['nWidgetOutputs'] - c['nWidgetsRendered']} widget output(s) "
                "not rendered"
            )
        body = page.locator("body").inner_text()
        assert "Error displaying widget" not in body
        live = page.evaluate(LIVE_NOTEBOOK_JS)  # 8. compared by the caller
        assert live is not None, "JupyterLab's current widget is not the notebook"

        image_before = image_after = control_name = None
        axe_report["after run"] = axe_scan(page)
        check_axe(axe_report["after run"], "after Run All")
        moves = []
        if explorer is not None:
            ex_idx = [i for i in code_idx if f"{explorer}(" in "".join(source[i]["source"])]
            assert ex_idx, f"no cell calls {explorer}()"
            moved = [
                page.locator(f"{NOTEBOOK} .jp-Cell").nth(i)
                for i in (ex_idx if every_explorer else ex_idx[:1])
            ]
            moves = [_move_explorer(page, cell) for cell in moved]
            control_name, image_before, image_after = moves[0]
            # the page after the move differs from the one scanned after Run All in the moved
            # explorers' cells: those cells are scanned again (their outputs and JupyterLab's
            # parts of them)
            for cell in moved:
                cell.evaluate(f"c => c.setAttribute('{AXE_SCOPE}', '')")
            axe_report["explorer moved"] = axe_scan(page, f"[{AXE_SCOPE}]")
            check_axe(axe_report["explorer moved"], "after moving the explorer")
        return LabRun(
            seconds, _cells(page), image_before, image_after, control_name, live, moves, axe_report
        )
    finally:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(screenshot))
        # 7. nothing was written back to the committed notebook (the server refuses saves)
        attempted = lab.saved()[saves_before:]
        assert not attempted, f"the page tried to save {attempted}"


# ---------------------------------------------------------------------------------------------
# The lessons
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lesson", NOTEBOOKS, ids=[f"lesson{l.key}" for l in NOTEBOOKS])
def test_lesson_in_jupyterlab(lesson, lab, page):
    notebook = ROOT / "notebooks" / lesson.notebook
    if not notebook.exists():
        pytest.skip(f"notebooks/{lesson.notebook} does not exist yet")
    shot = ARTIFACTS / f"browser_{notebook.stem}.png"
    run = run_in_lab(page, lab, notebook, lesson.explorer, shot)
    (ARTIFACTS / f"axe_{notebook.stem}.json").write_text(json.dumps(run.axe, indent=1))
    print(
        f"{lesson.notebook}: Run All to idle {run.seconds_to_idle:.1f} s; "
        f"moved {run.control}; screenshot {shot.relative_to(ROOT)}"
    )
    # 8. the stored outputs hold under portable kernels and another thread count
    problems = compare_notebook(notebook, run.live)
    assert not problems, (
        f"{lesson.notebook} under ATEN_CPU_CAPABILITY=default and {other_thread_count()} "
        "thread(s), run in JupyterLab, does not reproduce its stored outputs:\n"
        + "\n\n".join(problems)
    )
    margins = load_float_margins()
    report = margins.analyse(notebook, margins.read_log(lab.floats))
    assert report.ok, "\n".join(report.lines())


# ---------------------------------------------------------------------------------------------
# The harness itself: it passes a good notebook and reports a broken one
# ---------------------------------------------------------------------------------------------

SELFTEST_EXPLORER = """
import numpy as np
from helpers.widgets._base import Explorer, dropdown, new_figure, slider
from helpers.widgets._controls import IntRangeSlider


def selftest_explorer(first="slider"):
    # a small explorer whose first control is a slider, a dropdown or a range slider
    fig, axes = new_figure(4, 2)
    x = np.linspace(0, 2 * np.pi, 100)
    (line,) = axes[0, 0].plot(x, np.sin(x))
    axes[0, 0].set_ylim(-1.1, 1.1)

    def update(freq, shape, span):
        f = np.sin if shape == "sin" else np.cos
        line.set_ydata(f(freq * x) * (span[1] - span[0]) / 10)
        return f"frequency {freq}, {shape}, span {span}"

    controls = {
        "freq": slider("frequency", 1, 1, 5),
        "shape": dropdown("shape", ["sin", "cos"]),
        "span": IntRangeSlider(value=(0, 10), min=0, max=10, description="span"),
    }
    key = {"slider": "freq", "dropdown": "shape", "range": "span"}[first]
    controls = {key: controls[key], **controls}
    return Explorer("self-test", controls, fig, update,
                    describe=lambda freq, shape, span: f"A {shape} wave of frequency {freq}, span {span}.")
"""


def _selftest_notebook(path: Path, broken: bool, firsts=("slider",)) -> None:
    """A small notebook: a cell with a stored output, a cell that raises on purpose, one explorer
    cell for each kind of first control in ``firsts``, and (``broken``) an untagged error."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    setup = new_code_cell(
        "import sys\nsys.path.insert(0, '.')\nfrom selftest_widget import selftest_explorer\nprint('ok')"
    )
    setup.execution_count = 1  # a stored output, for check 8 (the others are stored unexecuted)
    setup.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ok\n")]
    cells = [
        new_markdown_cell("# Browser harness self-test"),
        setup,
        new_code_cell(
            "raise ValueError('shown on purpose')", metadata={"tags": ["raises-exception"]}
        ),
    ]
    cells += [
        new_code_cell(f"selftest_explorer({first!r})", metadata={"tags": ["nbval-ignore-output"]})
        for first in firsts
    ]
    if broken:
        cells.append(new_code_cell("1 / 0  # an error nobody tagged"))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def selftest_dir():
    folder = ARTIFACTS / "browser-selftest"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "selftest_widget.py").write_text(SELFTEST_EXPLORER)
    return folder


#: The explorers of the good self-test notebook, one per kind of first control, in cell order.
GOOD_FIRSTS = ("slider", "dropdown", "range")


@pytest.fixture(scope="module")
def good_selftest(lab, chromium, selftest_dir):
    """The good self-test notebook run once (one page, one kernel) with every explorer moved:
    the three tests below read their explorer's figures from it."""
    nb = selftest_dir / "good.ipynb"
    _selftest_notebook(nb, broken=False, firsts=GOOD_FIRSTS)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(STEP_TIMEOUT_MS)
    try:
        shot = ARTIFACTS / "browser_selftest_good.png"
        run = run_in_lab(
            context.new_page(), lab, nb, "selftest_explorer", shot, every_explorer=True
        )
    finally:
        context.close()
        lab.shutdown_kernels()
    return nb, run


# one worker runs the three (they share good_selftest's run)
@pytest.mark.xdist_group("tests/test_browser.py::harness")
@pytest.mark.parametrize(
    "first, moved",
    [
        ("slider", "frequency 1 -> 5"),
        ("dropdown", "shape sin -> cos"),
        ("range", "span upper 10 -> 5"),
    ],
)
def test_harness_passes_a_good_notebook_and_moves_its_control(
    good_selftest, selftest_dir, first, moved
):
    nb, run = good_selftest
    control, image_before, image_after = run.moves[GOOD_FIRSTS.index(first)]
    assert control == moved, control
    assert image_before["sha"] != image_after["sha"]
    # check 8 passes the outputs JupyterLab computed, and reports a stored output they disagree with
    assert compare_notebook(nb, run.live) == []
    import nbformat

    stale = nbformat.read(nb, as_version=4)
    stale.cells[1].outputs[0]["text"] = "not ok\n"
    stale_path = selftest_dir / f"stale_{first}.ipynb"
    nbformat.write(stale, stale_path)
    problems = compare_notebook(stale_path, run.live)
    assert len(problems) == 1 and "code cell 0" in problems[0] and "not ok" in problems[0]


@pytest.mark.xdist_group("tests/test_browser.py::harness")
def test_harness_reports_an_untagged_error(lab, page, selftest_dir):
    nb = selftest_dir / "broken.ipynb"
    _selftest_notebook(nb, broken=True)
    with pytest.raises(
        AssertionError, match=r"(?s)error output in code cell 4 .*ZeroDivisionError"
    ):
        run_in_lab(page, lab, nb, "selftest_explorer", ARTIFACTS / "browser_selftest_broken.png")
    # and a save from the page is refused and recorded, so check 7 can fail too
    before, on_disk = len(lab.saved()), nb.read_bytes()
    _menu(page, "File", "Save Notebook")
    _wait(lambda: len(lab.saved()) > before, 30, "the server to record the save", page)
    assert lab.saved()[-1].endswith("browser-selftest/broken.ipynb"), lab.saved()
    assert nb.read_bytes() == on_disk, "the refused save still changed the file"
