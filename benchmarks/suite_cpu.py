"""A pytest plugin: the CPU time of every test, with everything it started, under pytest-xdist.

    .venv/bin/python -m pytest -p benchmarks.suite_cpu --suite-cpu=cpu.json

Wall times on a shared machine move with the load; CPU time much less. For each test (setup,
call and teardown together) the plugin reads, before and after, the CPU seconds (user + system)
of the pytest worker and of every process under it, alive or exited and waited for (psutil:
``cpu_times()`` with ``children_user`` and ``children_system``), so a kernel, a JupyterLab
server, a browser or a sandbox the test started counts for the test that was running while it
worked. The controller gathers every worker's figures and writes ``--suite-cpu`` (JSON: one
row per test with its wall and CPU seconds and its worker) and prints the modules that cost most.
Measurement only: it changes no test and is never part of the README's command.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict

import psutil
import pytest


def pytest_addoption(parser):
    parser.addoption("--suite-cpu", default=None, help="write per-test CPU seconds to this file")


def _tree_cpu() -> float:
    me = psutil.Process(os.getpid())
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _tree_cpu(), time.perf_counter()
    item.user_properties.append(("suite_cpu_start", (cpu, wall)))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown":
        start = dict(item.user_properties).get("suite_cpu_start")
        if start is not None:
            cpu = _tree_cpu() - start[0]
            wall = time.perf_counter() - start[1]
            report.user_properties.append(("suite_cpu", (cpu, wall)))


class _Collector:
    def __init__(self, path: str):
        self.path = path
        self.rows = []
        self.start = time.perf_counter()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        if report.when != "teardown":
            return
        figures = dict(report.user_properties).get("suite_cpu")
        if figures is None:
            return
        cpu, wall = figures
        worker = getattr(report, "node", None)
        worker = getattr(worker, "gateway", None)
        self.rows.append(
            {
                "test": report.nodeid,
                "cpu_s": round(cpu, 3),
                "wall_s": round(wall, 3),
                "worker": getattr(worker, "id", "main"),
            }
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        wall = time.perf_counter() - self.start
        with open(self.path, "w") as f:
            json.dump({"wall_s": wall, "tests": self.rows}, f, indent=0)
        by_module = defaultdict(lambda: [0.0, 0.0, 0])
        for r in self.rows:
            m = by_module[r["test"].split("::")[0]]
            m[0] += r["cpu_s"]
            m[1] += r["wall_s"]
            m[2] += 1
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        tr.write_sep("=", "CPU seconds per module (benchmarks/suite_cpu.py)")
        total = sum(v[0] for v in by_module.values())
        for name, (cpu, w, n) in sorted(by_module.items(), key=lambda kv: -kv[1][0]):
            tr.write_line(f"{cpu:8.1f} s CPU {w:8.1f} s wall {n:5d} tests  {name}")
        tr.write_line(f"{total:8.1f} s CPU in all; session wall {wall:.0f} s")


def pytest_configure(config):
    path = config.getoption("--suite-cpu")
    if path and not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(_Collector(path), "suite_cpu_collector")
