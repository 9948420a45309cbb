"""Trusted verdicts: a student's records against the instructor's, compared in this process.

Each hidden test records (``helpers.grading.record``) one case of one exercise: a digest of its
inputs, the answer as plain data (or the error it raised), what the answer's own code called, and
what it did to the observers; the sealed recorder signs each line, and flags what the notebook's
code did to reach the grading machinery (:mod:`channel` accepts only signed, consecutive lines).
The instructor's notebook, run the same way, records the same cases (:mod:`reference`).

An exercise earns its points only when every case the instructor recorded was recorded exactly
once for the student, from the same inputs, with nothing flagged before or while it ran, no
forbidden call, and a matching value (:func:`same`). Anything malformed is a wrong answer with a
reason, never an exception. Messages never show the expected value or a hidden input: they say
which hidden case differs and how (shape, type, largest difference).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.grading import ANOTHER_THREAD, COMPILED, THIRD_PARTY, TORCHSCRIPT

from .spec import Spec, spec_for

#: Markers of code the grader cannot see into: refused wherever an exercise forbids anything.
UNSEEN = (ANOTHER_THREAD, COMPILED, TORCHSCRIPT)


def forbidden_calls(calls, spec: Spec) -> list[str]:
    """The recorded calls the exercise refuses: its ``forbid`` names and ``forbid_matching``
    patterns; everywhere, a third-party library that holds answers (``helpers.grading``'s
    THIRD_PARTY, e.g. Hugging Face's transformers); and, where the exercise forbids anything,
    code the grader cannot see into (another thread, torch.compile, TorchScript)."""
    calls = {c for c in calls if isinstance(c, str)}
    bad = calls & set(spec.forbid)
    bad |= {c for c in calls if any(re.search(p, c) for p in spec.forbid_matching)}
    bad |= {c for c in calls if c.split(".")[0] in THIRD_PARTY}
    if spec.forbid or spec.forbid_matching:
        bad |= calls & set(UNSEEN)
    return sorted(bad)


@dataclass(frozen=True)
class Verdict:
    exercise: str
    correct: bool
    message: str


def read_records(path: Path) -> tuple[dict[str, dict[int, list[dict]]], list[str]]:
    """{exercise: {case: [entries]}} from an unsigned developer log (``HELPERS_GRADING_LOG``,
    the lessons' tests), and the lines that are not valid records."""
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


def by_case(entries: list[dict]) -> dict[str, dict[int, list[dict]]]:
    """{exercise: {case: [entries]}} from a channel's case entries (in order)."""
    out: dict[str, dict[int, list[dict]]] = {}
    for entry in entries:
        exercise, case = entry.get("exercise"), entry.get("case")
        if type(exercise) is str and type(case) is int:
            out.setdefault(exercise, {}).setdefault(case, []).append(entry)
    return out


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
        if not isinstance(g, dict) or not isinstance(g.get("data"), list):
            return f"{where} is malformed"
        if g.get("shape") != w["shape"]:
            return f"{where} has shape {g.get('shape')}, expected another shape"
        if ("float" in w["dtype"]) != ("float" in str(g.get("dtype"))):
            return f"{where} has dtype {g.get('dtype')}"
        if len(g["data"]) != len(w["data"]):
            return f"{where} is malformed"
        return _close(g["data"], w["data"], spec, where)
    if kind == "module":
        return _same_module(got["module"], want["module"], spec, where)
    if kind in ("list", "tuple"):
        if len(got) != len(want):
            return f"{where} has {len(got)} items, expected another number"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            problem = same(g, w, spec, f"item {i + 1} of {len(want)} of {where}")
            if problem:
                return problem
        return None
    if kind == "dict" or (isinstance(want, dict) and kind not in ("float", "unsupported")):
        if not isinstance(got, dict) or set(got) != set(want):
            shown = sorted(got) if isinstance(got, dict) else got
            return f"{where} has keys {shown}, expected other keys"
        for k in want:  # a hidden test that records a dict names each part of the answer
            problem = same(got[k], want[k], spec, k if where == "the answer" else f"{where}[{k!r}]")
            if problem:
                return problem
        return None
    if kind == "float" or isinstance(want, float):
        return _close([got], [want], spec, where)
    return None if got == want and type(got) is type(want) else f"{where} is not right"


def expected(problem: str, spec: Spec) -> str:
    """``problem`` (from :func:`same`) with what was expected, in words: the exercise's own
    description of the part that differs (``Spec.expected``, by the name the hidden test gives
    it), else the instructor's solution on the same hidden inputs. Never a value."""
    for part, text in spec.expected:
        if problem.startswith(part):
            return f"{problem}; expected {text}"
    return f"{problem}; compared with the instructor's solution on the same hidden inputs"


def _value(v) -> float:
    if isinstance(v, dict):  # {"float": "nan"}
        return float(v["float"])
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(type(v).__name__)
    return float(v)


def _close(got: list, want: list, spec: Spec, where: str) -> str | None:
    worst = 0.0
    for g, w in zip(got, want, strict=True):
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
    groups: dict = {}
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
    exercise: str,
    reference: dict[int, list[dict]],
    student: dict[int, list[dict]],
    flags: list[dict] = (),
    broken_at: int | None = None,
) -> Verdict:
    """The verdict on one exercise from its reference and student records (and the run's flags:
    anything flagged before or while its cases ran voids them); never raises."""
    try:
        return _judge(exercise, reference, student, flags, broken_at)
    except Exception as e:  # noqa: BLE001 - a malformed record is a wrong answer, with a reason
        return Verdict(
            exercise, False, f"the grader could not read the answer ({type(e).__name__})"
        )


def _judge(exercise, reference, student, flags, broken_at) -> Verdict:
    spec = spec_for(exercise)
    if not reference:
        return Verdict(exercise, False, "no hidden cases were recorded by the solution")
    last = -1
    for case in sorted(reference):
        entries = student.get(case, [])
        if not entries:
            if broken_at is not None:
                return Verdict(
                    exercise,
                    False,
                    f"hidden case {case + 1}: no answer was recorded: the grader's record channel "
                    "held lines its recorder did not write (the notebook's code wrote to it)",
                )
            return Verdict(exercise, False, f"hidden case {case + 1}: no answer was recorded")
        if len(entries) > 1:
            return Verdict(
                exercise, False, f"hidden case {case + 1} was recorded {len(entries)} times"
            )
        got, want = entries[0], reference[case][0]
        last = max(last, got.get("seq", -1) if isinstance(got.get("seq"), int) else -1)
        if "value" not in want:
            return Verdict(
                exercise,
                False,
                f"the solution itself failed on hidden case {case + 1}: fix the hidden test",
            )
        if got.get("inputs") != want.get("inputs"):
            return Verdict(
                exercise,
                False,
                f"hidden case {case + 1}: its inputs are not the ones the hidden test builds "
                "(something in the notebook replaced a function, class or default the hidden "
                "test uses)",
            )
        if got.get("inputs_after") != want.get("inputs_after"):
            return Verdict(
                exercise,
                False,
                f"hidden case {case + 1}: the answer changed the inputs it was given (in place), "
                "which the hidden test reads again after calling it: work on a copy",
            )
        problems = got.get("problems") or []
        if problems:
            return Verdict(exercise, False, f"hidden case {case + 1}: {problems[0]}")
        if "error" in got:
            return Verdict(
                exercise, False, f"hidden case {case + 1}: the answer raised {got['error']}"
            )
        calls = got.get("calls", [])
        forbidden = forbidden_calls(calls if isinstance(calls, list) else [], spec)
        if forbidden:
            return Verdict(
                exercise,
                False,
                f"hidden case {case + 1}: calls {', '.join(forbidden)}, which the exercise forbids",
            )
        if "value" not in got:
            return Verdict(exercise, False, f"hidden case {case + 1}: no answer was recorded")
        problem = same(got["value"], want["value"], spec)
        if problem:
            return Verdict(exercise, False, f"hidden case {case + 1}: {expected(problem, spec)}")
    extra = sorted(set(student) - set(reference))
    if extra:
        return Verdict(
            exercise, False, f"more cases were recorded than the hidden tests make ({len(student)})"
        )
    for flag in flags:
        seq = flag.get("seq")
        if isinstance(seq, int) and seq < last:
            return Verdict(
                exercise,
                False,
                f"before its hidden cases were recorded, {flag.get('reason', 'something')}",
            )
    return Verdict(exercise, True, f"all {len(reference)} hidden cases right")


def judge_all(exercise_ids, reference: dict, records) -> dict[str, Verdict]:
    """Every exercise's verdict from a run's :class:`channel.Records`."""
    student = by_case(records.cases)
    # the message becomes a comment nbgrader's feedback renders as markdown: a name the student
    # chose (a class, an exception) is quoted in it, so no "<" may open raw HTML there
    return {
        x: Verdict(v.exercise, v.correct, v.message.replace("<", "&lt;"))
        for x in exercise_ids
        for v in [
            judge(x, reference.get(x, {}), student.get(x, {}), records.flags, records.broken_at)
        ]
    }
