# One analysis over 540 lines: its helpers walk one cell's syntax tree and fill one CellFacts.
"""What one code cell binds, reads and may touch, from its source alone (``ast``, ``symtable``):
the facts :mod:`plan` decides from which cells a graded run skips (its docstring says the rule).
Also read by :mod:`review` (a student's cells, magics turned into Python first)."""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from dataclasses import dataclass, field

from . import limits

#: Names that reach the namespace as a whole, or IPython's history of cells and outputs.
DYNAMIC = {"globals", "locals", "vars", "dir", "eval", "exec", "__import__", "get_ipython",
           "In", "Out", "_", "__", "___", "_i", "_ii", "_iii", "_ih", "_oh", "_dh", "exit",
           "quit", "__builtins__", "__dict__"}  # fmt: skip
_HISTORY = re.compile(r"^_i?\d+$")
#: A mention of one of these (a name, an attribute, however it is then called) makes a cell
#: always run: they change the interpreter's or a library's global state, or the file system.
EFFECTS = re.compile(
    r"^(set_default_dtype|set_default_tensor_type|set_default_device|set_grad_enabled|"
    r"_set_grad_enabled|use_deterministic_algorithms|set_num_threads|set_num_interop_threads|"
    r"set_flush_denormal|set_float32_matmul_precision|set_printoptions|set_anomaly_enabled|"
    r"set_detect_anomaly|setrecursionlimit|settrace|setprofile|setswitchinterval|seterr|"
    r"filterwarnings|simplefilter|resetwarnings|showwarning|environ|putenv|unsetenv|chdir|umask|"
    r"reload|import_module|setattr|delattr|vars|builtins|__builtins__|__enter__|__exit__|"
    r"getcontext|setcontext|rcParams|rcdefaults|rc_context|"
    r"open|save|savez|savez_compressed|savetxt|savefig|tofile|dump|to_csv|to_pickle|write_text|"
    r"write_bytes|mkdir|makedirs|unlink|rmdir|rmtree|touch|symlink_to|hardlink_to|copyfile|"
    r"copytree|chmod)$"
)
#: The same for a dotted name whose last part alone is too common to tell (``handle.remove()``).
DOTTED_EFFECTS = re.compile(
    r"(^|\.)(os\.(remove|rename|replace|system|link|symlink|truncate|removedirs)|"
    r"(plt|pyplot|matplotlib|mpl)\.(style|rc|use)|sys\.(modules|path|stdout|stderr|stdin)|"
    r"warnings\.\w+|shutil\.\w+)$"
)
_BUILTINS = set(dir(builtins)) | {"display", "__name__", "__file__", "get_ipython"}
_COMPREHENSIONS = {"listcomp", "setcomp", "dictcomp", "genexpr"}


@dataclass
class CellFacts:
    """What one code cell binds, reads and may touch (from its source alone)."""

    binds: set[str] = field(default_factory=set)
    binds_always: set[str] = field(default_factory=set)  # unconditional top-level bindings
    imports: set[str] = field(default_factory=set)  # bound by an import
    defs: set[str] = field(default_factory=set)  # bound by def or class
    classes: set[str] = field(default_factory=set)  # bound by class
    values: set[str] = field(default_factory=set)  # bound to numbers, strings, tuples of them
    reads: set[str] = field(default_factory=set)  # read when the cell runs
    reads_later: set[str] = field(default_factory=set)  # read by its functions when called
    now: set[str] = field(default_factory=set)  # global names its code run at once mentions
    later: set[str] = field(default_factory=set)  # ... that its functions' bodies mention
    called: set[str] = field(default_factory=set)  # mentioned at once only as ``f(...)``
    bare: set[str] = field(default_factory=set)  # ... only as a plain name (called, passed on)
    store_roots: set[str] = field(default_factory=set)  # ``u`` of ``u.a = ...``, ``u[0] = ...``
    plain_defs: set[str] = field(default_factory=set)  # defs and classes that keep no state
    aliases: dict[str, str] = field(default_factory=dict)  # ``m = math`` -> {"m": "math"}
    effect_aliases: set[str] = field(default_factory=set)  # ``sa = setattr``, ``import .. as``
    later_effects: list[str] = field(default_factory=list)  # effects inside its functions
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
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load | ast.Del) and n.id not in shadow:
            found.add(n.id)  # ``del x`` needs x bound: a read
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            if n.target.id not in shadow:
                found.add(n.target.id)  # ``x += 1`` reads x first
        for child in ast.iter_child_nodes(n):
            visit(child, shadow)

    visit(node)
    return found


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


def _resolver(parents: dict):
    """resolve(node, name) -> (the global name, or (scope, name) for a local; whether the code
    it is in runs only when a function is called)."""
    local_names: dict[int, set[str]] = {}

    def resolve(node, name):
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

    return resolve


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "?")
    return ".".join(reversed(parts))


def _mentions(tree, out: CellFacts) -> None:
    """Every global name the cell mentions, at once or in its functions; the names it mentions
    at once only as a bare call; the roots of what it assigns into; the effects it names."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    resolve = _resolver(parents)
    other_use: set[str] = set()
    not_bare: set[str] = set()
    for node in ast.walk(tree):
        effect = None
        if isinstance(node, ast.Attribute) and EFFECTS.match(node.attr):
            effect = f"may change global state or files (.{node.attr})"
        elif isinstance(node, ast.Attribute) and DOTTED_EFFECTS.search(_dotted(node)):
            effect = f"may change global state or files ({_dotted(node)})"
        elif isinstance(node, ast.Global | ast.Nonlocal):
            effect = "declares global names"
        if isinstance(node, ast.Attribute) and node.attr in ("__dict__", "__globals__"):
            out.dynamic = True
        if effect:
            out.effects.append(effect)
            if resolve(node, "")[1]:
                out.later_effects.append(effect)
        if not isinstance(node, ast.Name):
            continue
        key, later = resolve(node, node.id)
        if not isinstance(key, str):
            continue  # a function's own local
        if EFFECTS.match(key):
            out.effects.append(f"may change global state or files ({key})")
            if later:
                out.later_effects.append(out.effects[-1])
        (out.later if later else out.now).add(key)
        parent = parents.get(node)
        if not later:
            if isinstance(parent, ast.Call) and parent.func is node:
                out.called.add(key)
            else:
                other_use.add(key)
            if isinstance(node.ctx, ast.Load) and not (
                isinstance(parent, ast.Attribute | ast.Subscript) and parent.value is node
            ):
                out.bare.add(key)
            else:
                not_bare.add(key)
        # the root of an assignment into it: u.a = ..., u[0] = ..., del u.a, u.f().b = ...
        child = node
        while isinstance(parent, ast.Attribute | ast.Subscript | ast.Call) and (
            (parent.func if isinstance(parent, ast.Call) else parent.value) is child
        ):
            child, parent = parent, parents.get(parent)
        if child is not node and isinstance(getattr(child, "ctx", None), ast.Store | ast.Del):
            out.store_roots.add(key)
    out.called -= other_use
    out.bare -= not_bare


def _keeps_no_state(node) -> bool:
    """A def without decorators whose defaults are constants, or a class without decorators whose
    body holds only such defs, constants and a docstring, and no ``__class__``, ``type(...)`` or
    ``cls``: calling it, or passing it on, runs its code and changes nothing of its own."""
    if node.decorator_list:
        return False
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        return all(_immutable(d, set()) for d in defaults)
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if not _keeps_no_state(stmt):
                return False
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.Expr):
            if stmt.value is not None and not _immutable(stmt.value, set()):
                return False
        elif not isinstance(stmt, ast.Pass):
            return False
    for n in ast.walk(node):
        if (isinstance(n, ast.Attribute) and n.attr == "__class__") or (
            isinstance(n, ast.Name) and n.id in ("type", "cls")
        ):
            return False
    return True


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


def _reads_symtable_misses(tree, out: CellFacts) -> None:
    """Reads and bindings ``symtable`` does not report as such: ``del x`` (it needs x bound)
    and ``x += ...`` are reads of x, at once or, in a function, when it is called (a name the
    function declares ``global``, or does not bind, is the cell's global); a function that
    declares ``global x`` may bind x whenever it is called (``x = ...``, ``x += ...``, ``del x``,
    ``for x in``, ``with ... as x``, ``import ... as x``, a walrus): the cell may bind x."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    resolve = _resolver(parents)
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Del):
            targets = [node]
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            targets = [node.target]
        for name in targets:
            key, later = resolve(name, name.id)
            if isinstance(key, str):
                (out.reads_later if later else out.reads).add(key)
        if isinstance(node, ast.Global) and resolve(node, "")[1]:
            out.binds.update(node.names)  # inside a function: bound when it runs, if ever


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
                    if EFFECTS.match(alias.name.split(".")[-1]):
                        out.effect_aliases.add(name)  # from torch import set_default_dtype as f
                    if always:
                        out.binds_always.add(name)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.binds.add(node.name)
                out.defs.add(node.name)
                if isinstance(node, ast.ClassDef):
                    out.classes.add(node.name)
                if _keeps_no_state(node):
                    out.plain_defs.add(node.name)
                if always:
                    out.binds_always.add(node.name)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                if isinstance(node, ast.AnnAssign) and node.value is None:
                    continue  # ``x: int`` binds nothing
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    bind_target(target, always and not isinstance(node, ast.AugAssign))
                if isinstance(node.value, ast.Name | ast.Attribute):  # m = math, f = torch.f
                    last = node.value.attr if isinstance(node.value, ast.Attribute) else ""
                    for target in targets:
                        for name in _plain_names(target):
                            out.aliases[name.id] = _dotted(node.value).split(".")[0]
                            if EFFECTS.match(last) or (
                                isinstance(node.value, ast.Name) and EFFECTS.match(node.value.id)
                            ):
                                out.effect_aliases.add(name.id)
                if _immutable(node.value, out.imports | out.values):
                    for target in targets:
                        for name in _plain_names(target) if _is_plain_target(target) else []:
                            out.values.add(name.id)
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

    top_level(tree.body, True)
    for node in ast.walk(tree):
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            out.binds.add(node.target.id)  # (a walrus binds in the cell, wherever it is)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            out.effects.append("declares global names")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in DYNAMIC and not _magic_call(node):
                if func.id not in ("vars", "dir") or not (node.args or node.keywords):
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
    _reads_symtable_misses(tree, out)
    _mentions(tree, out)
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
    out.effects = list(dict.fromkeys(out.effects))
    return out


def _facts_or_worst(source: str) -> CellFacts:
    """A cell's facts, or, for a cell the analysis cannot read (nested too deep, too long), a
    cell that always runs and reads the namespace as a whole (nothing is skipped)."""
    try:
        return facts(source)
    except (RecursionError, MemoryError, ValueError, SyntaxError) as e:
        return CellFacts(effects=[f"could not be analysed ({type(e).__name__})"], dynamic=True)
