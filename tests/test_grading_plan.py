"""Which cells a graded run executes (tools/grading/plan.py): a skipped cell must never change
what an exercise sees.

Each case is a small notebook of course cells and one exercise cell (``ans``). It is run twice in
plain Python namespaces, once whole and once with only the planned cells, and the exercise's
answer must be the same; the cases that can skip something must skip it (a plan that runs
everything would pass the first half and prove nothing).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent

from tools.grading import plan as planner  # noqa: E402


def _notebook(cells: list[str]):
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    last = nb.cells[-1]
    last.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "ex"}
    return nb


def _answer(nb, run: set[int]):
    namespace: dict = {}
    for i, cell in enumerate(nb.cells):
        if i in run:
            exec(compile(cell.source, f"<cell {i}>", "exec"), namespace)
    return namespace["ans"]()


# Cells are run in this process: no case may change a module or global state (those cases, run in
# fresh processes, are in tests/test_grading_plan_cases.py).


# name -> (cells, the course cells that must be skipped); the last cell is the exercise
CASES = {
    "a function that changes a global, called by a later cell": (
        [
            "model = [1]",
            "def poke():\n    model.append(2)",
            "poke()",
            "noise = [0]",
            "def ans():\n    return list(model)",
        ],
        {3},
    ),
    "an attribute assigned inside a function": (
        [
            "class M:\n    w = 1\n\nmodel = M()",
            "def poke():\n    model.w = 0",
            "poke()",
            "def ans():\n    return model.w",
        ],
        set(),
    ),
    "a local bound to a global, changed in place": (
        [
            "model = [1]",
            "def poke():\n    m = model\n    m.append(2)\n\npoke()",
            "def ans():\n    return list(model)",
        ],
        set(),
    ),
    "a function called through another name": (
        [
            "model = [1]",
            "def poke():\n    model.append(2)",
            "cb = poke",
            "cb()",
            "def ans():\n    return list(model)",
        ],
        set(),
    ),
    "a function that calls a function that changes a global": (
        [
            "model = [1]",
            "def poke():\n    model.append(2)",
            "def outer():\n    poke()",
            "outer()",
            "def ans():\n    return list(model)",
        ],
        set(),
    ),
    "a method of a class that changes a global": (
        [
            "model = [1]",
            "class P:\n    def go(self):\n        model.append(2)",
            "P().go()",
            "def ans():\n    return list(model)",
        ],
        set(),
    ),
    "a local of the same name as a global is not that global": (
        [
            "model = [1]",
            "model.append(3)",
            "def ans():\n    model = [2]\n    model.append(1)\n    return model",
        ],
        {0, 1},
    ),
    # Python 3.11's symtable takes a table named "top" for the module's: T is top's parameter
    "a function named top": (
        [
            "T = 5",
            "T = T + 1",
            "def ans():\n    def top(T):\n        return T * 2\n    return top(3)",
        ],
        {0, 1},
    ),
    "a loop's target read in its body is not read from outside": (
        [
            "r = 100",
            "rows = [1, 2]\nfor r in rows:\n    print(r)",
            "total = sum(rows)",
            "def ans():\n    return total",
        ],
        {0},
    ),
    "a loop's target read after the loop is": (
        ["r = 100", "rows = []\nfor r in rows:\n    pass\nlast = r", "def ans():\n    return last"],
        set(),
    ),
    "a loop's else may see the target unbound": (
        ["r = 100", "for r in []:\n    pass\nelse:\n    last = r", "def ans():\n    return last"],
        set(),
    ),
    "a with's target read in its body": (
        [
            "import contextlib\nf = 7",
            "with contextlib.nullcontext(3) as f:\n    got = f + 1",
            "def ans():\n    return got",
        ],
        set(),
    ),
    "a demonstration no exercise needs": (
        [
            "data = [3, 1, 2]",
            "other = [5, 4]\nshown = sorted(other)\nprint(shown)",
            "def ans():\n    return len(data)",
        ],
        {1},
    ),
    "a demonstration that mentions what the exercise reads runs (it might change it)": (
        [
            "data = [3, 1, 2]",
            "shown = sorted(data)\nprint(shown)",
            "def ans():\n    return len(data)",
        ],
        set(),
    ),
    "a function passed on, not changed": (
        [
            "def hook(x):\n    return x + 1",
            "import functools\nplus = [functools.reduce(lambda a, b: a + b, [1, 2])]\nseen = [hook]",
            "def ans():\n    return hook(1)",
        ],
        {1},
    ),
    "a number read by a demonstration": (
        [
            "d = 4",
            "grid = [[0] * d for _ in range(d)]\nprint(len(grid))",
            "def ans():\n    return d * 2",
        ],
        {1},
    ),
    "a mutable default argument": (
        [
            "def f(acc=[]):\n    acc.append(1)\n    return len(acc)",
            "f()",
            "def ans():\n    return f()",
        ],
        set(),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_planned_cells_give_the_exercise_what_the_whole_notebook_gives(name):
    cells, must_skip = CASES[name]
    nb = _notebook(cells)
    plan = planner.plan(nb, nb)
    everything = set(range(len(cells)))
    assert _answer(nb, plan.run) == _answer(nb, everything), (name, sorted(plan.run), plan.why)
    assert must_skip <= set(plan.skipped), (name, plan.skipped, plan.why)
    assert len(cells) - 1 in plan.run  # the exercise always runs


def test_a_local_of_a_function_is_not_the_global_of_that_name():
    facts = planner.facts(
        "def f():\n    model = copy.deepcopy(mystery)\n    model.layers.clear()\n    return model"
    )
    assert "model" not in facts.now | facts.later  # the function's own
    assert {"copy", "mystery"} <= facts.later and not facts.now - {"f"}


def test_a_function_named_top_reads_no_global_of_its_parameters():
    facts = planner.facts("def g(z):\n    def top(T):\n        return T + z\n    return top(1)")
    assert "T" not in facts.reads | facts.reads_later | facts.later


def test_every_lesson_skips_demonstrations():
    """The instructor's notebook of every lesson, planned as a graded run plans it: at least a
    third of its code cells skipped (they are the demonstrations), every exercise cell run."""
    import nbformat

    from helpers.course import NOTEBOOKS

    for part in NOTEBOOKS:
        nb = nbformat.read(str(ROOT / "notebooks" / part.notebook), as_version=4)
        plan = planner.plan(nb, nb)
        code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        exercises = {i for i in code if nb.cells[i].metadata.get("nbgrader", {}).get("grade_id")}
        assert exercises <= plan.run, part.notebook
        assert len(plan.skipped) >= len(code) / 3, (part.notebook, len(plan.skipped), len(code))
