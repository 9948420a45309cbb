"""The recorder's machinery reads no global at run time (helpers.grading's package).

The observers, the converters and the sealed recorder are closures built from one dict of
dependencies taken before any notebook code runs (helpers/grading/dependencies.py), so that code
in the grading kernel that rebinds a module attribute or a builtin cannot change what they do.
Checked here of every module of the package, a module added later included: every function they
build, at any depth, loads no global name (a class body, run once when the machinery is built, may
name ``__name__`` or ``classmethod``); and, run, the unsealed machinery gives the same records with
every builtin it uses rebound in its modules' globals to a function that raises.
"""

from __future__ import annotations

import dis
import importlib
import inspect
import pkgutil
import types

import torch
from torch import nn

import helpers.grading as grading
from helpers.feedforward import relu
from helpers.grading import dependencies

#: Modules of the package whose code runs before the machinery is built or outside it: the
#: recorder's API and the seal (``__init__``, which reads ``_cases`` at run time on purpose: the
#: lessons' tests reset it), the constants, and the dependencies, taken when it is built.
NOT_MACHINERY = {"markers", "dependencies"}
#: The machinery's modules as the package is split today (a module added later is checked too)
MACHINERY = {"machinery", "provenance", "observers", "plaindata", "sentinel"}
GLOBAL_OPS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME"}


def _machinery_modules():
    names = {m.name for m in pkgutil.iter_modules(grading.__path__)}
    assert MACHINERY <= names, f"the machinery's modules moved: {sorted(names)}"
    return [importlib.import_module(f"helpers.grading.{n}") for n in sorted(names - NOT_MACHINERY)]


def _built_code(module):
    """(qualified name, code) of every code object the module's factories build, at any depth."""

    def walk(code, path):
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield f"{path}.{const.co_name}", const
                yield from walk(const, f"{path}.{const.co_name}")

    for name, fn in vars(module).items():
        if inspect.isfunction(fn) and fn.__module__ == module.__name__:
            yield from walk(fn.__code__, f"{module.__name__}.{name}")


def test_no_function_the_machinery_builds_looks_up_a_global_name():
    checked, reads = 0, []
    for module in _machinery_modules():
        for path, code in _built_code(module):
            if not code.co_flags & inspect.CO_OPTIMIZED:
                continue  # a class body: it runs once, when the machinery is built
            checked += 1
            names = [i.argval for i in dis.get_instructions(code) if i.opname in GLOBAL_OPS]
            if names:
                reads.append(f"{path} reads {sorted(set(names))}")
    assert checked > 70, f"only {checked} functions found in the machinery's modules"
    assert not reads, "functions of the machinery look up globals at run time:\n" + "\n".join(reads)


def _records():
    """What the unsealed machinery records of a few answers: the calls observed, plain data,
    fingerprints (of tensors, a module, a function with closure and defaults, a class)."""
    torch.manual_seed(0)
    layer = nn.Linear(3, 2)
    scale = torch.tensor(2.0)

    def answer(x, k=3):
        return relu(x) * scale + k

    machinery = grading._PLAIN
    result, error, calls, problems = machinery["observe"](answer, (torch.arange(-2.0, 2.0),), {})
    return {
        "observe": (machinery["plain"](result), error, calls, problems),
        "plain": machinery["plain"]([1, 2.5, float("nan"), "s", {"m": layer}, None, (True,)]),
        "fingerprint": machinery["fingerprint"]((torch.eye(2), layer, answer, nn.Linear), {"k": 1}),
        "json": machinery["to_json"]({"b": [1, 2.0], "a": "x"}),
    }


def test_the_machinery_records_the_same_with_its_modules_builtins_rebound(monkeypatch):
    before = _records()

    def rebound(*args, **kwargs):
        raise AssertionError("the machinery looked up a global name at run time")

    for module in _machinery_modules():
        for name in dependencies._BUILTINS:
            monkeypatch.setitem(vars(module), name, rebound)
    assert _records() == before
    assert "helpers.feedforward.relu" in before["observe"][2]
