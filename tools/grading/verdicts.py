"""Trusted verdicts: a student's records against the instructor's, compared in this process.

Each hidden test records (``helpers.grading.record``) one case of one exercise: the answer as
plain data, or the error it raised, and the torch functions it called. The instructor's solution
notebook, run in the same confined kernel, records the same cases. An exercise earns its points
only when every case the instructor recorded was recorded exactly once for the student and
matches (:func:`same`), and no forbidden function was called. Messages never show the expected
value: they say which hidden case differs and how (shape, type, largest difference).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.grading import ANOTHER_THREAD, THIRD_PARTY

from .spec import Spec, spec_for


def forbidden_calls(calls, spec: Spec) -> list[str]:
    """The recorded calls the exercise refuses: its ``forbid`` names and ``forbid_matching``
    patterns; everywhere, a third-party library that holds answers (``helpers.grading``'s
    THIRD_PARTY, e.g. Hugging Face's transformers); and, where the exercise forbids anything,
    code run in another thread (where the torch functions it calls cannot be seen)."""
    calls = set(calls)
    bad = calls & set(spec.forbid)
    bad |= {c for c in calls if any(re.search(p, c) for p in spec.forbid_matching)}
    bad |= {c for c in calls if c.split(".")[0] in THIRD_PARTY}
    if spec.forbid or spec.forbid_matching:
        bad |= calls & {ANOTHER_THREAD}
    return sorted(bad)


@dataclass(frozen=True)
class Verdict:
    exercise: str
    correct: bool
    message: str


def read_records(path: Path) -> tuple[dict[str, dict[int, list[dict]]], list[str]]:
    """{exercise: {case: [entries]}} from a log, and the lines that are not valid records."""
    records: dict[str, dict[int, list[dict]]] = {}
    bad: list[str] = []
    if not Path(path).exists():
        return records, bad
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
            exercise, case = entry["exercise"], entry["case"]
            if type(exercise) is not str or type(case) is not int:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            bad.append(line[:200])
            continue
        records.setdefault(exercise, {}).setdefault(case, []).append(entry)
    return records, bad


def _kind(x) -> str:
    if isinstance(x, dict) and len(x) == 1:
        return next(iter(x))
    return type(x).__name__


def same(got, want, spec: Spec, where: str = "the answer") -> str | None:
    """None when ``got`` matches ``want`` (plain data), else what differs (never ``want``)."""
    kind = _kind(want)
    if _kind(got) == "unsupported":
        return f"{where} is of a type the grader does not accept ({got['unsupported']})"
    if _kind(got) != kind:
        return f"{where} is a {_kind(got)}, not a {kind}"
    if kind == "tensor":
        g, w = got["tensor"], want["tensor"]
        if g["shape"] != w["shape"]:
            return f"{where} has shape {g['shape']}, expected another shape"
        if ("float" in w["dtype"]) != ("float" in g["dtype"]):
            return f"{where} has dtype {g['dtype']}"
        return _close(g["data"], w["data"], spec, where)
    if kind == "module":
        return _same_module(got["module"], want["module"], spec, where)
    if kind in ("list", "tuple"):
        if len(got) != len(want):
            return f"{where} has {len(got)} items, expected another number"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            problem = same(g, w, spec, f"item {i} of {where}")
            if problem:
                return problem
        return None
    if kind == "dict" or (isinstance(want, dict) and kind not in ("float", "unsupported")):
        if set(got) != set(want):
            return f"{where} has keys {sorted(got)}, expected other keys"
        for k in want:
            problem = same(got[k], want[k], spec, f"{where}[{k!r}]")
            if problem:
                return problem
        return None
    if kind == "float" or isinstance(want, float):
        return _close([got], [want], spec, where)
    if kind == "unsupported":
        return f"{where} is of a type the grader does not accept ({got['unsupported']})"
    return None if got == want and type(got) is type(want) else f"{where} is not right"


def _value(v) -> float:
    if isinstance(v, dict):  # {"float": "nan"}
        return float(v["float"])
    return float(v)


def _close(got: list, want: list, spec: Spec, where: str) -> str | None:
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if isinstance(g, dict | str) and not isinstance(g, dict):
            return f"{where} holds a non-number"
        try:
            g, w = _value(g), _value(w)
        except (TypeError, ValueError, KeyError):
            return f"{where} holds a non-number"
        if math.isnan(w):
            if not math.isnan(g):
                return f"{where} differs"
            continue
        if not math.isfinite(g):
            return f"{where} holds {g}"
        error = abs(g - w)
        if error > spec.atol + spec.rtol * abs(w):
            worst = max(worst, error)
    if worst:
        return f"{where} differs (largest difference {worst:.3g})"
    return None


def _partition(params: list[dict], key: str) -> list[list[str]]:
    groups: dict[int, list[str]] = {}
    for p in params:
        groups.setdefault(p[key], []).append(p["name"])
    return sorted(sorted(g) for g in groups.values())


def _same_module(got: dict, want: dict, spec: Spec, where: str) -> str | None:
    gp = {p["name"]: p for p in got["parameters"]}
    wp = {p["name"]: p for p in want["parameters"]}
    if set(gp) != set(wp):
        missing, extra = sorted(set(wp) - set(gp)), sorted(set(gp) - set(wp))
        return (
            f"{where} does not have the expected parameters"
            + (f" (missing {missing[:3]})" if missing else "")
            + (f" (unexpected {extra[:3]})" if extra else "")
        )
    for name, w in wp.items():
        if gp[name]["shape"] != w["shape"]:
            return f"{where}: {name} has shape {gp[name]['shape']}"
    if _partition(got["parameters"], "storage") != _partition(want["parameters"], "storage"):
        return f"{where}: its parameters share storage differently from a correct repair"
    if _partition(got["parameters"], "object") != _partition(want["parameters"], "object"):
        return (
            f"{where}: the same tensors are not the same Parameter objects as in a correct repair"
        )
    for name in spec.same_values:
        problem = _close(gp[name]["data"], wp[name]["data"], spec, f"{where}: {name}")
        if problem:
            return problem + " (a repair keeps the model it was given)"
    return None


def judge(
    exercise: str, reference: dict[int, list[dict]], student: dict[int, list[dict]]
) -> Verdict:
    """The verdict on one exercise from its reference and student records."""
    spec = spec_for(exercise)
    if not reference:
        return Verdict(exercise, False, "no hidden cases were recorded by the solution")
    for case in sorted(reference):
        entries = student.get(case, [])
        if not entries:
            return Verdict(exercise, False, f"hidden case {case + 1}: no answer was recorded")
        if len(entries) > 1:
            return Verdict(
                exercise, False, f"hidden case {case + 1} was recorded {len(entries)} times"
            )
        got, want = entries[0], reference[case][0]
        if "value" not in want:
            return Verdict(
                exercise,
                False,
                f"the solution itself failed on hidden case {case + 1}: fix the hidden test",
            )
        if "error" in got:
            return Verdict(
                exercise, False, f"hidden case {case + 1}: the answer raised {got['error']}"
            )
        forbidden = forbidden_calls(got.get("calls", []), spec)
        if forbidden:
            return Verdict(
                exercise,
                False,
                f"hidden case {case + 1}: calls {', '.join(forbidden)}, which the exercise forbids",
            )
        problem = same(got["value"], want["value"], spec)
        if problem:
            return Verdict(exercise, False, f"hidden case {case + 1}: {problem}")
    extra = sorted(set(student) - set(reference))
    if extra:
        return Verdict(
            exercise, False, f"more cases were recorded than the hidden tests make ({len(student)})"
        )
    return Verdict(exercise, True, f"all {len(reference)} hidden cases right")
