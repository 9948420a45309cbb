"""Debian's Chromium and the servers a browser test opens, in tests (tests/test_browser.py,
tests/test_site_course.py, tests/test_grading_browser_feedback.py); the one Chromium of a test
process is tests/conftest.py's ``chromium`` fixture."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
#: NOTES: what Chromium needs to start as root on this machine, offline, without a GPU
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: a test that drives Chromium: marked ``browser``; skipped, saying why, without Debian's
#: Chromium or playwright
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="browser tests need Debian's Chromium at /usr/bin/chromium "
        "(apt-get install chromium); playwright never downloads a browser here",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="python playwright is not installed",
    ),
]


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group of ``proc`` (a server started with ``start_new_session=True``,
    and its kernels), then SIGKILL what is left after 20 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
