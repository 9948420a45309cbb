"""The ``explorers`` section: each lesson's explorer in a fresh process, the time of one update
(compute and redraw) near the default and the maximum settings, and 500 random changes for
figures left open and memory growth."""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

from benchmarks.common import ROOT, TARGETS

SLOW_EXPLORERS = {"norm_explorer"}
#: Explorers whose update is a long computation, timed over fewer changes: name -> (timed
#: changes per setting, changes for the leak check). Lesson 9 generates 200 characters each time.
FEW_CHANGES = {"generation_explorer": (8, 40)}
#: The values a text box (lesson 9's prompt) takes in the benchmark.
PROMPTS = ("First Citizen:", "ROMEO:", "To be, or not to be", "KING RICHARD III:\nNow is")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _is_range(control) -> bool:
    return isinstance(control.value, tuple)


def _options(control) -> list:
    """Every value a control allows (for a range slider: the single positions of either end)."""
    if hasattr(control, "options") and control.options:
        opts = control.options
        return [o[1] if isinstance(o, tuple) else o for o in opts]
    if isinstance(control.value, str):  # a text box: a few prompts
        return list(dict.fromkeys([control.value, *PROMPTS]))
    if isinstance(control.value, bool):  # a checkbox
        return [False, True]
    if hasattr(control, "min") and hasattr(control, "max"):
        step = getattr(control, "step", 1) or 1
        n = int(round((control.max - control.min) / step))
        return [control.min + i * step for i in range(n + 1)]
    raise TypeError(f"cannot enumerate values of {type(control).__name__}")


def _random_value(control, rng: random.Random):
    opts = _options(control)
    if _is_range(control):
        lo, hi = sorted(rng.sample(opts, 2))
        return (lo, hi)
    return rng.choice(opts)


def _maximum(control):
    """The heaviest setting: a slider's maximum, a range slider's full range; a dropdown or a
    checkbox keeps its value (it has no maximum)."""
    if (hasattr(control, "options") and control.options) or isinstance(control.value, bool | str):
        return control.value
    opts = _options(control)
    return (opts[0], opts[-1]) if _is_range(control) else opts[-1]


def _near(control, anchor) -> list:
    """Values one or two steps from ``anchor`` (the settings stay near the anchor)."""
    opts = _options(control)
    if _is_range(control):
        step = opts[1] - opts[0] if len(opts) > 1 else 1
        lo, hi = anchor
        shifted = [(lo + k * step, hi + k * step) for k in (-2, -1, 1, 2)]
        grown = [(lo, hi + k * step) for k in (-2, -1, 1, 2)]
        fits = [v for v in shifted + grown if opts[0] <= v[0] < v[1] <= opts[-1]]
        return fits or [anchor]
    i = opts.index(anchor) if anchor in opts else 0
    return [opts[j] for j in range(max(0, i - 2), min(len(opts), i + 3)) if j != i] or [anchor]


def _time_updates(explorer, rng, anchors: dict, n: int) -> list[float]:
    """``n`` updates, each moving one random control near its anchor and back; ms per update."""
    times = []
    names = list(explorer.controls)
    for _ in range(n):
        name = rng.choice(names)
        control = explorer.controls[name]
        for value in (rng.choice(_near(control, anchors[name])), anchors[name]):
            if control.value == value:
                continue
            start = time.perf_counter()
            control.value = value  # observers run synchronously: compute + redraw
            times.append((time.perf_counter() - start) * 1000)
    return times


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def bench_explorer_in_process(name: str, n_timed: int, n_leak: int) -> dict:
    import gc

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from helpers import widgets

    rng = random.Random(0)
    explorer = getattr(widgets, name)()
    defaults = {k: c.value for k, c in explorer.controls.items()}
    default_ms = _time_updates(explorer, rng, defaults, n_timed)
    maxima = {k: _maximum(c) for k, c in explorer.controls.items()}
    for k, v in maxima.items():
        explorer.controls[k].value = v
    max_ms = _time_updates(explorer, rng, maxima, n_timed)
    for k, v in defaults.items():
        explorer.controls[k].value = v

    # 500 random changes anywhere in the control ranges
    gc.collect()
    warm = 20
    for i in range(n_leak + warm):
        if i == warm:
            gc.collect()
            rss_before = _rss_mb()
        name_ = rng.choice(list(explorer.controls))
        explorer.controls[name_].value = _random_value(explorer.controls[name_], rng)
    gc.collect()
    rss_after = _rss_mb()
    with warnings.catch_warnings():  # isinstance on every object wakes torch's deprecated aliases
        warnings.simplefilter("ignore")
        figures_alive = sum(1 for o in gc.get_objects() if isinstance(o, Figure))
    result = {
        "explorer": name,
        "default_median_ms": statistics.median(default_ms),
        "default_p95_ms": _pct(default_ms, 0.95),
        "max_median_ms": statistics.median(max_ms),
        "max_p95_ms": _pct(max_ms, 0.95),
        "n_timed": len(default_ms) + len(max_ms),
        "pyplot_open": len(plt.get_fignums()),
        "figures_alive": figures_alive,
        "growth_mb": rss_after - rss_before,
        "n_leak": n_leak,
    }
    explorer.close()
    return result


def bench_explorer(name: str, n_timed: int, n_leak: int) -> dict:
    """Run one explorer's benchmark in a fresh interpreter (clean memory, clean caches)."""
    n_timed, n_leak = FEW_CHANGES.get(name, (n_timed, n_leak))
    code = (
        "import json; "
        "from benchmarks.explorers import bench_explorer_in_process as b; "
        f"print('RESULT', json.dumps(b({name!r}, {n_timed}, {n_leak})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def run_explorers(args) -> dict:
    from helpers.course import LESSONS

    out = []
    for lesson in LESSONS:
        if lesson.explorer:
            r = bench_explorer(lesson.explorer, args.updates, args.leak_changes)
            print(
                f"explorer {r['explorer']}: default {r['default_median_ms']:.0f}/{r['default_p95_ms']:.0f} ms, "
                f"max {r['max_median_ms']:.0f}/{r['max_p95_ms']:.0f} ms, open {r['pyplot_open']}, "
                f"growth {r['growth_mb']:+.1f} MB",
                flush=True,
            )
            out.append(r)
    return {"explorers": out}


def render_explorers(data: dict) -> list[str]:
    t = TARGETS
    lines = [
        f"Targets: median <= {t['explorer_median_ms']:.0f} ms and 95th percentile <= {t['explorer_p95_ms']:.0f} ms "
        f"at default settings (<= {t['slow_explorer_ms']:.0f} ms for the gradient-norm explorer, which runs a backward pass; "
        f"<= {t['generation_explorer_ms']:.0f} ms for the generation explorer, which writes 200 characters with the shipped "
        f"longer run (d_model 96, 3 layers, a sliding window of 96 characters), timed over {FEW_CHANGES['generation_explorer'][0]} changes per setting and "
        f"{FEW_CHANGES['generation_explorer'][1]} for the leak check); "
        f"after 500 random changes at most {t['open_figures']} figure open and < {t['growth_mb']:.0f} MB memory growth.",
        "",
        "| explorer | default: median / p95 | | maximum: median / p95 | pyplot figures open | figures alive | memory growth (500 changes) | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["explorers"]:
        slow = r["explorer"] in SLOW_EXPLORERS
        med_t = t["slow_explorer_ms"] if slow else t["explorer_median_ms"]
        p95_t = t["slow_explorer_ms"] if slow else t["explorer_p95_ms"]
        if r["explorer"] == "generation_explorer":  # about a second for 200 characters
            med_t = p95_t = t["generation_explorer_ms"]
        met = r["default_median_ms"] <= med_t and r["default_p95_ms"] <= p95_t
        leak_ok = r["figures_alive"] <= t["open_figures"] and r["growth_mb"] < t["growth_mb"]
        lines.append(
            f"| {r['explorer']} | {r['default_median_ms']:.0f} / {r['default_p95_ms']:.0f} ms "
            f"| {'met' if met else '**missed**'} | {r['max_median_ms']:.0f} / {r['max_p95_ms']:.0f} ms "
            f"| {r['pyplot_open']} | {r['figures_alive']} | {r['growth_mb']:+.1f} MB | {'met' if leak_ok else '**missed**'} |"
        )
    lines += [
        "",
        "'figures alive' counts every matplotlib Figure object still reachable in the process: the",
        "explorer's own one figure, which it keeps and redraws in place, and nothing else.",
    ]
    return lines
