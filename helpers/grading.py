"""Coursework: what a hidden test records of an answer, as plain data, for a grader outside.

A graded exercise's hidden test (between nbgrader's ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``, so never in the student's release) calls the student's answer on cases
the student never saw and records what came back::

    record("l5_ex1", layer_norm, torch.tensor([[3.0, -1.0, 0.5, 2.0]]))

Nothing here knows a right answer, and nothing here decides a grade. Under the grader
(``tools/coursework.py autograde``, which sets ``HELPERS_GRADING_LOG`` inside its confined kernel)
each call appends one JSON line: the exercise, the case number, the answer converted to plain
data, and the names of the torch functions the answer called. The grader compares those lines,
in its own process, with the lines the instructor's solution recorded for the same cases. So
whatever a student's code does inside the kernel (rebind names, patch torch, subclass tensors,
rewrite cells), all it can change is the data recorded about its own answer.

Outside grading (a student or instructor running the notebook) ``record`` only runs the answer, so
that the instructor's notebook still executes top to bottom.

Plain data: ``None``, ``bool``, ``int``, ``float``, ``str`` (exact types), ``list``/``tuple``/``dict``
of those, an exact ``torch.Tensor`` (no subclass; its dtype, shape and values), and an
``nn.Module`` (its class name, and each parameter's name, shape, values and which parameters share
storage). Anything else is recorded as unsupported, which the grader scores as wrong.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from collections.abc import Callable

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

__all__ = ["record", "plain", "CallNames", "THIRD_PARTY", "ANOTHER_THREAD"]

_cases: dict[str, int] = {}


def _number(x: float):
    return x if math.isfinite(x) else {"float": repr(x)}


def _tensor(t: torch.Tensor) -> dict:
    data = t.detach().cpu()
    if data.is_floating_point() or data.is_complex():
        values = [_number(v) for v in data.to(torch.float64).flatten().tolist()]
    else:
        values = data.flatten().tolist()
    return {"tensor": {"dtype": str(t.dtype), "shape": list(t.shape), "data": values}}


def _module(m: nn.Module) -> dict:
    storages: dict[int, int] = {}
    params = []
    for name, p in m.named_parameters(remove_duplicate=False):
        key = p.untyped_storage().data_ptr()
        group = storages.setdefault(key, len(storages))
        params.append(
            {
                "name": name,
                "shape": list(p.shape),
                "storage": group,
                "object": id(p),
                "data": _tensor(p.data)["tensor"]["data"],
            }
        )
    objects: dict[int, int] = {}
    for entry in params:  # object identity as small group numbers, not addresses
        entry["object"] = objects.setdefault(entry["object"], len(objects))
    return {"module": {"class": type(m).__name__, "parameters": params}}


def plain(x, _depth: int = 0):
    """``x`` as JSON-able plain data (see the module docstring); exact types only."""
    if _depth > 6:
        return {"unsupported": "nesting deeper than 6"}
    kind = type(x)
    if x is None or kind in (bool, int, str):
        return x
    if kind is float:
        return _number(x)
    if kind is torch.Tensor:
        return _tensor(x)
    if kind in (list, tuple):
        return [plain(v, _depth + 1) for v in x]
    if kind is dict and all(type(k) is str for k in x):
        return {k: plain(v, _depth + 1) for k, v in x.items()}
    if isinstance(x, nn.Module):
        return _module(x)
    return {"unsupported": kind.__name__}


class CallNames(TorchFunctionMode):
    """The names of the torch functions called while active: ``names`` (a set) and ``order``
    (first use first). The grader's record and the visible checks of exercises that forbid a
    function both use it, so what a check refuses is what the grade refuses."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()
        self.order: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name not in self.names:
            self.names.add(name)
            self.order.append(name)
        return func(*args, **(kwargs or {}))


_HELPERS = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: What an answer's call of these libraries is recorded as: a module prefix. No exercise needs
#: them, and some hold the answer outright (Hugging Face's rotary, ALiBi, RMSNorm, top-p), so
#: the grader refuses them everywhere (tools/grading/verdicts.py).
THIRD_PARTY = ("transformers",)
#: Recorded when the answer runs Python code in another thread: there the torch functions it
#: calls cannot be seen, so the grader refuses it wherever an exercise forbids a function.
ANOTHER_THREAD = "<another thread>"


_CODES_CACHE: dict = {}  # {the loaded course modules' names: their code map}


def _course_codes() -> dict:
    """Every code object of the course's modules (functions, methods, nested code), by code:
    code objects compare by their contents (bytecode, constants, names), not by file name, so a
    copy of a helper's code under another file or module name is still recognised as it.
    Built once for each set of loaded course modules (every record and every refusing check
    asks for it), again when another course module has been imported."""
    loaded = tuple(sorted(m for m in sys.modules if m.startswith("helpers.")))
    if loaded not in _CODES_CACHE:
        _CODES_CACHE.clear()
        _CODES_CACHE[loaded] = _walk_course_codes()
    return _CODES_CACHE[loaded]


def _walk_course_codes() -> dict:
    codes: dict = {}

    def add(code, name):
        if code not in codes:
            codes[code] = name
            for const in code.co_consts:
                if hasattr(const, "co_code"):
                    add(const, f"{name}.{const.co_name}")

    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("helpers.") or module_name == __name__ or module is None:
            continue
        for value in list(vars(module).values()):
            members = [value] + (list(vars(value).values()) if isinstance(value, type) else [])
            for member in members:
                member = getattr(member, "fget", None) or getattr(member, "__func__", member)
                member = getattr(member, "__wrapped__", member)  # a contextmanager's function
                code = getattr(member, "__code__", None)
                if code is not None and code.co_filename.startswith(_HELPERS):
                    home = getattr(member, "__module__", None)  # where it is defined
                    home = home if isinstance(home, str) else module_name
                    if home != __name__:  # not this module's own code, re-exported elsewhere
                        add(code, f"{home}.{code.co_qualname}")
    return codes


def _own_codes() -> set:
    """The code objects of this module's functions and methods (by identity of content)."""
    own = set()
    for value in list(globals().values()):
        members = [value] + (list(vars(value).values()) if isinstance(value, type) else [])
        for member in members:
            code = getattr(member, "__code__", None)
            if code is not None and getattr(member, "__module__", None) == __name__:
                own.add(code)
    return own


class _CourseCalls:
    """The course's own functions the answer calls (``helpers.positional.wavelengths``, ...), seen
    with ``sys.setprofile`` (and ``threading.setprofile``: a thread the answer starts is marked
    :data:`ANOTHER_THREAD`): an exercise whose answer a lesson helper computes outright forbids
    calling it (tools/grading/spec.py). A helper is recognised by its file, and by its code
    object wherever that code runs; calls into :data:`THIRD_PARTY` libraries by their module."""

    def __init__(self):
        self.names: set[str] = set()
        self._previous = None
        self._codes = _course_codes()
        self._own = _OWN_CODES

    def _profile(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code in self._own:
            return  # this module's own code (the profiler's __exit__, record)
        name = self._codes.get(code)
        if name is not None:
            self.names.add(name)
        elif code.co_filename.startswith(_HELPERS):
            module = frame.f_globals.get("__name__", "")
            self.names.add(f"{module}.{code.co_qualname}")
        else:
            module = frame.f_globals.get("__name__", "")
            if isinstance(module, str) and module.startswith(THIRD_PARTY):
                self.names.add(f"{module.split('.')[0]}.{code.co_qualname}")

    def _thread_profile(self, frame, event, arg):
        self.names.add(ANOTHER_THREAD)
        self._profile(frame, event, arg)

    def __enter__(self):
        self._previous = sys.getprofile()
        self._previous_threads = threading.getprofile()
        threading.setprofile(self._thread_profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)
        threading.setprofile(self._previous_threads)


def record(exercise: str, answer: Callable, *args, **kwargs) -> None:
    """Lesson exercises (hidden tests). Call ``answer(*args, **kwargs)`` and, under the grader,
    record its result as plain data for case number k of ``exercise``. Returns None (a number
    shown as a cell's result would be read by nbgrader as partial credit)."""
    case = _cases.get(exercise, 0)
    _cases[exercise] = case + 1
    calls = CallNames()
    course = _CourseCalls()
    try:
        with calls, course:
            result = answer(*args, **kwargs)
        entry = {"value": plain(result)}
    except Exception as error:  # the answer failed on this case: that is what gets recorded
        entry = {"error": type(error).__name__}
    calls.names.update(course.names)
    log = os.environ.get("HELPERS_GRADING_LOG")
    if log:
        entry.update(exercise=str(exercise), case=case, calls=sorted(calls.names))
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


_OWN_CODES = _own_codes()  # this module's own code, fixed once it is loaded
