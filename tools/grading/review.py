"""The review list: student cells that reach for the grading machinery, for a person to read.

No check inside the student's kernel can stop code that runs in that kernel (it can replace the
check), so the grade never comes from there (:mod:`verdicts`); but some attempts are worth an
instructor's look anyway, and for some exercises (a repaired model) what the kernel records is all
there is. :func:`review` reads every code cell a student could write (solution cells and cells the
student added) and lists each use of:

* names the lesson's locked cells bind (``checks``, ``record``, an imported model class ...),
  rebound by the student;
* the kernel and the interpreter: ``get_ipython``, input transformers, event hooks, frames
  (``sys._getframe``, ``inspect.stack``, ``f_back``, ``f_locals``), ``builtins``;
* torch's override machinery: ``__torch_function__``, ``__torch_dispatch__``, ``TorchFunctionMode``;
* assigning attributes of ``torch``, ``math``, ``numpy``, ``helpers`` (patching a library);
* processes, files and databases: ``subprocess``, ``os.system``, ``os.fork``, ``multiprocessing``,
  ``threading``, ``sqlite3``, ``ctypes``, ``open``, ``exec``/``eval``/``compile``, ``importlib``;
* the course's own checks and grading: ``helpers.checks``, ``helpers.grading``.
* what an adversarial review used to hide a call or rewrite a record: other threads
  (``concurrent``, ``_thread``, ``asyncio``), code objects (``__code__``, ``FunctionType``),
  ``getprofile``, ``environ`` and the grader's log, ``write_text``, ``atexit``, ``transformers``,
  torch normalizations (``normalize``, ``local_response_norm``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import nbformat

SUSPICIOUS_NAMES = {
    "get_ipython": "the kernel (get_ipython)",
    "_getframe": "stack frames",
    "currentframe": "stack frames",
    "stack": None,  # only as inspect.stack
    "f_back": "stack frames",
    "f_locals": "stack frames",
    "f_globals": "stack frames",
    "input_transformers_post": "input transformers (rewriting cells)",
    "input_transformers_cleanup": "input transformers (rewriting cells)",
    "__torch_function__": "torch's override machinery",
    "__torch_dispatch__": "torch's override machinery",
    "TorchFunctionMode": "torch's override machinery",
    "TorchDispatchMode": "torch's override machinery",
    "_DisableTorchFunction": "torch's override machinery",
    "DisableTorchFunction": "torch's override machinery",
    "DisableTorchFunctionSubclass": "torch's override machinery",
    "_disabled_torch_function_impl": "torch's override machinery",
    "setprofile": "the interpreter's profiler (hides calls from the grader)",
    "settrace": "the interpreter's tracer",
    "monitoring": "the interpreter's monitoring",
    "__builtins__": "builtins",
    "builtins": "builtins",
    "subprocess": "processes",
    "system": None,  # only as os.system
    "fork": "processes",
    "popen": "processes",
    "multiprocessing": "processes",
    "threading": "threads",
    "sqlite3": "a database",
    "ctypes": "ctypes",
    "importlib": "importlib",
    "exec": "exec/eval",
    "eval": "exec/eval",
    "compile": "exec/eval",
    "open": "files",
    "register": None,  # only as .events.register
    # found by an adversarial review: each hid a forbidden call or rewrote the record
    "concurrent": "threads (concurrent.futures: calls there are not seen)",
    "_thread": "threads",
    "asyncio": "threads (asyncio)",
    "__code__": "code objects (a copy of a function's code)",
    "FunctionType": "code objects (a copy of a function's code)",
    "CodeType": "code objects",
    "co_filename": "code objects",
    "getprofile": "the interpreter's profiler",
    "gettrace": "the interpreter's tracer",
    "environ": "environment variables (the grader's log is named there)",
    "HELPERS_GRADING_LOG": "the grader's log",
    "write_text": "files",
    "write_bytes": "files",
    "atexit": "exit hooks",
    "transformers": "a library that holds answers (Hugging Face transformers)",
    "local_response_norm": "a torch normalization",
    "normalize": "a torch normalization",
}
PATCHED_MODULES = {"torch", "math", "np", "numpy", "helpers", "nn", "F", "checks", "record"}


@dataclass(frozen=True)
class Finding:
    cell: str  # the solution's grade_id, or "cell N" for a cell the student added
    line: int
    reason: str
    code: str


def protected_names(instructor_nb) -> set[str]:
    """Names the locked (non-solution) code cells of the instructor's notebook bind."""
    names: set[str] = set()
    for cell in instructor_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node in tree.body:
                names.add(node.name)
            elif isinstance(node, ast.Assign) and node in tree.body:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names - {"*"}


def _student_cells(nb, instructor):
    """Solution cells, and cells whose source is in no cell of the instructor's notebook (added
    or edited by the student; nbgrader restores locked cells itself)."""
    theirs = {cell.source.strip() for cell in instructor.cells}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            yield meta.get("grade_id", f"cell {index}"), cell.source
        elif not meta.get("locked") and cell.source.strip() not in theirs:
            yield f"cell {index}", cell.source


def _base(node) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _scan(source: str, protected: set[str]) -> list[tuple[int, str]]:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return [(error.lineno or 0, "does not parse (nbgrader will show the error)")]
    found: list[tuple[int, str]] = []

    def binds(target, line):
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if node.id in protected:
                    found.append(
                        (line, f"rebinds {node.id!r}, a name the lesson's locked cells use")
                    )
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                base = _base(node)
                if base in PATCHED_MODULES:
                    found.append((line, f"assigns an attribute of {base} (patching a library)"))

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                binds(target, line)
        elif isinstance(node, ast.For | ast.With | ast.comprehension):
            target = getattr(node, "target", None)
            if target is not None:
                binds(target, line)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            if node.name in protected:
                found.append(
                    (line, f"redefines {node.name!r}, a name the lesson's locked cells use")
                )
            if SUSPICIOUS_NAMES.get(node.name):
                found.append((line, f"defines {node.name}: {SUSPICIOUS_NAMES[node.name]}"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            module = getattr(node, "module", None) or ""
            for alias in node.names:
                full = f"{module}.{alias.name}" if module else alias.name
                if full.startswith(("helpers.checks", "helpers.grading")):
                    found.append((line, f"imports {full} (the course's checks or grading)"))
                top = full.split(".")[0]
                if SUSPICIOUS_NAMES.get(top) or SUSPICIOUS_NAMES.get(alias.name):
                    found.append(
                        (
                            line,
                            f"imports {full}: {SUSPICIOUS_NAMES.get(top) or SUSPICIOUS_NAMES.get(alias.name)}",
                        )
                    )
        elif isinstance(node, ast.Attribute | ast.Name):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            reason = SUSPICIOUS_NAMES.get(name)
            if name == "stack" and _base(node) == "inspect":
                reason = "stack frames"
            elif name == "system" and _base(node) == "os":
                reason = "processes"
            elif (
                name == "register"
                and isinstance(node, ast.Attribute)
                and "events" in ast.unparse(node)
            ):
                reason = "kernel event hooks"
            if reason:
                found.append((line, f"uses {name}: {reason}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("setattr", "delattr") and node.args:
                base = _base(node.args[0])
                if base in PATCHED_MODULES:
                    found.append((line, f"{node.func.id} on {base} (patching a library)"))
    return sorted(set(found))


def review(submission, instructor) -> list[Finding]:
    """Findings in a submitted notebook (path or NotebookNode), given the instructor's version."""
    if not isinstance(submission, nbformat.NotebookNode):
        submission = nbformat.read(str(submission), as_version=4)
    if not isinstance(instructor, nbformat.NotebookNode):
        instructor = nbformat.read(str(instructor), as_version=4)
    protected = protected_names(instructor)
    findings = []
    for cell, source in _student_cells(submission, instructor):
        lines = source.splitlines()
        for line, reason in _scan(source, protected):
            code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            findings.append(Finding(cell, line, reason, code[:120]))
    return findings
