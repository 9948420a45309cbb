"""Shared test set-up: a headless matplotlib, deterministic torch, a guard on open figures, one
torch thread for files of tiny tensors, one Playwright driver and one Chromium per test process,
and the course's wheel and a student's fresh venv, built once per test process.

How the suite is spread over pytest-xdist's workers is in the repository's root conftest.py."""

import os
import shutil
import sys
from pathlib import Path

import matplotlib

# Agg for this process only: not through MPLBACKEND, which nbval's kernels would inherit (their
# figures would then never be shown, and every stored figure output would mismatch).
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from _browsers import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 - tests/ is on sys.path
from _installs import STUDENT_PACKAGES, run_ok  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _seed_and_close_figures():
    torch.manual_seed(0)
    yield
    plt.close("all")


@pytest.fixture
def one_thread():
    """One torch thread during the test: tiny tensors run faster, and reproducibly, on one thread
    than on several on a busy machine. A file of such tests: ``pytestmark =
    pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def playwright_driver():
    """One Playwright driver per test process, shared by every test that drives Chromium
    (the ``chromium`` fixture below, test_classroom.py): Playwright's sync API refuses a
    second driver while one is running in the same process (its event loop is already on)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    driver = sync_api.sync_playwright().start()
    try:
        yield driver
    finally:
        driver.stop()


@pytest.fixture(scope="session")
def chromium(playwright_driver):
    """One headless Debian Chromium per test process, for every test that opens a page
    (test_browser.py, test_site_course.py, test_grading_browser_feedback.py): each opens its own
    context (``chromium.new_context()`` or ``chromium.new_page()``, whose page has a context of its
    own) and closes it; none closes the browser. Skipped, saying why, without /usr/bin/chromium."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium at /usr/bin/chromium (apt-get install chromium)")
    browser = playwright_driver.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def no_open_figures():
    """Fails the test if it leaves a pyplot figure open."""
    before = set(plt.get_fignums())
    yield
    leaked = set(plt.get_fignums()) - before
    assert not leaked, f"figures left open: {sorted(leaked)}"


# --- the course installed from its wheel (test_installed_course.py, test_colab_cell.py) ----------
@pytest.fixture(scope="session")
def outside(tmp_path_factory) -> Path:
    """An empty folder outside the repository: nothing of the checkout is importable from it."""
    return tmp_path_factory.mktemp("outside")


@pytest.fixture(scope="session")
def student_env() -> dict:
    """The environment of a student's fresh Python: this run's, less what points into it."""
    drop = ("PYTHONPATH", "MPLBACKEND", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="session")
def course_wheel(tmp_path_factory, outside) -> Path:
    """The project's wheel (``pip wheel --no-deps --no-build-isolation``), built once per test
    process for every test that installs the course."""
    wheels = tmp_path_factory.mktemp("wheels")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    run_ok([*pip, "-w", str(wheels), str(ROOT)], cwd=outside)
    (wheel,) = wheels.glob("transformer_block_course-*.whl")
    return wheel


@pytest.fixture(scope="session")
def _student_venv(tmp_path_factory, outside, student_env) -> Path:
    venv = tmp_path_factory.mktemp("student") / "venv"
    run_ok([sys.executable, "-m", "venv", str(venv)])
    run_ok(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *STUDENT_PACKAGES],
        env=student_env,
        cwd=outside,
    )
    return venv


@pytest.fixture
def student_venv(_student_venv, tmp_path) -> Path:
    """A fresh virtual environment of a student (STUDENT_PACKAGES, no course), this test's own.

    Made once per test process and given to each test as a copy of its own whose files are hard
    links (seconds, not a torch install a test): pip and Python replace or remove a file, never
    write into one, so what a test installs never reaches the next test's copy. Python finds a
    venv by the ``pyvenv.cfg`` beside its ``bin/`` (not by the path it was made at); run it as
    ``VENV/bin/python -m ...`` (the console scripts' first lines name the first venv)."""
    venv = tmp_path / "venv"
    shutil.copytree(_student_venv, venv, symlinks=True, copy_function=os.link)
    return venv
