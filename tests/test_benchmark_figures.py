"""The benchmark's own figures (benchmarks/run.py): what its suite row's CPU columns measure."""

import time
from pathlib import Path

import pytest

from benchmarks import run  # noqa: E402


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat on this system")
def test_machine_busy_cpu_counts_at_least_this_process_own_work():
    """The machine's busy CPU over an interval holds every process's, this one's included: it
    grows by at least the CPU this process spent (less one clock tick per field read)."""
    before, mine_before = run.machine_busy_cpu_s(), time.process_time()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    after, mine = run.machine_busy_cpu_s(), time.process_time() - mine_before
    assert after - before >= mine - 0.05, (after - before, mine)


def test_suite_row_gives_both_cpu_figures_and_the_busy_share():
    row = {"seconds": 100.0, "cpu_s": 50.0, "machine_busy_cpu_s": 190.0, "cores": 2}
    lines = run.render_suite({"suites": [{**row, "summary": "ok", "marker": None}]})
    # the share uses the cores of the machine measured, whatever machine renders the table
    assert "| 50 s | 190 s | 95 % | ok |" in lines[-1]
    old = {"seconds": 100.0, "cpu_s": 50.0, "summary": "ok"}  # a row stored before
    assert "not measured" in run.render_suite({"suites": [{**old, "marker": None}]})[-1]
