"""Which cells a graded run executes (tools/grading/plan.py): a skipped cell must never change
what an exercise sees.

Each case is a small notebook of course cells and one exercise cell (``ans``). It is run twice in
plain Python namespaces, once whole and once with only the planned cells, and the exercise's
answer must be the same; the cases that can skip something must skip it (a plan that runs
everything would pass the first half and prove nothing).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from grading import plan as planner  # noqa: E402


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
            "shown = sorted(data)\nprint(shown)",
            "def ans():\n    return len(data)",
        ],
        {1},
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


def test_a_local_of_a_function_is_not_a_change_of_the_global_of_that_name():
    facts = planner.facts(
        "def f():\n    model = copy.deepcopy(mystery)\n    model.layers.clear()\n    return model"
    )
    assert "model" not in facts.mutates | facts.mutates_later and "model" not in facts.aliases
    # what the local shares (the copy's source, as deepcopy is not known to be pure) is changed
    assert "mystery" in facts.mutates_later and not facts.mutates


def test_a_function_named_top_reads_no_global_of_its_parameters():
    facts = planner.facts("def g(z):\n    def top(T):\n        return T + z\n    return top(1)")
    assert "T" not in facts.reads | facts.reads_later
