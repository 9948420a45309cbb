"""The explorers measured in JupyterLab in headless Chromium: from a key press on an explorer's
first slider to its new picture decoded, next to the floor (a bare swap of two pre-rendered PNGs
of the same size through the same picture widget), measured in the same run; for lesson 9's
explorer also to its first new characters and its full text. A section of ``benchmarks/run.py``
(``--only explorers_chromium``); not run by default (it needs Chromium and several minutes)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"explorer_median_ms": 100.0, "first_text_ms": 150.0, "generation_explorer_ms": 1000.0}


def _pct(values: list[float], q: float) -> float:  # as benchmarks/run.py
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def ok(value: float, target: float) -> str:
    return "met" if value <= target else "**missed**"


def run_chromium(args) -> dict:
    from helpers.course import LESSONS

    names = [lesson.explorer for lesson in LESSONS if lesson.explorer]
    if not CHROMIUM.exists():
        return {"explorers_chromium": []}
    return {"explorers_chromium": bench_explorers_in_chromium(names)}


# --------------------------------------------------------------------------- explorers in Chromium
#: Key presses timed per explorer in Chromium (alternating right and left on its first slider).
BROWSER_PRESSES = 24
CHROMIUM = Path("/usr/bin/chromium")

_BARE_SWAP = """
import io
import numpy as np
from matplotlib.figure import Figure
from helpers.widgets._base import Explorer, slider

def bare_swap(width_px, height_px):
    # the floor: a slider whose change swaps in one of two PNGs rendered beforehand, of the
    # explorer's picture size; no computing, no drawing
    fig = Figure(figsize=(width_px / 72, height_px / 72))
    ax = fig.add_axes((0, 0, 1, 1))
    pngs = []
    for seed in (0, 1):
        ax.clear()
        ax.imshow(np.random.default_rng(seed).random((64, 64)))
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=72, pil_kwargs={"compress_level": 1})
        pngs.append(buf.getvalue())
    e = Explorer("bare PNG swap", {"n": slider("n", 5, 0, 10)}, Figure(figsize=(1, 1)),
                 lambda n: None, describe=lambda n: f"Picture {n % 2}.")
    e.render = lambda: setattr(e.image, "value", pngs[e.controls["n"].value % 2])
    e.render()
    return e
"""

#: Appended to each benchmark cell: the kernel's CPU time (``time.process_time``) of every update
#: (compute, draw, send; for lesson 9 also the text written after the picture), kept in a file
#: next to the notebook: unlike the page's wall-clock times, barely moved by the machine's load.
_CPU_LOG = """import json as _json, time as _time
_cpu, _refresh = [], e.refresh
def _timed_refresh():
    t = _time.process_time()
    _refresh()
    _cpu.append(_time.process_time() - t)
    with open({log!r}, "w") as f:
        _json.dump(_cpu, f)
e.refresh = _timed_refresh
"""

_ARM_JS = """
() => {
  // times from the keydown: the new picture decoded; for an explorer that writes text after
  // its picture (a <pre aria-busy>, lesson 9), the first new characters shown and the full text
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[0];
  cell.querySelector('.course-slider input[type=range]').focus();
  const streams = !!cell.querySelector('pre[aria-busy]');
  window.__latency = new Promise((resolve) => {
    let t0 = null, picture = null, cleared = false, first = null, full = null, obs = null;
    const finish = () => {
      cell.removeEventListener('course-picture', done);
      if (obs) obs.disconnect();
      resolve({ picture: picture - t0, first: first === null ? null : first - t0,
                full: full === null ? null : full - t0 });
    };
    document.addEventListener('keydown', () => { t0 = performance.now(); },
                              { once: true, capture: true });
    const done = (e) => { picture = e.detail.t; if (!streams || full !== null) finish(); };
    cell.addEventListener('course-picture', done);
    if (streams) {
      obs = new MutationObserver(() => {
        if (t0 === null || full !== null) return;
        const pre = cell.querySelector('pre[aria-busy]');
        if (!pre) return;
        const now = performance.now();
        const b = pre.querySelector('b');
        const n = b ? b.textContent.length : 0;
        if (n === 0) cleared = true;  // the old text is gone: the new one starts
        else if (cleared && first === null) first = now;
        if (first !== null && pre.getAttribute('aria-busy') === 'false') {
          full = now;
          if (picture !== null) finish();
        }
      });
      obs.observe(cell, { subtree: true, childList: true, characterData: true,
                          attributes: true });
    }
    setTimeout(() => resolve(null), 15000);
  });
}
"""


LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

_KERNEL_IDLE_JS = """() => {
  const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const items = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .map((e) => e.innerText.trim());
  const kernel = items.some((t) => / \\| Idle$/.test(t) && !t.startsWith('No Kernel'));
  return kernel && ind !== null && ind.getAttribute('data-status') === 'idle';
}"""


def _wait(page, js: str, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(js):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        page.wait_for_timeout(500)


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    entry = page.locator(".lm-Menu-content .lm-Menu-item:visible").filter(
        has=page.locator(".lm-Menu-itemLabel", has_text=item)
    )
    entry.first.click()


def bench_explorers_in_chromium(names: list[str], presses: int = BROWSER_PRESSES) -> list[dict]:
    """Key press on an explorer's first slider to its new picture decoded, in JupyterLab in
    headless Chromium (``performance.now()`` at the keydown and when the new image has
    decoded), next to the bare-swap floor measured in the same run."""
    import secrets
    import shutil
    import signal
    import socket
    import tempfile
    import urllib.request

    import nbformat
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="bench-lab-"))
    folder = ROOT / "test-artifacts" / "bench-explorers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bare_swap.py").write_text(_BARE_SWAP)
    cells = {"bare_swap": "from bare_swap import bare_swap\ne = bare_swap(756, 208)"}
    for name in names:
        cells[name] = f"from helpers import widgets\ne = widgets.{name}()"
    for stem in cells:  # the kernel's CPU time of each update, written after it (_CPU_LOG)
        cells[stem] += "\n" + _CPU_LOG.format(log=f"{stem}.cpu.json") + "e"
        (folder / f"{stem}.cpu.json").unlink(missing_ok=True)
    for stem, code in cells.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(nb, folder / f"{stem}.ipynb")
    for name, value in LAB_SETTINGS.items():  # as tests/test_browser.py: no autosave, no news
        (home / "settings" / name).parent.mkdir(parents=True, exist_ok=True)
        (home / "settings" / name).write_text(json.dumps(value))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
    )
    env.pop("MPLBACKEND", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={ROOT}", "--LabApp.news_url=None"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    results = []
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--disable-sync", "--no-first-run"],
            )  # fmt: skip
            try:
                for stem in cells:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    rel = (folder / f"{stem}.ipynb").relative_to(ROOT).as_posix()
                    page.goto(f"{url}/lab/tree/{rel}?reset&token={token}",
                              wait_until="domcontentloaded")  # fmt: skip
                    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
                    # as tests/test_browser.py: the kernel idle first, then Run > Run All Cells
                    # (a Shift+Enter right after the page loads may reach no cell: the notebook
                    # need not have the keyboard focus yet)
                    _wait(page, _KERNEL_IDLE_JS, 240, f"{stem}: the kernel to start")
                    _menu(page, "Run", "Run All Cells")
                    page.locator(".course-picture img").first.wait_for(timeout=240_000)
                    _wait(page, _KERNEL_IDLE_JS, 240, f"{stem}: the cell to finish")
                    page.wait_for_timeout(1500)
                    times = []
                    for i in range(presses):
                        key = "ArrowRight" if (i // 3) % 2 == 0 else "ArrowLeft"
                        page.evaluate(_ARM_JS)
                        page.keyboard.press(key)  # a real key press: it moves the range input
                        t = page.evaluate("window.__latency")
                        if t is not None:
                            times.append(t)
                        page.wait_for_timeout(150)
                    row = {"explorer": stem, "n": len(times)}
                    cpu_file = folder / f"{stem}.cpu.json"
                    cpu = json.loads(cpu_file.read_text()) if cpu_file.exists() else []
                    if cpu:
                        row["kernel_cpu_median_ms"] = 1000 * statistics.median(cpu)
                        row["kernel_cpu_p90_ms"] = 1000 * _pct(cpu, 0.9)
                    row["load"] = os.getloadavg()[0]
                    for what, key in (("", "picture"), ("first_", "first"), ("full_", "full")):
                        ms = [t[key] for t in times if t[key] is not None]
                        if ms:
                            row[f"{what}median_ms"] = statistics.median(ms)
                            row[f"{what}p90_ms"] = _pct(ms, 0.9)
                    results.append(row)
                    print(f"chromium {stem}: {results[-1]}", flush=True)
                    page.close()
            finally:
                browser.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
    return results


def render_chromium(data: dict) -> list[str]:
    """The Chromium section of RESULTS.md: each explorer next to the bare-swap floor."""
    rows = data.get("explorers_chromium")
    if not rows:
        return ["Not measured (no Chromium)."]
    floor = next((r for r in rows if r["explorer"] == "bare_swap"), None)
    out = [
        f"JupyterLab in headless Chromium; {BROWSER_PRESSES} real key presses on the explorer's "
        "first slider (three right, three left, ...), each timed from the keydown to the new "
        "picture decoded (`performance.now()` in the page). Target: median <= "
        f"{TARGETS['explorer_median_ms']:.0f} ms. The floor: a slider that swaps two "
        "pre-rendered 756 x 208 PNGs through the same picture widget, no computing or drawing, "
        "measured in the same run. The page's times are wall clock and move with the machine's "
        "load (the 1-minute load average when each row was taken is given: this machine has 2 "
        "cores); the kernel's CPU time per update (`time.process_time` around the explorer's "
        "refresh: compute, draw, send; for lesson 9 also the text written after the picture) "
        "barely does.",
        "",
        "| explorer | median | p90 | median minus the floor | | kernel CPU per update: median "
        "| p90 | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    streams = []
    for r in rows:
        if not r.get("n") or "median_ms" not in r:
            out.append(f"| {r['explorer']} | no picture arrived | | | **missed** | | | |")
            continue
        extra = (
            "" if floor is None or r is floor else f"{r['median_ms'] - floor['median_ms']:+.0f} ms"
        )
        met = ok(r["median_ms"], TARGETS["explorer_median_ms"]) if r is not floor else "floor"
        cpu = (
            f"{r['kernel_cpu_median_ms']:.0f} ms | {r['kernel_cpu_p90_ms']:.0f} ms"
            if "kernel_cpu_median_ms" in r
            else " | "
        )
        load = f"{r['load']:.1f}" if "load" in r else ""
        out.append(
            f"| {r['explorer']} | {r['median_ms']:.0f} ms | {r['p90_ms']:.0f} ms | {extra} | {met} "
            f"| {cpu} | {load} |"
        )
        if "first_median_ms" in r or "full_median_ms" in r:
            streams.append(r)
    if streams:
        out += [
            "",
            "An explorer that writes text after its picture (lesson 9): from the keydown to the "
            f"first new characters shown (target {TARGETS['first_text_ms']:.0f} ms) and to the "
            f"full text (target {TARGETS['generation_explorer_ms']:.0f} ms).",
            "",
            "| explorer | first characters: median | p90 | | full text: median | p90 | |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in streams:
            cols = []
            for what, target in (("first_", "first_text_ms"), ("full_", "generation_explorer_ms")):
                if f"{what}median_ms" in r:
                    m, p = r[f"{what}median_ms"], r[f"{what}p90_ms"]
                    cols += [f"{m:.0f} ms", f"{p:.0f} ms", ok(m, TARGETS[target])]
                else:
                    cols += ["never shown", "", "**missed**"]
            out.append(f"| {r['explorer']} | " + " | ".join(cols) + " |")
    return out
