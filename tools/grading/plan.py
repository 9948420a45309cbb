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
  (``helpers.x = ...``); what a cell's functions change counts for every cell that may call them
  (that reads their name, or a name bound from it), and for the cell itself; a function's local
  variable is not the global of that name, though what it shares is (``m = model; m.zero_()``);
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
    mutates_later: set[str] = field(default_factory=set)  # ... when its functions are called
    stores_later: set[str] = field(default_factory=set)
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


def _loads(node, shadowing: bool = True) -> set[str]:
    """Names read by a statement when it runs (not inside the functions or lambdas it defines);
    with ``shadowing``, not a loop's or a with's target read in its body."""
    found: set[str] = set()

    def visit(n, shadow=frozenset()):
        if shadowing and isinstance(n, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            # the loop's or with's own target is bound before its body runs: a body's read of it
            # is no read from outside (its ``else`` may run with the target unbound)
            heads = (
                [n.iter, n.target]
                if isinstance(n, ast.For | ast.AsyncFor)
                else [
                    part
                    for item in n.items
                    for part in (item.context_expr, item.optional_vars)
                    if part
                ]
            )
            targets = (
                [n.target]
                if isinstance(n, ast.For | ast.AsyncFor)
                else [item.optional_vars for item in n.items if item.optional_vars is not None]
            )
            inner = shadow | {x.id for t in targets for x in _plain_names(t)}
            for part in heads:
                visit(part, shadow)
            for stmt in n.body:
                visit(stmt, inner)
            for stmt in getattr(n, "orelse", []):
                visit(stmt, shadow)
            return
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
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in shadow:
            found.add(n.id)
        for child in ast.iter_child_nodes(n):
            visit(child, shadow)

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


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSION_NODES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _local_names(scope) -> set[str]:
    """The names certainly local to a function, lambda or comprehension: its parameters and what
    its own body binds (not its nested functions' or classes' bodies), less any it declares
    ``global`` or ``nonlocal``. A name left out is taken for a global: the safe side."""
    if isinstance(scope, _COMPREHENSION_NODES):
        return {
            n.id for g in scope.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
        }
    args = scope.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    declared: set[str] = set()

    def visit(n):
        if isinstance(n, ast.Global | ast.Nonlocal):
            declared.update(n.names)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)  # its body is another scope
            return
        elif isinstance(
            n, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp
        ):
            return  # another scope (a walrus in a comprehension is left out: taken for a global)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            names.add(n.id)
        elif isinstance(n, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in n.names if a.name != "*")
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        for child in ast.iter_child_nodes(n):
            visit(child)

    for stmt in scope.body if isinstance(scope.body, list) else [scope.body]:
        visit(stmt)
    return names - declared


def _uses(tree, out: CellFacts) -> None:
    """Which names the cell may change in place (a method called on it, passed to a call that is
    not known to be pure, iterated, an attribute or item assigned), and which bound names may
    share an object with which read names (``v = u``, ``v = u.weight``, ``v = f(u)``; not
    ``v = u + 1``). Inside a function: what happens when it is called (``mutates_later``), and a
    name local to it is not the global of that name, though what it shares is (``m = model;
    m.zero_()`` changes ``model``)."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    local_names: dict[int, set[str]] = {}

    def resolve(node, name):
        """(key, later): the global name or (scope, name) a Name node means, and whether the code
        it is in runs only when a function is called."""
        key, later, came, up = None, False, node, parents.get(node)
        while up is not None:
            outside = (  # a default, a decorator, an annotation, a comprehension's first iterable
                (isinstance(up, _FUNCTIONS) and came is not up.body
                 and not (isinstance(up.body, list) and any(came is b for b in up.body)))
                or (isinstance(up, _COMPREHENSION_NODES) and came is up.generators[0]
                    and _inside(node, up.generators[0].iter))
            )  # fmt: skip
            if isinstance(up, _FUNCTIONS + _COMPREHENSION_NODES) and not outside:
                if isinstance(up, _FUNCTIONS):
                    later = True
                if key is None:
                    if id(up) not in local_names:
                        local_names[id(up)] = _local_names(up)
                    if name in local_names[id(up)]:
                        key = (id(up), name)
            came, up = up, parents.get(up)
        return (key or name), later

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

    changed_keys: dict[object, bool] = {}  # key -> changed when the cell runs (else later only)
    stored_keys: dict[object, bool] = {}
    edges: dict[object, set] = {}  # bound key -> keys it may share an object with
    plain: dict[object, set] = {}  # the same, for a name bound whole (``v = u``, not ``v.a = u``)

    def note(table, key, later):
        table[key] = table.get(key, False) or not later

    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        name, child, parent = node.id, node, parents.get(node)
        key, later = resolve(node, name)
        shared = changed = stored = False
        # climb through attribute and item reads: u.a[0].b
        while isinstance(parent, ast.Attribute | ast.Subscript) and parent.value is child:
            child, parent = parent, parents.get(parent)
            shared = True
        if child is not node and isinstance(child.ctx, ast.Store | ast.Del):
            changed = stored = True  # u.a = ..., u[0] = ..., del u.a, u.a += ...
        elif isinstance(parent, ast.Call) and parent.func is child:
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
                func = call.func if isinstance(call, ast.Call) else None
                if isinstance(func, ast.Name) and func.id in ("setattr", "delattr"):
                    stored = True
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
            note(changed_keys, key, later)
        if stored:
            note(stored_keys, key, later)
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
                    whole = {id(n) for n in _plain_names(target)}
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            bound = resolve(n, n.id)[0]
                            edges.setdefault(bound, set()).add(key)
                            if id(n) in whole:
                                plain.setdefault(bound, set()).add(key)

    def globals_of(key, through=edges) -> set[str]:
        """The global names an object reached from ``key`` may be shared with (itself if global)."""
        seen, todo, found = {key}, [key], set()
        while todo:
            k = todo.pop()
            if isinstance(k, str):
                found.add(k)
                continue
            for source in through.get(k, ()):
                if source not in seen:
                    seen.add(source)
                    todo.append(source)
        return found

    for table, now_set, later_set, through in (
        (changed_keys, out.mutates, out.mutates_later, edges),
        (stored_keys, out.stores, out.stores_later, plain),  # ``self.a = 1`` changes self only
    ):
        for key, now in table.items():  # a local: the globals it may share are changed
            (now_set if now else later_set).update(globals_of(key, through))
    for bound, sources in edges.items():
        if isinstance(bound, str):
            for source in sources:
                out.aliases.setdefault(bound, set()).update(globals_of(source))


def _plain_names(target) -> list:
    """The Name nodes a target binds whole (``v``, ``a, *b``), not those it assigns into."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in _plain_names(e)]
    if isinstance(target, ast.Starred):
        return _plain_names(target.value)
    return []


def _inside(node, ancestor) -> bool:
    return any(n is node for n in ast.walk(ancestor))


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
            # Python 3.11's symtable takes any table named "top" for the module's own, so the
            # locals of a function called ``top`` read as globals: a local is never a global
            # unless the function declares it so
            is_global = symbol.is_declared_global() or (
                symbol.is_global() and not symbol.is_local()
            )
            if nested and not (is_global or symbol.is_free()):
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
    external, bound, everything = set(), set(), set()
    for stmt in tree.body:
        external |= _loads(stmt) - bound
        everything |= _loads(stmt, shadowing=False)
        before = set(out.binds_always)
        out.binds_always.clear()
        top_level([stmt], True)
        bound |= out.binds_always
        out.binds_always |= before
    out.reads = {
        n for n in out.reads if n in external or (n not in everything and n not in out.binds_always)
    }
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

    # What calling a name may change: the functions of every cell that binds it (a cell's
    # functions together: which one a name is, is not followed), what those read when they run,
    # and what it was bound from (``cb = poke``), to a fixpoint
    later: dict[str, tuple[set[str], set[str]]] = {n: (set(), set()) for n in binders}
    grew = True
    while grew:
        grew = False
        for name, (mut, sto) in later.items():
            size = len(mut) + len(sto)
            for j in binders[name]:
                mut |= info[j].mutates_later
                sto |= info[j].stores_later
                for other in info[j].reads_later | info[j].aliases.get(name, set()):
                    if other in later and other != name:
                        mut |= later[other][0]
                        sto |= later[other][1]
            grew |= len(mut) + len(sto) > size
    # what a cell may change when it runs: its own code, its own functions (it may call them),
    # and whatever it calls or hands on may do
    changes_of: dict[int, tuple[set[str], set[str]]] = {}
    for i in code:
        mut = info[i].mutates | info[i].mutates_later
        sto = info[i].stores | info[i].stores_later
        for name in info[i].reads | info[i].reads_later:
            if name in later:
                mut = mut | later[name][0]
                sto = sto | later[name][1]
        changes_of[i] = (mut, sto)

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
                    changes = changes_of[i][0] if alias in mutable else changes_of[i][1]
                    if i < limit and i != n and alias in changes:
                        shown = "" if alias == name else f" (which may share {name!r})"
                        need(i, f"may change {alias!r}{shown} in place, which cell {n} reads")
    run = set(needed)
    skipped = [i for i in code if i not in run]
    return Plan(run, skipped, "", needed)
