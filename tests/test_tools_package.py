"""The course's tools are a package imported from the repository's root (issue 38): no code of
the tests, the tools or the benchmarks edits the import path, the grader is ``tools.grading``
(never a top-level ``grading`` beside ``helpers.grading``), ``python -m tools.coursework`` is the
command, and the grader's files are small or say at their top why not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where no code may edit ``sys.path``: the tests, the tools, the benchmarks, the root conftest.
CHECKED = [*sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "tools").rglob("*.py")),
           *sorted((ROOT / "benchmarks").glob("*.py")), ROOT / "conftest.py"]  # fmt: skip
#: The one change of sys.path allowed, and why: it puts back what Sphinx's conf.py (the reading
#: site's, which adds its extensions' folder) changed while the site was built in this process.
PUTS_BACK = ("tools/build_site.py", "sys.path[:] = saved_path")
#: What a file longer than this needs: a comment at its top saying why it is one file.
MOST_LINES = 450


def _path_edits(path: Path) -> list[str]:
    """Each place in ``path`` that changes ``sys.path`` (a call of one of its methods, an
    assignment to it or to a slice of it), also inside a string of code a test or tool runs."""
    found = []

    def scan(source: str, where: str) -> None:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("insert", "append", "extend", "remove", "pop", "clear"):
                    target = node.func.value
            elif isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                target = next(
                    (t.value if isinstance(t, ast.Subscript) else t for t in targets), None
                )
            if target is not None and ast.unparse(target) == "sys.path":
                found.append(f"{where} line {node.lineno}: {ast.unparse(node)[:80]}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "sys.path" in node.value and ("\n" in node.value or ";" in node.value):
                    scan(node.value.replace(";", "\n"), f"{where} (code in a string)")

    scan(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return found


def test_no_test_tool_or_benchmark_edits_the_import_path():
    edits = [
        edit
        for path in CHECKED
        for edit in _path_edits(path)
        if not (edit.startswith(PUTS_BACK[0] + " ") and edit.endswith(": " + PUTS_BACK[1]))
    ]
    assert not edits, "\n".join(edits)


def test_the_grader_is_the_package_tools_grading_and_nothing_is_a_top_level_grading():
    """The CLI, the worker and the course folder's nbgrader configuration (as nbgrader reads it:
    the preprocessors it names imported) load the grader as ``tools.grading.*`` only."""
    code = (
        "import sys\n"
        "from traitlets.config.loader import PyFileConfigLoader\n"
        "from traitlets.utils.importstring import import_item\n"
        "import tools.coursework, tools.grading.worker\n"
        "config = PyFileConfigLoader('nbgrader_config.py', path='nbgrader').load_config()\n"
        "names = [p for p in config.Autograde.autograde_preprocessors if isinstance(p, str)]\n"
        "names += [config.AssignLatePenalties.plugin_class]\n"
        "names += [p for p in config.GenerateFeedback.preprocessors if isinstance(p, str)]\n"
        "for name in names:\n"
        "    import_item(name)\n"
        "print(sorted(set(names)))\n"
        "print(sorted(m for m in sys.modules if m == 'grading' or m.startswith('grading.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    named, top_level = out.stdout.splitlines()[-2:]
    assert top_level == "[]", f"imported as a top-level grading: {top_level}"
    assert "tools.grading.execute.ConfinedExecute" in named, named
    assert all(n.startswith("'tools.grading.") for n in named.strip("[]").split(", ")), named


def test_the_grader_runs_as_python_m_tools_coursework_and_says_so_when_run_as_a_file():
    listed = subprocess.run(
        [sys.executable, "-m", "tools.coursework", "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert listed.stdout.startswith("lesson04 04_positional_encoding.ipynb: "), listed.stdout
    as_file = subprocess.run(
        [sys.executable, "tools/coursework.py", "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert as_file.returncode == 1 and as_file.stdout == "", as_file
    assert "python -m tools.coursework" in as_file.stderr, as_file.stderr


def test_the_packages_files_are_small_or_say_why_at_their_top():
    rooms = sorted(
        p for folder in ("helpers", "tools", "benchmarks") for p in (ROOT / folder).rglob("*.py")
    )
    assert ROOT / "tools" / "grading" / "confine.py" in rooms, "the walk found no grader files"
    long = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in rooms
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
        and not path.read_text(encoding="utf-8").startswith("# ")
    ]
    assert not long, "over ~450 lines without a reason at the top: " + "; ".join(long)
