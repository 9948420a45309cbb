"""Which cells a graded run executes: every cell an exercise needs, none of the course's
demonstrations that no exercise needs (issue "Grading a class of three hundred").

A cell of a submission is one of the **course's cells** when its source is exactly that of the
release cell it lines up with (the cells are aligned by content with ``difflib``, not by a tag or
an id the student could edit). The grader always runs every exercise cell (solution and check),
every cell the student added or changed, and every course cell that one of those needs, in the
notebook's order; the other course cells (training runs, sweeps, figures) are skipped.

A course cell is **needed** (computed to a fixpoint, from the cells that always run):

* it binds a name a needed cell reads at the top level (the last unconditional binding before
  that cell, and any conditional ones after it), or a name a needed cell's functions or classes
  read when they run (every cell that binds it: when they run is not known);
* it reads a name bound by assignment (an object that may be changed in place: a model, a list)
  that a needed cell reads, or a name bound from such an object (``opt = Adam(model.parameters())``),
  before that cell; or it assigns an attribute or item of any name a needed cell reads
  (``helpers.x = ...``);
* it changes the interpreter's or a library's global state by a known call
  (``torch.set_default_dtype``, ``set_grad_enabled``, ``warnings.filterwarnings`` ...), holds an
  IPython magic or shell escape, declares ``global``/``nonlocal``, or does not parse.

Nothing is skipped at all when a needed cell reaches the namespace as a whole (``globals()``,
``exec``, ``In``/``Out``/``_``, ``get_ipython``, ...) or reads a name no cell binds while some cell
binds names the parser cannot see (``from x import *``, ``exec``). The random state is not
tracked: the hidden tests seed their own generators (a test of every lesson checks that the
verdicts are the same with and without skipping).
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
import symtable
from dataclasses import dataclass, field

from . import limits

#: Names that reach the namespace as a whole, or IPython's history of cells and outputs.
DYNAMIC = {"globals", "locals", "vars", "dir", "eval", "exec", "__import__", "get_ipython",
           "In", "Out", "_", "__", "___", "_i", "_ii", "_iii", "_ih", "_oh", "_dh", "exit",
           "quit", "__builtins__", "__dict__"}  # fmt: skip
_HISTORY = re.compile(r"^_i?\d+$")
#: Calls that change global state a later cell may depend on.
GLOBAL_STATE = re.compile(
    r"(^|\.)(set_default_dtype|set_default_tensor_type|set_default_device|set_grad_enabled|"
    r"use_deterministic_algorithms|set_num_threads|set_num_interop_threads|set_flush_denormal|"
    r"set_float32_matmul_precision|setrecursionlimit|chdir|putenv|set_anomaly_enabled|"
    r"set_detect_anomaly)$"
)
_BUILTINS = set(dir(builtins)) | {"display", "__name__", "__file__", "get_ipython"}
#: A setter whose last call in a cell passes one of these puts the default back.
_DEFAULTS = {"torch.float32", "True", "False", "None"}
_COMPREHENSIONS = {"listcomp", "setcomp", "dictcomp", "genexpr"}


@dataclass
class CellFacts:
    """What one code cell binds, reads and changes (from its source alone)."""

    binds: set[str] = field(default_factory=set)
    binds_always: set[str] = field(default_factory=set)  # unconditional top-level bindings
    imports: set[str] = field(default_factory=set)  # bound by import, def or class
    values: set[str] = field(default_factory=set)  # bound to numbers, strings, tuples of them
    reads: set[str] = field(default_factory=set)  # read when the cell runs
    reads_later: set[str] = field(default_factory=set)  # read by its functions when called
    mutates: set[str] = field(default_factory=set)  # objects it may change in place
    stores: set[str] = field(default_factory=set)  # names whose attributes or items it assigns
    aliases: dict[str, set[str]] = field(default_factory=dict)  # bound name -> names it may share
    effects: list[str] = field(default_factory=list)  # why it must run wherever it is
    dynamic: bool = False  # reaches the namespace as a whole
    star: bool = False  # binds names the parser cannot see


def python_source(source: str) -> tuple[str, bool]:
    """A cell's source as plain Python: IPython's own transformation (magics become
    ``get_ipython()`` calls, ``!`` shell escapes, ``?`` help), and whether it held any."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        transformed = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - left as it is; the parser reports it
        return source, False
    return transformed, transformed.rstrip() != source.rstrip()


def _magic_call(node: ast.Call) -> bool:
    """``get_ipython()`` as IPython's transformation writes a magic: ``get_ipython().run_line_magic``
    (and ``run_cell_magic``, ``system``, ``getoutput``): an effect, not a read of the namespace."""
    return isinstance(node.func, ast.Name) and node.func.id == "get_ipython" and not node.args


def _immutable(value, known: set[str]) -> bool:
    """A value that cannot be changed in place: constants, and arithmetic, tuples, f-strings of
    constants and of names already known to hold such values."""
    for node in ast.walk(value):
        if isinstance(node, ast.Name):
            if node.id not in known:
                return False
        elif not isinstance(
            node,
            ast.Constant
            | ast.BinOp
            | ast.UnaryOp
            | ast.BoolOp
            | ast.Compare
            | ast.Tuple
            | ast.JoinedStr
            | ast.FormattedValue
            | ast.operator
            | ast.unaryop
            | ast.boolop
            | ast.cmpop
            | ast.expr_context,
        ):
            return False
    return True


def _is_plain_target(target) -> bool:
    return isinstance(target, ast.Name) or (
        isinstance(target, ast.Tuple | ast.List)
        and all(isinstance(e, ast.Name) for e in target.elts)
    )


def _loads(node) -> set[str]:
    """Names read by a statement when it runs (not inside the functions or lambdas it defines)."""
    found: set[str] = set()

    def visit(n):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in n.decorator_list + n.args.defaults + n.args.kw_defaults:
                if d is not None:
                    visit(d)
            return
        if isinstance(n, ast.Lambda):
            for d in n.args.defaults + n.args.kw_defaults:
                if d is not None:
                    visit(d)
            return
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            found.add(n.id)
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return found


#: Calls that read their arguments and never change them (a guess at the rest: they may).
PURE = {"print", "len", "int", "float", "str", "repr", "bool", "isinstance", "issubclass", "type",
        "range", "abs", "min", "max", "sum", "sorted", "list", "tuple", "set", "frozenset", "round",
        "enumerate", "zip", "any", "all", "hash", "id", "format", "divmod", "pow", "fmt", "math",
        "count_parameters", "allclose", "isclose", "equal", "assert_close", "norm", "mean", "std",
        "tensor", "as_tensor", "array", "asarray", "stack", "cat", "isfinite", "isnan", "argmax",
        "item", "tolist", "shape", "size", "numel", "dim", "exp", "log", "sqrt"}  # fmt: skip
_PURE_MODULES = {"math", "np", "numpy", "statistics"}


def _uses(tree, out: CellFacts) -> None:
    """Which names the cell may change in place (a method called on it, passed to a call that is
    not known to be pure, iterated, assigned into), and which bound names may share an object
    with which read names (``v = u``, ``v = u.weight``, ``v = f(u)``; not ``v = u + 1``)."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def pure_call(call) -> bool:
        func = call.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name is None or name.endswith("_") or any(k.arg == "out" for k in call.keywords):
            return False
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in _PURE_MODULES:
            return True
        return name in PURE

    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        name, child, parent = node.id, node, parents.get(node)
        shared = changed = False
        # climb through attribute and item reads: u.a[0].b
        while isinstance(parent, ast.Attribute | ast.Subscript) and parent.value is child:
            child, parent = parent, parents.get(parent)
            shared = True
        if isinstance(parent, ast.Call) and parent.func is child:
            changed = shared = not (shared and pure_call(parent)) if child is not node else False
            if child is not node and not pure_call(parent):
                changed = True
        elif (isinstance(parent, ast.keyword) and parent.arg is None) or (
            isinstance(parent, ast.Starred) and isinstance(parents.get(parent), ast.Call)
        ):
            pass  # f(*u) and f(**u) unpack u: its items may be shared, u itself is not changed
        elif isinstance(parent, ast.Call | ast.keyword | ast.Starred):
            call = parent if isinstance(parent, ast.Call) else parents.get(parent)
            if not (isinstance(call, ast.Call) and pure_call(call)):
                changed = shared = True
        elif isinstance(parent, ast.BinOp | ast.UnaryOp | ast.Compare | ast.BoolOp | ast.FormattedValue
                        | ast.Assert | ast.If | ast.While | ast.IfExp | ast.JoinedStr):  # fmt: skip
            pass
        elif (
            isinstance(parent, ast.For | ast.AsyncFor | ast.comprehension) and parent.iter is child
        ):
            changed = shared = True
        elif isinstance(parent, ast.withitem | ast.AugAssign | ast.Return | ast.Yield | ast.Await):
            changed = shared = True
        else:  # a plain assignment, an element of a list or dict, an argument default ...
            shared = True
        if changed:
            out.mutates.add(name)
        if shared:
            assign = parent
            while assign is not None and not isinstance(
                assign, ast.Assign | ast.AnnAssign | ast.NamedExpr
            ):
                if isinstance(assign, ast.stmt) and not isinstance(assign, ast.Expr):
                    break
                assign = parents.get(assign)
            if isinstance(assign, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
                for target in targets:
                    for bound in _names_in(target):
                        out.aliases.setdefault(bound, set()).add(name)


def _names_in(target) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _base(node) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def facts(source: str) -> CellFacts:
    """Parse one cell (magics stripped first)."""
    out = CellFacts()
    try:
        limits.check_source(source)  # nothing parses a cell over the grader's caps
    except limits.OverLimit as e:
        out.effects.append(f"not analysed: {e}")
        out.dynamic = True  # unread: assume the worst
        return out
    code, magic = python_source(source)
    if magic:
        out.effects.append("holds an IPython magic or shell escape")
    try:
        tree = ast.parse(code)
        table = symtable.symtable(code, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        out.effects.append(f"does not parse ({type(e).__name__})")
        out.dynamic = isinstance(e, RecursionError | MemoryError)  # unread: assume the worst
        return out

    def top_level(stmts, always: bool):
        for node in stmts:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        out.star = True
                        continue
                    name = alias.asname or alias.name.split(".")[0]
                    out.binds.add(name)
                    out.imports.add(name)
                    if always:
                        out.binds_always.add(name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.binds.add(node.name)
                out.imports.add(node.name)
                if always:
                    out.binds_always.add(node.name)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    bind_target(target, always and not isinstance(node, ast.AugAssign))
                if node.value is not None and _immutable(node.value, out.imports | out.values):
                    for target in targets:
                        for name in _names_in(target) if _is_plain_target(target) else []:
                            out.values.add(name)
            elif isinstance(node, ast.For | ast.AsyncFor):
                bind_target(node.target, False)
                top_level(node.body + node.orelse, False)
            elif isinstance(node, ast.With | ast.AsyncWith):
                for item in node.items:
                    if item.optional_vars is not None:
                        bind_target(item.optional_vars, always)
                top_level(node.body, always)
            elif isinstance(node, ast.If | ast.While):
                top_level(node.body + node.orelse, False)
            elif isinstance(node, ast.Try | ast.TryStar):
                top_level(node.body + node.orelse + node.finalbody, False)
                for handler in node.handlers:
                    if handler.name:
                        out.binds.add(handler.name)
                    top_level(handler.body, False)
            elif isinstance(node, ast.Match):
                for case in node.cases:
                    for n in ast.walk(case.pattern):
                        name = getattr(n, "name", None) or getattr(n, "rest", None)
                        if isinstance(name, str):
                            out.binds.add(name)
                    top_level(case.body, False)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out.binds.add(target.id)
                    else:
                        mutate(target)
            elif isinstance(node, ast.Global | ast.Nonlocal):
                out.effects.append("declares global names")

    def bind_target(target, always):
        if isinstance(target, ast.Name):
            out.binds.add(target.id)
            if always:
                out.binds_always.add(target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                bind_target(element, always)
        elif isinstance(target, ast.Starred):
            bind_target(target.value, always)
        else:
            mutate(target)

    def mutate(target):
        base = _base(target)
        if base:
            out.mutates.add(base)
            out.stores.add(base)

    top_level(tree.body, True)
    setters: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            out.binds.add(node.target.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            out.effects.append("declares global names")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            dotted = ast.unparse(func) if not isinstance(func, ast.Lambda) else ""
            if name in ("setattr", "delattr") and node.args:
                mutate(node.args[0])
            if name in DYNAMIC and isinstance(func, ast.Name) and not _magic_call(node):
                if name not in ("vars", "dir") or not (node.args or node.keywords):
                    out.dynamic = True
            if GLOBAL_STATE.search(dotted):
                setters.setdefault(dotted, []).append(node)
        elif isinstance(node, ast.Attribute) and node.attr in ("__dict__", "__globals__"):
            out.dynamic = True

    def walk_table(table, nested: bool):
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if not symbol.is_referenced():
                continue
            if nested and not (symbol.is_global() or symbol.is_free()):
                continue
            if symbol.is_free():
                continue  # a closure variable of an enclosing function, not a global
            if (name in DYNAMIC - {"vars", "dir", "get_ipython"}) or _HISTORY.match(name):
                out.dynamic = True
            if not nested or table.get_type() == "class":
                out.reads.add(name)  # read when the cell runs (a class body runs at once)
            elif table.get_name() in _COMPREHENSIONS:
                out.reads.add(name)  # run at once, or later (a generator): both
                out.reads_later.add(name)
            else:
                out.reads_later.add(name)  # a function's body: whenever it is called
        for child in table.get_children():
            walk_table(child, nested=True)

    walk_table(table, nested=False)
    _uses(tree, out)
    # what the cell reads before it binds it itself (``x = f(); g(x)`` reads no earlier x)
    external, bound = set(), set()
    for stmt in tree.body:
        external |= _loads(stmt) - bound
        before = set(out.binds_always)
        out.binds_always.clear()
        top_level([stmt], True)
        bound |= out.binds_always
        out.binds_always |= before
    out.reads = {n for n in out.reads if n in external or n not in out.binds_always}
    for dotted, calls in setters.items():
        last = calls[-1]
        restored = len(calls) > 1 and last.args and ast.unparse(last.args[0]) in _DEFAULTS
        if not restored:
            out.effects.append(f"changes global state ({dotted})")
    return out


def _facts_or_worst(source: str) -> CellFacts:
    """A cell's facts, or, for a cell the analysis cannot read (nested too deep, too long), a
    cell that always runs and reads the namespace as a whole (nothing is skipped)."""
    try:
        return facts(source)
    except (RecursionError, MemoryError, ValueError, SyntaxError) as e:
        return CellFacts(effects=[f"could not be analysed ({type(e).__name__})"], dynamic=True)


@dataclass
class Plan:
    """The cells a graded run executes (indices into ``nb.cells``) and those it skips."""

    run: set[int]
    skipped: list[int]
    note: str = ""
    why: dict[int, str] = field(default_factory=dict)  # needed course cell -> first reason


def course_cells(nb, release) -> dict[int, int]:
    """{submission cell index: release cell index} for cells whose source is the release's."""
    mine = [(c.cell_type, c.source) for c in nb.cells]
    theirs = [(c.cell_type, c.source) for c in release.cells]
    matcher = difflib.SequenceMatcher(None, mine, theirs, autojunk=False)
    matched = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            matched[block.a + k] = block.b + k
    return matched


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def plan(nb, release, enabled: bool = True) -> Plan:
    """Which code cells of ``nb`` (a submission, or the instructor's source) to execute, given
    the student ``release`` of the same lesson (see the module docstring)."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if not enabled:
        return Plan(set(code), [], "skipping is off")
    matched = course_cells(nb, release)
    info = {i: _facts_or_worst(nb.cells[i].source) for i in code}
    always: dict[int, str] = {}
    for i in code:
        cell, twin = nb.cells[i], release.cells[matched[i]] if i in matched else None
        if _nbgrader(cell).get("solution") or _nbgrader(cell).get("grade"):
            always[i] = "an exercise cell"
        elif twin is not None and (_nbgrader(twin).get("solution") or _nbgrader(twin).get("grade")):
            always[i] = "an exercise cell"
        elif twin is None:
            always[i] = "added or changed by the student"
        elif info[i].effects:
            always[i] = info[i].effects[0]
    if any(info[i].dynamic for i in always):
        return Plan(set(code), [], "a cell that always runs reads the namespace as a whole")

    binders: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for i in code:
        for name in info[i].binds:
            binders.setdefault(name, []).append(i)
        for name in info[i].reads | info[i].reads_later:
            readers.setdefault(name, []).append(i)
    star = [i for i in code if info[i].star or info[i].dynamic]
    mutable = {n for i in code for n in info[i].binds - info[i].imports - info[i].values}

    def related(name: str) -> set[str]:
        """The name, and names bound from it that may share its object (views, optimizers)."""
        seen, todo = {name}, [name]
        while todo:
            n = todo.pop()
            for i in code:
                for bound, sources in info[i].aliases.items():
                    if n in sources and bound not in seen and bound in mutable:
                        seen.add(bound)
                        todo.append(bound)
        return seen

    needed = dict(always)
    todo = list(always)
    while todo:
        n = todo.pop()

        def need(i, why):
            if i not in needed:
                needed[i] = why
                todo.append(i)

        for name in info[n].reads:
            before = [i for i in binders.get(name, []) if i < n]
            for i in reversed(before):
                need(i, f"binds {name!r}, which cell {n} reads")
                if name in info[i].binds_always and name not in info[i].reads:
                    break
            if not binders.get(name) and name not in _BUILTINS:
                for i in star:
                    need(i, f"may bind {name!r} (cell {n} reads it)")
        for name in info[n].reads_later:
            for i in binders.get(name, []):
                need(i, f"binds {name!r}, which a function of cell {n} reads")
        for name in info[n].reads | info[n].reads_later:
            limit = n if name in info[n].reads and name not in info[n].reads_later else 10**9
            for alias in related(name) if name in mutable else {name}:
                for i in code:
                    changes = info[i].mutates if alias in mutable else info[i].stores
                    if i < limit and i != n and alias in changes:
                        shown = "" if alias == name else f" (which may share {name!r})"
                        need(i, f"may change {alias!r}{shown} in place, which cell {n} reads")
    run = set(needed)
    skipped = [i for i in code if i not in run]
    return Plan(run, skipped, "", needed)
