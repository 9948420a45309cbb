"""The review list: student cells that reach for the grading machinery, for a person to read.

The grade never depends on this list (the verdicts come from the sealed recorder's records,
judged outside the kernel, and what the recorder saw the notebook's code do is already a 0 for
the exercises it touched); the list is what an instructor reads to see *who tried*, and it has
to be short enough to read: no finding on the instructor's solutions or on an honest answer
written another way (tests/test_grading.py checks both).

:func:`review` reads every code cell a student could write (solution cells, and cells the student
added or changed), IPython's magics and shell escapes turned into Python first, and lists:

* **names the grading reads, rebound**: a top-level assignment, import, ``def`` or ``class`` (or
  a ``global`` declaration) of a name the check cells and hidden tests read (``checks``,
  ``record``, ``torch``, the classes the hidden tests build their inputs from ...);
* **a library or the course patched**: an attribute or item assigned on ``torch``, ``sys``,
  ``helpers``, an imported module or class (``torch.allclose = ...``,
  ``sys.modules["helpers.grading"].record = ...``), ``setattr``/``delattr`` on them;
* **the interpreter, the kernel and torch's machinery**: frames, code objects, closures,
  ``sys.modules``, the profiler and tracer, the garbage collector, ``ctypes``, ``get_ipython``
  and IPython's transformers, events and history, torch's function and dispatch modes and their
  switches, ``torch._C``, TorchScript and ``torch.compile``, audit hooks;
* **processes, threads, files and descriptors**: ``subprocess``, ``os.fork``, threads, signals,
  ``open``, ``io.FileIO``, ``os.write``/``dup``, symbolic and hard links, ``/proc``;
* **computed names and code**: ``getattr``/``setattr`` with a name that is not a literal (the name
  built from pieces, ``"set" + "profile"``), ``exec``/``eval``/``compile``, ``__import__``,
  ``importlib``, ``globals()``; and string literals naming any of the above;
* **code carried as data**: ``pickle`` (and ``dill``, ``cloudpickle``, ``shelve``, a class
  defining ``__reduce__``: unpickling calls whatever the data names), ``marshal`` (code objects
  from bytes), and any call that decodes (base64, ``codecs``, ``zlib``/``bz2``/``lzma``,
  ``binascii``, ``bytes.fromhex``, an unpickler) fed to ``exec``/``eval``/``compile``, a code
  object, an unpickler or an import;
* imports of ``helpers.checks``, ``helpers.grading`` or ``helpers._grading_kernel``.

What the list cannot promise: it reads the source, so code that builds its source at run time
(from a file, the network, an encoded string) shows only as the building (``exec``, ``compile``,
``open``, a computed name), and a finding is a reason to look, not proof of anything.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from helpers.course import Lesson

from . import limits
from .cellfacts import facts, python_source
from .course import COURSE_DIR, _students, assignment_id

#: Attribute or name -> why it is listed (any use).
REACHES = {
    # the interpreter
    "_getframe": "stack frames", "currentframe": "stack frames", "f_back": "stack frames",
    "f_locals": "stack frames", "f_globals": "stack frames", "f_code": "stack frames",
    "tb_frame": "stack frames", "gi_frame": "stack frames", "cr_frame": "stack frames",
    "_current_frames": "stack frames", "__code__": "code objects", "__globals__": "code objects",
    "__closure__": "closures", "cell_contents": "closures", "__defaults__": "code objects",
    "__kwdefaults__": "code objects", "FunctionType": "code objects", "CodeType": "code objects",
    "co_code": "code objects", "setprofile": "the interpreter's profiler (hides calls)",
    "getprofile": "the interpreter's profiler", "settrace": "the interpreter's tracer",
    "gettrace": "the interpreter's tracer", "addaudithook": "audit hooks", "modules": None,
    "get_objects": "the garbage collector", "get_referrers": "the garbage collector",
    "get_referents": "the garbage collector", "ctypes": "ctypes", "builtins": "builtins",
    "__builtins__": "builtins", "importlib": "importlib", "__import__": "importlib",
    "__subclasses__": "the class hierarchy", "__class__": None, "__dict__": None,
    # the kernel
    "get_ipython": "the kernel (get_ipython)", "input_transformers_post": "IPython's transformers",
    "input_transformers_cleanup": "IPython's transformers", "ast_transformers": "IPython's transformers",
    "input_transformer_manager": "IPython's transformers", "events": None, "user_ns": "the kernel's namespace",
    "history_manager": "IPython's history", "_ih": "IPython's history", "_oh": "IPython's history",
    "In": "IPython's history", "Out": "IPython's history",
    # torch's machinery
    "__torch_function__": "torch's override machinery", "__torch_dispatch__": "torch's override machinery",
    "TorchFunctionMode": "torch's override machinery", "TorchDispatchMode": "torch's override machinery",
    "DisableTorchFunction": "torch's override machinery (a switch)", "DisableTorchFunctionSubclass": "torch's override machinery (a switch)",
    "_DisableTorchDispatch": "torch's override machinery (a switch)", "_disabled_torch_function_impl": "torch's override machinery",
    "_C": None, "jit": "TorchScript (the grader cannot see which course functions it runs)",
    "_dynamo": "torch.compile", "compile": None, "ops": None,
    # processes, threads, files
    "subprocess": "processes", "multiprocessing": "processes", "fork": "processes",
    "forkpty": "processes", "popen": "processes", "system": None, "spawn": None,
    "posix_spawn": "processes", "threading": "threads", "_thread": "threads",
    "concurrent": "threads", "asyncio": "threads (asyncio)", "signal": "signals (a handler sees frames)",
    "atexit": "exit hooks", "FileIO": "file descriptors", "dup": "file descriptors",
    "dup2": "file descriptors", "fdopen": "file descriptors", "symlink": "symbolic links",
    "link": "hard links", "environ": "environment variables", "putenv": "environment variables",
    "sqlite3": "a database", "socket": "sockets", "write_text": "files", "write_bytes": "files",
    "transformers": "a library that holds answers (Hugging Face transformers)",
    # code carried as data: unpickling calls whatever the data names, marshal gives code objects
    "pickle": "unpickling (runs whatever the data names)", "_pickle": "unpickling (runs whatever the data names)",
    "cPickle": "unpickling (runs whatever the data names)", "dill": "unpickling (runs whatever the data names)",
    "cloudpickle": "unpickling (runs whatever the data names)", "shelve": "unpickling (runs whatever the data names)",
    "copyreg": "unpickling (runs whatever the data names)", "marshal": "code objects from bytes (marshal)",
    "__reduce__": "unpickling (runs whatever the data names)", "__reduce_ex__": "unpickling (runs whatever the data names)",
    "import_module": "importlib",
}  # fmt: skip
#: Calls that decode data (the last name of the called chain): fed to exec, eval, compile, a
#: code object or an unpickler, the code that runs is not in the cell.
DECODERS = {"b64decode", "b32decode", "b16decode", "a85decode", "b85decode", "urlsafe_b64decode",
            "standard_b64decode", "decodebytes", "decompress", "unhexlify", "a2b_base64", "a2b_hex",
            "fromhex", "decode", "loads", "load", "unquote", "unquote_to_bytes"}  # fmt: skip
#: Calls that run (or load) code given as a value.
RUNNERS = {"exec", "eval", "compile", "loads", "load", "FunctionType", "CodeType",
           "import_module", "__import__"}  # fmt: skip
#: Attribute chains listed only with a particular owner (``os.system``, ``sys.modules``, ...).
OWNED = {
    ("os", "system"): "processes", ("os", "spawn"): "processes", ("os", "write"): "file descriptors",
    ("os", "open"): "file descriptors", ("sys", "modules"): "the loaded modules (sys.modules)",
    ("torch", "_C"): "torch's internals (torch._C)", ("torch", "compile"): "torch.compile",
    ("torch", "ops"): "torch's operator registry", ("inspect", "stack"): "stack frames",
    ("inspect", "currentframe"): "stack frames", ("inspect", "getsource"): None,
    ("get_ipython", "events"): "kernel event hooks",
}  # fmt: skip
#: Builtins whose call is listed.
CALLS = {"exec": "exec/eval", "eval": "exec/eval", "compile": "exec/eval", "globals": "globals()",
         "locals": "locals()", "vars": None, "open": "files", "__import__": "importlib",
         "breakpoint": "the debugger", "input": None}  # fmt: skip
#: Words in a string literal that name the machinery.
WORDS = re.compile(
    r"setprofile|settrace|_getframe|f_back|f_locals|helpers\.grading|helpers\.checks|"
    r"_grading_kernel|/proc/|/dev/fd|__code__|__globals__|DisableTorch|_record|hidden_seed|"
    r"sys\.modules|HELPERS_GRADING|\.grading"
)
#: Modules whose attributes a student's cell must not assign.
LIBRARIES = {"torch", "nn", "F", "np", "numpy", "math", "helpers", "sys", "os", "builtins",
             "checks", "record", "inspect", "types", "functools", "IPython"}  # fmt: skip
GRADING_NAMES = {"checks", "record", "_record", "hidden_seed", "_seed"}
#: Magics that change nothing the grading reads.
HARMLESS_MAGICS = {"matplotlib", "time", "timeit", "pprint", "precision", "who", "whos", "lsmagic"}
SUSPICIOUS_IMPORTS = ("helpers.checks", "helpers.grading", "helpers._grading_kernel")


@dataclass(frozen=True)
class Finding:
    cell: str  # the solution's grade_id, or "cell N" for a cell the student added
    line: int
    reason: str
    code: str


def protected_names(instructor_nb) -> set[str]:
    """Names the check cells and their hidden tests read that the instructor's locked cells bind
    (``checks``, ``torch``, the classes the hidden tests build from ...), and the grading's own."""
    bound: set[str] = set()
    read: set[str] = set()
    for cell in instructor_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        if cell.cell_type != "code":
            continue
        f = facts(cell.source)
        if meta.get("grade"):
            read |= f.reads | f.reads_later
        elif not meta.get("solution"):
            bound |= f.binds
    return (read & bound) | GRADING_NAMES


def _student_cells(nb, instructor):
    """Solution cells, and cells whose source is in no cell of the instructor's notebook (added
    or edited by the student; nbgrader restores locked cells itself)."""
    theirs = {cell.source.strip() for cell in instructor.cells}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        if meta.get("solution"):
            yield meta.get("grade_id", f"cell {index}"), cell.source
        elif not meta.get("locked") and cell.source.strip() not in theirs:
            yield f"cell {index}", cell.source


def _chain(node) -> list[str]:
    """``a.b.c`` -> ["a", "b", "c"]; getattr(a, "b") counts as a.b; [] if not a plain chain."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            break
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _scan(source: str, protected: set[str]) -> list[tuple[int, str]]:
    try:
        limits.check_source(source)  # nothing parses a cell over the grader's caps
    except limits.OverLimit as e:
        return [(0, f"not read: {e}")]
    code, _ = python_source(source)
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        return [(error.lineno or 0, "does not parse (nbgrader will show the error)")]
    except (RecursionError, MemoryError, ValueError):
        return [(0, "could not be parsed: nested or long beyond what the reviewer reads")]
    found: list[tuple[int, str]] = []
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)

    def note(node, reason):
        found.append((getattr(node, "lineno", 0), reason))

    # IPython's magics, as its transformation writes them: get_ipython().run_line_magic("x", ...)
    magic_names: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "get_ipython"
            and node.func.attr in ("run_line_magic", "run_cell_magic", "system", "getoutput")
        ):
            magic_names.add(id(node.func.value.func))
            what = (
                node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else ""
            )
            if node.func.attr in ("system", "getoutput"):
                note(node, "runs a shell command (!): processes")
            elif what not in HARMLESS_MAGICS:
                note(node, f"uses the magic %{what}")

    # names the grading reads, rebound at the top level (or declared global)
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.For | ast.With):
            names = [
                n.id
                for t in (
                    [node.target]
                    if isinstance(node, ast.For)
                    else [i.optional_vars for i in node.items if i.optional_vars]
                )  # fmt: skip
                for n in ast.walk(t)
                if isinstance(n, ast.Name)
            ]
        else:
            names = []
        for name in names:
            if name in protected:
                note(node, f"rebinds {name!r}, which the check cells and hidden tests read")
    for node in ast.walk(tree):
        if isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                if name in protected:
                    note(node, f"declares {name!r} global (the check cells read it)")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            module = getattr(node, "module", None) or ""
            for alias in node.names:
                full = f"{module}.{alias.name}" if module else alias.name
                if full.startswith(SUSPICIOUS_IMPORTS) or (
                    module == "helpers" and alias.name in ("checks", "grading", "_grading_kernel")
                ):
                    note(node, f"imports {full} (the course's checks or grading)")
                for part in full.split("."):
                    if REACHES.get(part):
                        note(node, f"imports {full}: {REACHES[part]}")
                        break
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and REACHES.get(node.name):
            note(node, f"defines {node.name}: {REACHES[node.name]}")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Attribute | ast.Subscript) and isinstance(
                        sub.ctx, ast.Store | ast.Del
                    ):
                        chain = _chain(sub)
                        if chain and (chain[0] in LIBRARIES or chain[0] in imported):
                            note(node, f"assigns into {'.'.join(chain)} (patching a library)")
        elif isinstance(node, ast.Call):
            func = node.func
            runner = _chain(func)[-1:] or [""]
            if runner[0] in RUNNERS:
                inner = [
                    _chain(sub.func)[-1:]
                    for arg in [*node.args, *(k.value for k in node.keywords)]
                    for sub in ast.walk(arg)
                    if isinstance(sub, ast.Call)
                ]
                decoder = next((c[0] for c in inner if c and c[0] in DECODERS), None)
                if decoder:
                    note(node, f"runs code decoded at run time ({decoder} into {runner[0]})")
            if isinstance(func, ast.Name):
                if func.id in ("setattr", "delattr") and node.args:
                    chain = _chain(node.args[0])
                    if chain and (chain[0] in LIBRARIES or chain[0] in imported):
                        note(node, f"{func.id} on {'.'.join(chain)} (patching a library)")
                if func.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
                    name = node.args[1]
                    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                        note(node, f"{func.id} with a name built at run time")
                if CALLS.get(func.id):
                    note(node, f"calls {func.id}: {CALLS[func.id]}")
        if isinstance(node, ast.Attribute | ast.Name):
            chain = _chain(node)
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if isinstance(node, ast.Attribute) and len(chain) >= 2:
                owned = OWNED.get((chain[-2], name))
                if owned:
                    note(node, f"uses {'.'.join(chain[-2:])}: {owned}")
                    continue
            reason = REACHES.get(name)
            if id(node) in magic_names:
                continue
            if reason:
                note(node, f"uses {name}: {reason}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = WORDS.search(node.value)
            if match:
                note(node, f"a string naming {match.group(0)!r}")
    return sorted(set(found))


def review(submission, instructor) -> list[Finding]:
    """Findings in a submitted notebook (path or NotebookNode), given the instructor's version."""
    if not isinstance(submission, nbformat.NotebookNode):
        try:
            limits.check_file(Path(submission))
        except limits.OverLimit as e:
            return [Finding("the notebook", 0, f"not reviewed: {e}", "")]
        submission = nbformat.read(str(submission), as_version=4)
    if not isinstance(instructor, nbformat.NotebookNode):
        instructor = nbformat.read(str(instructor), as_version=4)
    protected = protected_names(instructor)
    findings = []
    limit = sys.getrecursionlimit()
    for cell, source in _student_cells(submission, instructor):
        lines = source.splitlines()
        try:
            scanned = _scan(source, protected)
        except RecursionError:
            scanned = [(0, "could not be read: nested beyond what the reviewer reads")]
        finally:
            sys.setrecursionlimit(limit)
        for line, reason in scanned:
            code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            findings.append(Finding(cell, line, reason, code[:120]))
    return findings


def review_submissions(
    lesson: Lesson, course_dir: Path = COURSE_DIR, students=None
) -> dict[str, list]:
    """The review list of every submission of ``lesson`` (tools/grading/review.py); a submission
    the review cannot read gets one finding saying so (the others are still reviewed)."""
    course_dir = Path(course_dir).resolve()
    source = course_dir / "source" / assignment_id(lesson) / lesson.notebook
    found = {}
    for sid in students if students is not None else _students(course_dir, lesson):
        submitted = course_dir / "submitted" / sid / assignment_id(lesson) / lesson.notebook
        if not submitted.is_file() or submitted.is_symlink():
            continue
        try:
            found[sid] = review(submitted, source)
        except Exception as e:  # noqa: BLE001 - one unreadable submission stops nothing
            found[sid] = [Finding("notebook", 0, f"could not be reviewed ({type(e).__name__})", "")]
    return found
