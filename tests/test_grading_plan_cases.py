"""Which cells a graded run executes (tools/grading/plan.py), against an adversarial review: 144
small notebooks, each built to make a skipped course cell change what the exercise sees, and 18
more where the exercise's own cell deletes, augments or declares global a course name.

Written by an adversarial review of the planner's first version, which found 96 of these cases
where the planned run gave the exercise another answer ("HOLE" below; "holds" where that version
was right; the 18 later ones are marked against the planner before them, which skipped a
needed cell in 6). Each case is run whole and planned, each run in a fresh process forked from one that
has imported torch, numpy and matplotlib (a patched module, a changed default dtype, a written
file or an environment variable does not leak from one run to the other), in an empty working
folder; a course cell that raises does not stop the run (the grader executes with
allow_errors=True). ``ans()`` must give the same answer, its ``repr`` or the exception it raises.
A case whose plan runs every cell is not executed (nothing to compare): with the planner of this
version, 155 of the 162 cases run whole (the rule is meant to be safe rather than sharp), 7 skip
a cell and are compared. Skipping itself is shown by tests/test_grading_plan.py and by every
lesson (tests/test_coursework.py). Slow: about 20 s of CPU, most of it in the forked runs.

The three cases marked LIMITATION advance the global random generators (``random``,
``np.random``, ``torch``) in a skipped cell: the planner does not track the random state, by
design (the hidden tests seed their own generators; tests/test_coursework.py checks every
lesson's verdicts with and without skipping). They are expected to fail (strict).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent

from tools.grading import plan as planner  # noqa: E402

#: One process that has imported the libraries the cases use; for each request it forks a child
#: that runs the cells in a fresh namespace and an empty working folder, and answers one line.
SERVER = r"""
import json, os, sys, tempfile
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot, numpy, torch
torch.set_num_threads(1)
out = sys.stdout
for line in sys.stdin:
    spec = json.loads(line)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.chdir(tempfile.mkdtemp())
        sys.stdout = sys.stderr = open(os.devnull, "w")
        ns = {"__name__": "__main__"}
        for i, src in enumerate(spec["cells"]):
            if i in spec["run"]:
                try:
                    exec(compile(src, f"<cell {i}>", "exec"), ns)
                except BaseException:
                    pass
        try:
            result = repr(ns["ans"]())
        except BaseException as e:
            result = f"ans() raised {type(e).__name__}: {e}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    out.write(json.dumps(b"".join(chunks).decode()) + "\n")
    out.flush()
"""


@pytest.fixture(scope="module")
def run_cells():
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONHASHSEED": "0", "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"},
    )

    def run(cells: list[str], which: set[int]) -> str:
        server.stdin.write(json.dumps({"cells": cells, "run": sorted(which)}) + "\n")
        server.stdin.flush()
        return json.loads(server.stdout.readline())

    yield run
    server.stdin.close()
    server.wait(timeout=30)


def _notebook(cells: list[str]):
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.cells[-1].metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "ex"}
    return nb


# name -> (what the review of the first version found, cells); the last cell is the exercise
CASES: dict[str, tuple[str, list[str]]] = {}


def case(name: str, verdict: str, *cells: str) -> None:
    CASES[name] = (verdict, list(cells))


# ---------------------------------------------------------------- aliases and views
case(
    "alias_then_mutate_through_alias",
    "holds",
    "data = [[1, 2]]",
    "row = data[0]",
    "row.append(3)",
    "def ans():\n    return data",
)
case(
    "alias_taken_then_original_mutated",
    "HOLE",
    "data = [[1, 2]]",
    "row = data[0]",
    "data[0].append(3)",
    "def ans():\n    return list(row)",
)
case(
    "object_passed_to_constructor_then_mutated",
    "HOLE",
    "class Box:\n    def __init__(self, items):\n        self.items = items",
    "items = [1]",
    "box = Box(items)",
    "items.append(2)",
    "def ans():\n    return list(box.items)",
)
case(
    "tensor_view_then_base_changed",
    "HOLE",
    "import torch\nt = torch.zeros(3)",
    "v = t[:2]",
    "t.add_(1)",
    "def ans():\n    return v.tolist()",
)
case(
    "tensor_slice_changed_in_place",
    "holds",
    "import torch\nt = torch.zeros(3)",
    "v = t[:2]",
    "v.mul_(0).add_(5)",
    "def ans():\n    return t.tolist()",
)
case(
    "augassign_on_an_alias_list",
    "HOLE",
    "xs = [1]",
    "ys = xs",
    "ys += [2]",
    "def ans():\n    return list(xs)",
)
case(
    "augassign_on_a_tensor_view",
    "HOLE",
    "import torch\nt = torch.zeros(3)",
    "row = t[0:2]",
    "row += 1",
    "def ans():\n    return t.tolist()",
)
case(
    "augassign_on_a_view_inside_a_function",
    "HOLE",
    "import torch\nt = torch.zeros(3)",
    "def bump():\n    v = t[:1]\n    v += 1",
    "bump()",
    "def ans():\n    return t.tolist()",
)
case(
    "np_asarray_shares_the_array",
    "HOLE",
    "import numpy as np\na = np.zeros(3)",
    "b = np.asarray(a)",
    "b[0] = 7",
    "def ans():\n    return a.tolist()",
)
case(
    "np_reshape_function_is_a_view",
    "HOLE",
    "import numpy as np\na = np.zeros(4)",
    "b = np.reshape(a, (2, 2))",
    "b[0, 0] = 7",
    "def ans():\n    return a.tolist()",
)
case(
    "torch_as_tensor_shares_numpy_memory",
    "HOLE",
    "import numpy as np, torch\na = np.zeros(3)",
    "t = torch.as_tensor(a)",
    "t.add_(1)",
    "def ans():\n    return a.tolist()",
)
case(
    "shallow_copy_by_list_shares_rows",
    "HOLE",
    "rows = [[1], [2]]",
    "copy = list(rows)",
    "copy[0].append(9)",
    "def ans():\n    return rows",
)
case(
    "max_returns_an_element",
    "HOLE",
    "groups = [[1], [2, 3]]",
    "big = max(groups, key=len)",
    "big.append(0)",
    "def ans():\n    return groups",
)
case(
    "for_over_enumerate_mutates_rows",
    "HOLE",
    "grid = [[0], [0]]",
    "for i, row in enumerate(grid):\n    row[0] = i + 5",
    "def ans():\n    return grid",
)
case(
    "for_over_zip_mutates",
    "HOLE",
    "xs = [[1], [2]]\nys = [3, 4]",
    "for a, b in zip(xs, ys):\n    a.append(b)",
    "def ans():\n    return xs",
)
case(
    "for_over_list_directly_mutates",
    "holds",
    "xs = [[1], [2]]",
    "for a in xs:\n    a.append(0)",
    "def ans():\n    return xs",
)
case(
    "dict_values_mutated_in_loop",
    "holds",
    "d = {'a': [1]}",
    "for v in d.values():\n    v.append(2)",
    "def ans():\n    return d",
)
case(
    "unpacking_then_mutate",
    "holds",
    "pair = [[1], [2]]",
    "a, b = pair",
    "b.append(3)",
    "def ans():\n    return pair",
)
case(
    "star_unpacking_then_mutate",
    "holds",
    "rows = [[1], [2], [3]]",
    "first, *rest = rows",
    "rest[0].append(9)",
    "def ans():\n    return rows",
)
case(
    "walrus_alias_then_mutate",
    "holds",
    "xs = [1]",
    "if (ys := xs):\n    pass",
    "ys.append(2)",
    "def ans():\n    return xs",
)
case(
    "type_of_instance_attribute_set",
    "HOLE",
    "class C:\n    x = 1",
    "c = C()",
    "type(c).x = 5",
    "def ans():\n    return c.x",
)
case(
    "class_attribute_set_through_instance_class",
    "HOLE",
    "class C:\n    x = 1",
    "c = C()",
    "c.__class__.x = 5",
    "def ans():\n    return C.x",
)
case(
    "class_attribute_list_appended",
    "HOLE",
    "class C:\n    items = []",
    "C.items.append(1)",
    "def ans():\n    return list(C.items)",
)
case(
    "class_attribute_list_appended_through_instance",
    "HOLE",
    "class C:\n    items = []",
    "c = C()",
    "c.items.append(1)",
    "def ans():\n    return list(C.items)",
)
case(
    "class_attribute_assigned",
    "holds",
    "class Config:\n    lr = 0.1",
    "Config.lr = 1.0",
    "def ans():\n    return Config.lr",
)
case(
    "registry_class_method",
    "HOLE",
    "class Reg:\n    seen = []\n    @classmethod\n    def add(cls, x):\n        cls.seen.append(x)",
    "Reg.add(3)",
    "def ans():\n    return list(Reg.seen)",
)
case(
    "counter_via_self_class",
    "HOLE",
    "class C:\n    count = 0\n    def __init__(self):\n        self.__class__.count += 1",
    "a = C()",
    "def ans():\n    return C.count",
)
case(
    "counter_via_class_name",
    "holds",
    "class C:\n    count = 0\n    def __init__(self):\n        C.count += 1",
    "a = C()",
    "def ans():\n    return C.count",
)
case(
    "function_attribute_dict_updated",
    "HOLE",
    "def f():\n    return 1\nf.cache = {}",
    "f.cache.update(a=1)",
    "def ans():\n    return dict(f.cache)",
)
case(
    "vars_of_a_module_item_set",
    "holds",
    "import types\nhelpers = types.ModuleType('helpers')\nhelpers.x = 1",
    "vars(helpers)['x'] = 2",
    "def ans():\n    return helpers.x",
)
case(
    "vars_of_a_real_module_item_set",
    "HOLE",
    "import math",
    "vars(math)['tau'] = 1",
    "def ans():\n    import math\n    return math.tau",
)

case(
    "optimizer_step_trains_the_model",
    "holds",
    "import torch\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(2, 1)",
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
    "loss = model(torch.ones(1, 2)).sum()\nloss.backward()\nopt.step()",
    "def ans():\n    return [round(v, 4) for v in model.weight.flatten().tolist()]",
)
case(
    "weight_alias_then_model_changed",
    "HOLE",
    "import torch\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(2, 1)",
    "w = model.weight",
    "with torch.no_grad():\n    model.weight.fill_(1)",
    "def ans():\n    return w.flatten().tolist()",
)
case(
    "init_zeros_on_a_weight",
    "holds",
    "import torch\nmodel = torch.nn.Linear(2, 1)",
    "torch.nn.init.zeros_(model.weight)",
    "def ans():\n    return model.weight.flatten().tolist()",
)
case(
    "requires_grad_off_in_a_loop",
    "holds",
    "import torch\nmodel = torch.nn.Linear(2, 1)",
    "for p in model.parameters():\n    p.requires_grad_(False)",
    "def ans():\n    return [p.requires_grad for p in model.parameters()]",
)


# ---------------------------------------------------------------- calls that carry code
case(
    "bound_method_alias_called",
    "HOLE",
    "xs = [1]",
    "push = xs.append",
    "push(2)",
    "def ans():\n    return list(xs)",
)
case(
    "partial_of_list_append_called",
    "HOLE",
    "import functools\nxs = [1]",
    "p = functools.partial(list.append, xs)",
    "p(2)",
    "def ans():\n    return list(xs)",
)
case(
    "closure_capturing_a_list",
    "HOLE",
    "def make():\n    seen = []\n    def inc():\n        seen.append(1)\n        return len(seen)\n    return inc",
    "counter = make()",
    "counter()",
    "def ans():\n    return counter()",
)
case(
    "closure_nonlocal_counter",
    "HOLE",
    "def make():\n    n = 0\n    def inc():\n        nonlocal n\n        n += 1\n        return n\n    return inc",
    "counter = make()",
    "counter()",
    "def ans():\n    return counter()",
)
case(
    "mutable_default_argument",
    "HOLE",
    "def f(acc=[]):\n    acc.append(1)\n    return len(acc)",
    "f()",
    "def ans():\n    return f()",
)
case(
    "default_argument_is_a_global_list",
    "HOLE",
    "log = []",
    "def add(x, acc=log):\n    acc.append(x)",
    "add(3)",
    "def ans():\n    return list(log)",
)
case(
    "instance_method_mutates_global",
    "HOLE",
    "log = []",
    "class P:\n    def go(self):\n        log.append(1)",
    "p = P()",
    "p.go()",
    "def ans():\n    return list(log)",
)
case(
    "stateful_callable_object",
    "HOLE",
    "class Counter:\n    def __init__(self):\n        self.n = 0\n    def __call__(self):\n        self.n += 1",
    "c = Counter()",
    "c()",
    "def ans():\n    return c.n",
)
case(
    "batchnorm_forward_updates_running_stats",
    "HOLE",
    "import torch\ntorch.manual_seed(0)\nmodel = torch.nn.BatchNorm1d(2)",
    "x = torch.ones(4, 2) * 3",
    "out = model(x)",
    "def ans():\n    return model.running_mean.tolist()",
)
case(
    "subclass_inherits_mutating_method",
    "HOLE",
    "log = []",
    "class A:\n    def go(self):\n        log.append(1)",
    "class B(A):\n    pass",
    "B().go()",
    "def ans():\n    return list(log)",
)
case(
    "init_subclass_registers",
    "holds",
    "registry = []",
    "class Base:\n    def __init_subclass__(cls):\n        registry.append(cls.__name__)",
    "class Sub(Base):\n    pass",
    "def ans():\n    return list(registry)",
)
case(
    "decorator_registers_at_definition",
    "holds",
    "registry = []",
    "def register(f):\n    registry.append(f.__name__)\n    return f",
    "@register\ndef g():\n    pass",
    "def ans():\n    return list(registry)",
)
case(
    "decorated_function_wrapper_counts_calls",
    "HOLE",
    "calls = []",
    "def counted(f):\n    def wrapper(*a):\n        calls.append(1)\n        return f(*a)\n    return wrapper",
    "@counted\ndef g():\n    return 0",
    "g()",
    "def ans():\n    return len(calls)",
)
case(
    "function_returning_a_global_then_mutated",
    "HOLE",
    "net = [[0]]",
    "def layer(i):\n    return net[i]",
    "l0 = layer(0)",
    "l0.append(5)",
    "def ans():\n    return net",
)
case(
    "function_returning_a_function",
    "HOLE",
    "log = []",
    "def poke():\n    log.append(1)",
    "def pick():\n    return poke",
    "cb = pick()",
    "cb()",
    "def ans():\n    return list(log)",
)
case(
    "property_getter_mutates",
    "HOLE",
    "log = []",
    "class C:\n    @property\n    def v(self):\n        log.append(1)\n        return 1",
    "c = C()",
    "c.v",
    "def ans():\n    return len(log)",
)
case(
    "dunder_str_run_by_print",
    "HOLE",
    "log = []",
    "class C:\n    def __str__(self):\n        log.append(1)\n        return 'c'",
    "c = C()",
    "print(c)",
    "def ans():\n    return len(log)",
)
case(
    "lambdas_stored_in_list_same_cell",
    "holds",
    "xs = []",
    "fs = [lambda: xs.append(1)]",
    "fs[0]()",
    "def ans():\n    return list(xs)",
)
case(
    "lambdas_appended_to_list_in_another_cell",
    "HOLE",
    "xs = []",
    "fs = []",
    "fs.append(lambda: xs.append(1))",
    "fs[0]()",
    "def ans():\n    return list(xs)",
)
case(
    "callback_stored_in_dict_item",
    "HOLE",
    "xs = []",
    "def poke():\n    xs.append(1)",
    "handlers = {}",
    "handlers['go'] = poke",
    "handlers['go']()",
    "def ans():\n    return list(xs)",
)
case(
    "generator_function_mutates_when_advanced",
    "HOLE",
    "log = []",
    "def gen():\n    for i in range(3):\n        log.append(i)\n        yield i",
    "g = gen()",
    "next(g)",
    "def ans():\n    return list(log)",
)
case(
    "lru_cache_filled_by_skipped_cell",
    "HOLE",
    "import functools\nfactor = 2",
    "@functools.lru_cache\ndef scaled(x):\n    return x * factor",
    "scaled(3)",
    "factor = 10",
    "def ans():\n    return scaled(3)",
)
case(
    "global_declared_in_function",
    "HOLE",
    "n = 0",
    "def bump():\n    global n\n    n += 1",
    "bump()",
    "def ans():\n    return n",
)
case(
    "nested_function_mutates_global",
    "holds",
    "xs = []",
    "def outer():\n    def inner():\n        xs.append(1)\n    inner()",
    "outer()",
    "def ans():\n    return list(xs)",
)
case(
    "setattr_on_object",
    "holds",
    "class O:\n    pass\no = O()\no.a = 1",
    "setattr(o, 'a', 2)",
    "def ans():\n    return o.a",
)
case(
    "setattr_through_an_alias",
    "HOLE",
    "import math",
    "sa = setattr",
    "sa(math, 'tau', 1)",
    "def ans():\n    return math.tau",
)

# ---------------------------------------------------------------- iterators and laziness
case(
    "iterator_advanced_by_next",
    "holds",
    "it = iter([1, 2, 3])",
    "next(it)",
    "def ans():\n    return list(it)",
)
case(
    "generator_consumed_by_list",
    "HOLE",
    "g = (x for x in [1, 2, 3])",
    "print(list(g))",
    "def ans():\n    return list(g)",
)
case(
    "generator_consumed_by_sum",
    "HOLE",
    "g = (x for x in [1, 2, 3])",
    "total = sum(g)",
    "def ans():\n    return list(g)",
)
case(
    "iterator_consumed_by_print_star",
    "HOLE",
    "it = iter([1, 2, 3])",
    "print(*it)",
    "def ans():\n    return list(it)",
)
case(
    "iterator_consumed_by_unpacking",
    "HOLE",
    "it = iter([1, 2, 3])",
    "a, b, c = it",
    "def ans():\n    return list(it)",
)
case(
    "iterator_advanced_by_in",
    "HOLE",
    "it = iter([1, 2, 3])",
    "found = 2 in it",
    "def ans():\n    return list(it)",
)
case(
    "iterator_consumed_through_zip_into_dict",
    "HOLE",
    "it = iter([1, 2, 3])",
    "d = dict(zip('ab', it))",
    "def ans():\n    return list(it)",
)
case(
    "iterator_consumed_by_for",
    "holds",
    "it = iter([1, 2, 3])",
    "for x in it:\n    break",
    "def ans():\n    return list(it)",
)
case(
    "map_lazy_then_consumed",
    "HOLE",
    "log = []",
    "m = map(log.append, [1, 2])",
    "list(m)",
    "def ans():\n    return list(log)",
)
case(
    "filter_consumed_by_any",
    "HOLE",
    "f = filter(None, [0, 1, 2])",
    "any(f)",
    "def ans():\n    return list(f)",
)

# ---------------------------------------------------------------- modules and global state
case(
    "module_attribute_patched",
    "holds",
    "import math",
    "math.pi = 3",
    "def ans():\n    return math.pi",
)
case(
    "module_patched_under_another_name",
    "HOLE",
    "import math",
    "import math as m\nm.pi = 3",
    "def ans():\n    return math.pi",
)
case(
    "module_alias_by_assignment_patched",
    "HOLE",
    "import math",
    "m = math",
    "m.pi = 3",
    "def ans():\n    return math.pi",
)
case(
    "module_patched_then_from_import",
    "HOLE",
    "import math",
    "math.pi = 3",
    "from math import pi",
    "def ans():\n    return pi",
)
case(
    "module_patched_import_inside_exercise",
    "HOLE",
    "import math",
    "math.pi = 3",
    "def ans():\n    import math\n    return math.pi",
)
case(
    "sys_modules_replaced",
    "HOLE",
    "import sys, types",
    "fake = types.ModuleType('json')\nfake.x = 1\nsys.modules['json'] = fake",
    "def ans():\n    import json\n    return getattr(json, 'x', None)",
)
case(
    "builtins_patched",
    "HOLE",
    "import builtins",
    "builtins.len = lambda x: 0",
    "def ans():\n    return len([1, 2])",
)
case(
    "builtins_new_name",
    "HOLE",
    "import builtins",
    "builtins.SCALE = 7",
    "def ans():\n    return SCALE",
)
case(
    "importlib_reload_undoes_patch",
    "HOLE",
    "import string, importlib",
    "string.digits = 'x'",
    "importlib.reload(string)",
    "def ans():\n    return string.digits",
)
case(
    "importlib_reload_of_a_builtin_module",
    "holds",
    "import math, importlib",
    "math.pi = 3",
    "importlib.reload(math)",
    "def ans():\n    return math.pi",
)
case(
    "os_environ_item_set",
    "holds",
    "import os",
    "os.environ['COURSE_FLAG'] = '1'",
    "def ans():\n    return os.environ.get('COURSE_FLAG')",
)
case(
    "os_environ_from_import_set",
    "HOLE",
    "import os",
    "from os import environ\nenviron['COURSE_FLAG'] = '1'",
    "def ans():\n    return os.getenv('COURSE_FLAG')",
)
case(
    "os_putenv_then_environ",
    "HOLE",
    "import os",
    "os.environ.setdefault('COURSE_FLAG', '2')",
    "def ans():\n    return os.environ.get('COURSE_FLAG')",
)
case(
    "decimal_context_precision",
    "HOLE",
    "from decimal import Decimal, getcontext",
    "getcontext().prec = 3",
    "def ans():\n    return str(Decimal(1) / Decimal(7))",
)
case(
    "warnings_filter_error",
    "HOLE",
    "import warnings",
    "warnings.filterwarnings('error')",
    "def ans():\n    try:\n        warnings.warn('w')\n    except UserWarning:\n        return 'raised'\n    return 'warned'",
)
case(
    "warnings_simplefilter_error",
    "HOLE",
    "import warnings",
    "warnings.simplefilter('error')",
    "def ans():\n    try:\n        warnings.warn('w')\n    except UserWarning:\n        return 'raised'\n    return 'warned'",
)
case(
    "sys_setrecursionlimit",
    "holds",
    "import sys",
    "sys.setrecursionlimit(123)",
    "def ans():\n    return sys.getrecursionlimit()",
)
case(
    "np_seterr_raise",
    "HOLE",
    "import numpy as np",
    "np.seterr(all='raise')",
    "def ans():\n    try:\n        return float(np.float64(1) / np.float64(0))\n    except FloatingPointError:\n        return 'raised'",
)
case(
    "np_set_printoptions",
    "HOLE",
    "import numpy as np",
    "np.set_printoptions(precision=2)",
    "def ans():\n    return str(np.array([1 / 3]))",
)
case(
    "np_fill_diagonal_mutates",
    "HOLE",
    "import numpy as np\na = np.zeros((2, 2))",
    "np.fill_diagonal(a, 1)",
    "def ans():\n    return a.tolist()",
)
case(
    "np_copyto_mutates",
    "HOLE",
    "import numpy as np\na = np.zeros(2)",
    "np.copyto(a, [1, 2])",
    "def ans():\n    return a.tolist()",
)
case(
    "np_random_shuffle_mutates_data",
    "HOLE",
    "import numpy as np\nnp.random.seed(0)\ndata = np.arange(5)",
    "np.random.shuffle(data)",
    "def ans():\n    return sorted(data.tolist()) == data.tolist()",
)
case(
    "user_function_named_like_a_pure_one",
    "HOLE",
    "data = [3, 1, 2]",
    "def mean(xs):\n    xs.sort()\n    return xs[1]",
    "mean(data)",
    "def ans():\n    return list(data)",
)
case(
    "torch_set_default_dtype",
    "holds",
    "import torch",
    "torch.set_default_dtype(torch.float64)",
    "def ans():\n    return str(torch.zeros(1).dtype)",
)
case(
    "torch_set_default_dtype_via_alias",
    "HOLE",
    "import torch",
    "f = torch.set_default_dtype\nf(torch.float64)",
    "def ans():\n    return str(torch.zeros(1).dtype)",
)
case(
    "torch_set_default_dtype_from_import_as",
    "HOLE",
    "import torch",
    "from torch import set_default_dtype as sdd\nsdd(torch.float64)",
    "def ans():\n    return str(torch.zeros(1).dtype)",
)
case(
    "torch_set_default_dtype_in_a_function_called_later",
    "HOLE",
    "import torch",
    "def setup():\n    torch.set_default_dtype(torch.float64)",
    "setup()",
    "def ans():\n    return str(torch.zeros(1).dtype)",
)
case(
    "torch_set_grad_enabled_with_block",
    "holds",
    "import torch",
    "with torch.set_grad_enabled(False):\n    y = 1",
    "def ans():\n    return (torch.ones(1, requires_grad=True) * 2).requires_grad",
)
case(
    "torch_grad_left_disabled_by_last_false",
    "HOLE",
    "import torch",
    "torch.set_grad_enabled(True)\ny = 1\ntorch.set_grad_enabled(False)",
    "def ans():\n    return (torch.ones(1, requires_grad=True) * 2).requires_grad",
)
case(
    "torch_default_dtype_restored_to_float32_over_float64",
    "HOLE",
    "import torch\ntorch.set_default_dtype(torch.float64)",
    "torch.set_default_dtype(torch.float16)\nz = 1\ntorch.set_default_dtype(torch.float32)",
    "def ans():\n    return str(torch.zeros(1).dtype)",
)
case(
    "torch_set_printoptions",
    "HOLE",
    "import torch",
    "torch.set_printoptions(precision=1)",
    "def ans():\n    return str(torch.tensor([1 / 3]))",
)
case(
    "torch_no_grad_entered_without_with",
    "HOLE",
    "import torch",
    "ctx = torch.no_grad()\nctx.__enter__()",
    "def ans():\n    return (torch.ones(1, requires_grad=True) * 2).requires_grad",
)
case(
    "torch_private_grad_setter",
    "HOLE",
    "import torch",
    "torch._C._set_grad_enabled(False)",
    "def ans():\n    return (torch.ones(1, requires_grad=True) * 2).requires_grad",
)
case(
    "matplotlib_rcparams_via_plt",
    "HOLE",
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt",
    "plt.rcParams['lines.linewidth'] = 5",
    "def ans():\n    return matplotlib.rcParams['lines.linewidth']",
)
case(
    "matplotlib_style_use",
    "HOLE",
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt",
    "plt.style.use('ggplot')",
    "def ans():\n    return plt.rcParams['axes.facecolor']",
)
case(
    "matplotlib_rcparams_same_name",
    "holds",
    "import matplotlib\nmatplotlib.use('Agg')",
    "matplotlib.rcParams['lines.linewidth'] = 5",
    "def ans():\n    return matplotlib.rcParams['lines.linewidth']",
)
case(
    "os_chdir",
    "holds",
    "import os\nos.mkdir('sub')",
    "os.chdir('sub')",
    "def ans():\n    return os.path.basename(os.getcwd())",
)

# ---------------------------------------------------------------- the file system and streams
case(
    "file_written_then_read",
    "HOLE",
    "value = 5",
    "with open('saved.txt', 'w') as f:\n    f.write(str(value))",
    "def ans():\n    with open('saved.txt') as f:\n        return f.read()",
)
case(
    "pathlib_write_then_read",
    "HOLE",
    "from pathlib import Path",
    "Path('out.txt').write_text('hi')",
    "def ans():\n    return Path('out.txt').read_text() if Path('out.txt').exists() else None",
)
case(
    "pickle_dump_then_load",
    "HOLE",
    "import pickle\nobj = {'a': 1}",
    "with open('o.pkl', 'wb') as f:\n    pickle.dump(obj, f)",
    "def ans():\n    with open('o.pkl', 'rb') as f:\n        return pickle.load(f)",
)
case(
    "torch_save_checkpoint_then_load",
    "HOLE",
    "import torch\nw = torch.ones(2)",
    "torch.save(w, 'ckpt.pt')",
    "def ans():\n    return torch.load('ckpt.pt').tolist()",
)
case(
    "print_to_a_stringio",
    "HOLE",
    "import io\nbuf = io.StringIO()",
    "print('hello', file=buf)",
    "def ans():\n    return buf.getvalue()",
)
case(
    "redirect_stdout_into_buffer",
    "holds",
    "import io, contextlib\nbuf = io.StringIO()",
    "with contextlib.redirect_stdout(buf):\n    print('hello')",
    "def ans():\n    return buf.getvalue()",
)
case(
    "stdout_replaced",
    "holds",
    "import sys, io\nbuf = io.StringIO()\nreal = sys.stdout",
    "sys.stdout = buf",
    "print('x')\nsys.stdout = real\ndef ans():\n    return buf.getvalue()",
)

# ---------------------------------------------------------------- object lifetime
case(
    "weakref_dies_after_del",
    "HOLE",
    "import weakref\nclass O:\n    pass\nobj = O()",
    "r = weakref.ref(obj)",
    "del obj",
    "def ans():\n    return r() is None",
)
case(
    "dunder_del_on_rebind",
    "HOLE",
    "log = []",
    "class C:\n    def __del__(self):\n        log.append(1)",
    "c = C()",
    "c = None",
    "def ans():\n    return list(log)",
)

# ---------------------------------------------------------------- binding forms
case("del_unbinds", "holds", "x = 1", "del x", "def ans():\n    return 'x' in globals()")
case(
    "del_unbinds_read_directly",
    "holds",
    "x = 1",
    "del x",
    "try:\n    got = x\nexcept NameError:\n    got = 'unbound'\ndef ans():\n    return got",
)
case("bare_annotation_binds_nothing", "holds", "x = 5", "x: int", "def ans():\n    return x")
case(
    "suppressed_exception_in_with",
    "holds",
    "import contextlib\nx = 1",
    "with contextlib.suppress(ZeroDivisionError):\n    x = 1 / 0",
    "def ans():\n    return x",
)
case(
    "cell_that_raises_before_binding",
    "holds",
    "x = 1",
    "int('not a number')\nx = 2",
    "def ans():\n    return x",
)
case(
    "bare_annotation_binds_nothing_top_level_read",
    "HOLE",
    "x = 5",
    "x: int",
    "got = x\ndef ans():\n    return got",
)
case(
    "suppressed_exception_in_with_top_level_read",
    "holds",
    "import contextlib\nx = 1",
    "with contextlib.suppress(ZeroDivisionError):\n    x = 1 / 0",
    "got = x\ndef ans():\n    return got",
)
case(
    "cell_that_raises_before_binding_top_level_read",
    "HOLE",
    "x = 1",
    "int('not a number')\nx = 2",
    "got = x\ndef ans():\n    return got",
)
case(
    "lambda_default_captures_then_rebound",
    "HOLE",
    "xs = [1]",
    "f = lambda a=xs: a",
    "f().append(2)",
    "def ans():\n    return list(xs)",
)
case(
    "exception_object_keeps_a_reference",
    "HOLE",
    "xs = [1]",
    "try:\n    raise ValueError(xs)\nexcept ValueError as err:\n    saved = err",
    "saved.args[0].append(2)",
    "def ans():\n    return list(xs)",
)
case(
    "except_binding_unbinds_name",
    "holds",
    "e = 'set'",
    "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    pass",
    "try:\n    got = e\nexcept NameError:\n    got = 'unbound'\ndef ans():\n    return got",
)
case(
    "match_capture_binds",
    "holds",
    "y = 0",
    "match [1, 2]:\n    case [a, y]:\n        pass",
    "def ans():\n    return y",
)
case(
    "walrus_in_comprehension_binds",
    "holds",
    "last = 0",
    "_ = [(last := v) for v in [1, 2, 3]]",
    "def ans():\n    return last",
)
case(
    "for_target_rebinds", "holds", "x = 0", "for x in [1, 2]:\n    pass", "def ans():\n    return x"
)
case(
    "exec_in_a_skipped_cell",
    "HOLE",
    "xs = [1]",
    "exec('xs.append(2)')",
    "def ans():\n    return list(xs)",
)
case("exec_rebinds_a_bound_name", "HOLE", "x = 1", "exec('x = 2')", "def ans():\n    return x")
case("eval_mutates", "HOLE", "xs = [1]", "eval('xs.append(2)')", "def ans():\n    return list(xs)")
case("globals_item_assigned", "HOLE", "x = 1", "globals()['x'] = 2", "def ans():\n    return x")
case("globals_update", "HOLE", "x = 1", "globals().update(x=2)", "def ans():\n    return x")
case(
    "exercise_uses_globals",
    "holds",
    "x = 1",
    "y = 2",
    "def ans():\n    return sorted(k for k in globals() if len(k) == 1)",
)
case("import_this_side_effect_only", "holds", "import this", "x = 1", "def ans():\n    return x")

# ---------------------------------------------------------------- a solution that reads by
# deleting, augmenting or declaring global: added after the review (cells 0 .. n-2 are the
# course's, the last the student's); "HOLE" where the planner before them skipped a cell and the
# exercise saw something else, "holds" where it already ran what was needed
case("solution_deletes_a_course_name", "HOLE", "x = [1]", "del x\ndef ans():\n    return 'ran'")
case(
    "solution_deletes_two_names_one_bound_apart",
    "HOLE",
    "a = 1",
    "b = 2",
    "del a, b\ndef ans():\n    return 'ran'",
)
case(
    "solution_function_deletes_a_global",
    "HOLE",
    "x = 1",
    "def ans():\n    global x\n    del x\n    return 'deleted'",
)
case(
    "solution_augments_then_rebinds",
    "HOLE",
    "x = [1]",
    "x += [2]\nx = None\ndef ans():\n    return 'ran'",
)
case(
    "solution_augments_a_course_name",
    "holds",
    "x = [1]",
    "x += [2]\ndef ans():\n    return list(x)",
)
case(
    "solution_function_augments_a_global",
    "holds",
    "x = 1",
    "def ans():\n    global x\n    x += 1\n    return x",
)
case(
    "solution_declares_global_at_top_level",
    "holds",
    "x = 1",
    "global x\nx += 1\ndef ans():\n    return x",
)
case(
    "solution_stores_an_item",
    "holds",
    "x = [1, 2]",
    "x[0] = 5\ndef ans():\n    return 'ran'",
)
case(
    "solution_stores_an_attribute",
    "holds",
    "import types\nx = types.SimpleNamespace()",
    "x.a = 2\ndef ans():\n    return x.a",
)
case(
    "solution_augments_an_attribute",
    "holds",
    "import types\nx = types.SimpleNamespace(a=1)",
    "x.a += 1\ndef ans():\n    return 'ran'",
)
case(
    "solution_walrus_reads_then_binds",
    "holds",
    "x = 1",
    "(x := x + 1)\ndef ans():\n    return 'ran'",
)
case(
    "solution_nonlocal_reads_a_global",
    "holds",
    "x = 3",
    "def ans():\n    y = 0\n    def add():\n        nonlocal y\n        y += x\n    add()\n    return y",
)
case(
    "solution_for_loop_that_may_not_run",
    "holds",
    "x = 1",
    "for x in []:\n    pass\ndef ans():\n    return x",
)
case(
    "solution_with_as_rebinds",
    "holds",
    "import contextlib\nx = [1]",
    "with contextlib.nullcontext(x) as x:\n    x.append(2)\ndef ans():\n    return 'ran'",
)
case(
    "solution_import_as_rebinds",
    "holds",
    "import math as m\nx = m.e",
    "import math as x\ndef ans():\n    return x.pi",
)
case(
    "solution_except_as_unbinds_only_when_raised",
    "holds",
    "x = 1",
    "try:\n    pass\nexcept Exception as x:\n    pass\ndef ans():\n    return x",
)
case(
    "function_declaring_global_binds_what_a_later_cell_changes",
    "HOLE",
    "data = [1]",
    "def bind():\n    global x\n    x = data\nbind()",
    "x.append(2)",
    "def ans():\n    return list(data)",
)
case(
    "function_declaring_global_binds_in_a_loop",
    "HOLE",
    "data = [1]",
    "def bind():\n    global x\n    for x in [data]:\n        pass\nbind()",
    "x.append(2)",
    "def ans():\n    return list(data)",
)

# ---------------------------------------------------------------- random state (documented)
case(
    "random_seed_in_skipped_cell",
    "holds",
    "import random",
    "random.seed(1)",
    "def ans():\n    random.seed(0)\n    return random.random()",
)
case(
    "random_state_advanced_by_skipped_cell",
    "LIMITATION",
    "import random\nrandom.seed(0)",
    "random.random()",
    "def ans():\n    return random.random()",
)
case(
    "np_random_advanced",
    "LIMITATION",
    "import numpy as np\nnp.random.seed(0)",
    "np.random.rand()",
    "def ans():\n    return float(np.random.rand())",
)
case(
    "torch_manual_seed_advanced",
    "LIMITATION",
    "import torch\ntorch.manual_seed(0)",
    "torch.rand(1)",
    "def ans():\n    return torch.rand(1).tolist()",
)
case(
    "np_generator_object_advanced",
    "holds",
    "import numpy as np\nrng = np.random.default_rng(0)",
    "rng.random()",
    "def ans():\n    return float(rng.random())",
)
case(
    "torch_generator_object_advanced",
    "holds",
    "import torch\ng = torch.Generator().manual_seed(0)",
    "torch.rand(1, generator=g)",
    "def ans():\n    return torch.rand(1, generator=g).tolist()",
)


def _marks(name):
    if CASES[name][0] == "LIMITATION":
        return [pytest.mark.xfail(strict=True, reason="the random state is not tracked")]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in CASES])
def test_planned_run_gives_the_exercise_what_the_whole_notebook_gives(name, run_cells):
    _, cells = CASES[name]
    nb = _notebook(cells)
    plan = planner.plan(nb, nb)
    everything = set(range(len(cells)))
    assert len(cells) - 1 in plan.run  # the exercise always runs
    if plan.run == everything:
        return  # nothing skipped: nothing to compare
    whole, planned = run_cells(cells, everything), run_cells(cells, plan.run)
    assert planned == whole, (name, "skipped", plan.skipped, "planned", planned, "whole", whole)
