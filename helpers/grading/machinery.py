"""Coursework (lessons 4-10): the machinery, the observers and the converters bound to one set of
dependencies.

Built by :func:`_machinery` from a dict of dependencies (:func:`helpers.grading.dependencies.
_dependencies`): the unsealed recorder (:mod:`helpers.grading`, for the lessons' tests, the
visible checks and developers' logs) builds one when it is imported; the sealed recorder builds
its own before any notebook code runs. Neither part reads a module's globals or builtins at run
time (tests/test_grading_machinery.py checks it of every module of the machinery).
"""

from __future__ import annotations

from .observers import _observers
from .plaindata import _plain_data
from .provenance import _provenance


def _machinery(d: dict) -> dict:
    """Where code comes from (:func:`helpers.grading.provenance._provenance`), the observers
    (:func:`helpers.grading.observers._observers`) and the converters
    (:func:`helpers.grading.plaindata._plain_data`), bound to the dependencies ``d``, the
    functions of all three counted as the grader's own code. Returns a dict of functions."""
    where = _provenance(d)
    observers = _observers(d, where)
    converters = _plain_data(d)
    observe, plain = observers["observe"], converters["plain"]
    fingerprint, inputs_after = converters["fingerprint"], converters["inputs_after"]
    _type, _Exception, _BaseException = d["type"], d["Exception"], d["BaseException"]
    ANOTHER = d["markers"][0]

    def case_entry(exercise, case, answer, args, kwargs, wrapper, other_threads=None):
        """One case of a hidden test, as plain data, and the error the answer raised (None):
        the inputs' fingerprint, the answer observed, the inputs again when ``wrapper`` (the
        hidden test's own function, which may read them after the student's code it calls has
        run), and the value or the error. The one builder of both recorders: the developer's log
        (:func:`helpers.grading.record`) and the sealed recorder, which passes
        ``other_threads`` (a thread of the notebook alive before or after the answer ran marks
        the case ANOTHER_THREAD). Inputs or a value that cannot be read are recorded as such."""
        entry = {"kind": "case", "exercise": exercise, "case": case}
        entry["inputs"] = fingerprint(args, kwargs)
        before = other_threads is not None and other_threads()
        result, error, calls, problems = observe(answer, args, kwargs)
        if other_threads is not None and (before or other_threads()) and ANOTHER not in calls:
            calls.append(ANOTHER)
        entry["calls"] = calls
        try:
            after = inputs_after(answer, args, kwargs, entry["inputs"], wrapper)
        except _Exception as e:
            after = "unreadable: " + _type(e).__name__
        if after is not None:
            entry["inputs_after"] = after
        if problems:
            entry["problems"] = problems
        if error is not None:
            entry["error"] = _type(error).__name__
        else:
            try:
                entry["value"] = plain(result)
            except _BaseException as e:
                entry["error"] = "converting the answer raised " + _type(e).__name__
        return entry, error

    where["add_codes"](
        *where.pop("own"), *observers.pop("own"), *converters.pop("own"), case_entry.__code__
    )
    return {
        "case_entry": case_entry,
        "observe": observers["observe"],
        "begin": observers["begin"],
        "end": observers["end"],
        "plain": converters["plain"],
        "fingerprint": converters["fingerprint"],
        "inputs_after": converters["inputs_after"],
        "to_json": converters["to_json"],
        "add_codes": where["add_codes"],
        "kind_of": where["kind_of"],
        "attributed_to_user": where["attributed_to_user"],
        "note": observers["note"],
        "exposed": observers["exposed"],
        "active": observers["active"],
    }
