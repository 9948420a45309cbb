"""How pytest spreads the suite over pytest-xdist's workers, for every path under the repository.

At the repository's root so that it applies whatever path is given: ``python -m pytest
notebooks/04_positional_encoding.ipynb`` (nbval's own documented form) keeps the notebook's cells
on one kernel under the addopts' ``-n 2 --dist loadgroup``, as ``python -m pytest`` does. The
tests' fixtures live in ``tests/conftest.py``.
"""

import pytest

# --- how the suite is spread over pytest-xdist's workers (README's command: -n 2) ---------------
#
# ``--dist loadgroup``: each group goes to one worker. A group is what --dist loadscope would
# keep together (a module, or a class), so module- and class-scoped fixtures are built once as
# before; a notebook's nbval cells are one group (they share one kernel). Tests that share nothing
# costly are their own groups, so they can run on both workers at once: each lesson of the
# browser run (test_browser.py keeps one JupyterLab and one Chromium per worker that runs any of
# them), each notebook of the portable run and each test of the reading site (test_site_course.py
# builds the site once per run for every worker; one Chromium per worker). A module whose costly
# module fixtures serve disjoint tests is split by fixture (SPLIT_BY_FIXTURE: each fixture's tests
# one group, so each fixture is still built once, and the two can run on both workers at once).
# A test file may group some of its tests itself (pytest.mark.xdist_group: the browser harness
# self-tests share one run). Groups start longest first (LONGEST_FIRST, from
# benchmarks/suite_cpu.py's per-test CPU seconds), then the rest in collection order, so that no
# long group starts last while the other worker has nothing left to do.
SPREAD = (
    "tests/test_browser.py::",
    "tests/test_portable_outputs.py::",
    "tests/test_site_course.py::",
    # each sandbox case starts its own confined kernel and mostly waits (a limit, a sleep): its
    # own group, so that the other worker is not left waiting behind the whole file
    "tests/test_grading_sandbox.py::",
)
#: test file -> its module- or class-scoped fixtures that no test uses together: a test using one
#: of them is in that fixture's group (its module's or class's group, then "::fixture"), the
#: others in the module's or class's group
SPLIT_BY_FIXTURE = {
    "tests/test_grading.py": ("synthetic", "capstone"),
    # a lesson's autograding (its course folder and release are shared by the two groups)
    "tests/test_coursework.py": ("graded",),
}
LONGEST_FIRST = (
    # the course installed from its wheel (tests/_installs.py): test_installed_course.py's
    # lessons outside the repository and test_colab_cell.py's install, one wheel and one venv
    "course-install",
    "tests/test_coursework.py::TestLesson09",
    "tests/test_classroom.py",
    "tests/test_coursework.py::TestLesson08",
    "tests/test_grading.py::synthetic",
    "tests/test_grading.py::capstone",
    "tests/test_coursework.py::TestLesson05",
    "tests/test_binder.py",
    "tests/test_coursework.py::TestLesson04",
    "tests/test_browser.py::test_lesson_in_jupyterlab[lesson9]",
    "tests/test_browser.py::test_lesson_in_jupyterlab[lesson8]",
    "tests/test_coursework.py::TestLesson07",
    "tests/test_coursework.py::TestLesson06",
    "tests/test_coursework.py::TestLesson10",
    "tests/test_grading_sandbox.py::test_sandbox_a_notebook_over_its_time",
    "tests/test_portable_outputs.py::",
    "tests/test_browser.py::",
    "notebooks/",
)


def _group(nodeid: str, fixtures=()) -> str:
    path, _, rest = nodeid.partition("::")
    if path.endswith(".ipynb"):
        return path  # nbval: every cell of a notebook on one kernel
    if nodeid.startswith(SPREAD):
        return nodeid  # a group of its own (xdist's default for a test without a group)
    parts = rest.split("::")
    group = f"{path}::{parts[0]}" if len(parts) > 1 else path  # a class, or the module
    used = [f for f in SPLIT_BY_FIXTURE.get(path, ()) if f in fixtures]
    if len(used) > 1:
        raise pytest.UsageError(f"{nodeid} uses {used}: SPLIT_BY_FIXTURE's fixtures must not meet")
    return f"{group}::{used[0]}" if used else group


def _rank(group: str) -> int:
    return next((i for i, p in enumerate(LONGEST_FIRST) if group.startswith(p)), len(LONGEST_FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # A notebook's nbval run is slow (5-25 s of CPU a notebook): out of the core selection
    # (``-m "not slow and not browser and not hub"``); run the one you changed by its path.
    for item in items:
        if item.nodeid.partition("::")[0].endswith(".ipynb"):
            item.add_marker(pytest.mark.slow)
    # the controller sees --dist; a worker sees dist "no" and xdist's own loadgroup flag instead
    loadgroup = config.getoption("dist", "no") == "loadgroup" or getattr(
        config.option, "loadgroup", False
    )
    if not config.pluginmanager.hasplugin("xdist") or not loadgroup:
        return
    groups = {}
    for item in items:
        own = item.get_closest_marker("xdist_group")  # a test file's own grouping comes first
        groups[item.nodeid] = (
            own.args[0]
            if own and own.args
            else _group(item.nodeid, getattr(item, "fixturenames", ()))
        )
        if own is None and groups[item.nodeid] != item.nodeid:
            # xdist reads the group after the last '@' and after the last ']'
            name = groups[item.nodeid].replace("[", "(").replace("]", ")").replace("@", "_")
            item.add_marker(pytest.mark.xdist_group(name))
    order = {}
    for item in items:  # first appearance of each group, to keep the rest in collection order
        order.setdefault(groups[item.nodeid], len(order))
    items.sort(key=lambda it: (_rank(groups[it.nodeid]), order[groups[it.nodeid]]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    # xdist's workers name a test's group by a suffix on its node id ("...@group"). pytest 9.2
    # stores node ids where xdist 3.8 cannot add it, and then every nbval cell is scheduled on its
    # own, away from the kernel its notebook's first cell started (every later cell fails with a
    # NameError). Stop at once, saying why, rather than fail every notebook.
    if node.config.getoption("dist", "no") != "loadgroup":
        return
    untagged = [i for i in ids if ".ipynb::" in i and "@" not in i]
    if untagged:
        pytest.exit(
            f"pytest-xdist did not tag {untagged[0]!r} with its group: this pytest and"
            " pytest-xdist pair cannot run --dist loadgroup (use requirements-dev.txt's pins)",
            returncode=4,
        )
