"""The commands CONTRIBUTING.md's "Running the tests" shows work as typed."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_one_notebook_by_its_path_runs_on_one_kernel():
    # nbval's documented form, with the addopts' ``-n 2 --dist loadgroup``: every cell of the
    # notebook must reach the one worker whose kernel ran the cells before it (spread over two
    # workers, a cell that uses a name an earlier cell bound fails with a NameError)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "notebooks/06_feed_forward.ipynb",
            "-q",
            "-p",
            "no:randomly",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "NameError" not in out
    assert " passed" in out.splitlines()[-1], out[-500:]
