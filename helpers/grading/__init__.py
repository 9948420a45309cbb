"""Coursework: what a hidden test records of an answer, as plain data, for a grader outside.

A graded exercise's hidden test (between nbgrader's ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``, so never in the student's release) calls the student's answer on cases
the student never saw and records what came back::

    g = torch.Generator().manual_seed(hidden_seed("l5_ex1"))
    record("l5_ex1", layer_norm, torch.randn(3, 4, generator=g, dtype=torch.float64), ...)

Nothing here knows a right answer, and nothing here decides a grade. The grader
(``tools/coursework.py autograde``, or ``nbgrader autograde`` with the course's configuration)
runs the notebook in a confined kernel started by :mod:`helpers._grading_kernel`, which *seals*
this module before any notebook code runs (:func:`_seal`): from then on ``record`` and
``hidden_seed`` are entry points into a recorder that lives where the notebook's code cannot
reach it without an operation Python audits, and that writes each case, signed, to a channel
only the grader reads:

* **what came back**, converted to plain data: ``None``, ``bool``, ``int``, ``float``, ``str``
  (exact types), ``list``/``tuple``/``dict`` of those, an exact ``torch.Tensor`` (its dtype, shape
  and values) and an ``nn.Module`` (its class name, each parameter's name, shape, values and which
  parameters share storage or are one object), a numpy array or scalar as the tensor
  ``torch.from_numpy`` gives (:data:`NUMPY_DTYPES`); anything else is recorded as unsupported;
* **what ran**: the torch functions (a ``TorchFunctionMode``) and ATen operators (a
  ``TorchDispatchMode``, which also sees TorchScript) the answer's own code called, the course's
  functions it reached (``sys.setprofile``; at any depth: a course function called by another
  course function on the answer's behalf counts too, so a forbidden one cannot be reached
  through a helper that calls it), calls into libraries that hold
  answers (:data:`THIRD_PARTY`), and markers for what cannot be seen into: another thread
  (:data:`ANOTHER_THREAD`: a thread started while the answer runs, or any Python thread the
  notebook started alive when a case begins or ends), ``torch.compile`` (:data:`COMPILED`), TorchScript
  (:data:`TORCHSCRIPT`);
* **the inputs**, as a digest (:func:`fingerprint`) taken before the answer runs: a hidden case
  whose inputs differ from the instructor's run (a class or function the hidden test uses was
  replaced) scores 0; and, when the answer is the hidden test's own wrapper, which may read its
  inputs again after the student's code it calls changed them in place, their digest after the
  call (``inputs_after``: the grader refuses the case unless the instructor's run changed them
  the same way);
* **tampering**: an audit hook (``sys.addaudithook``: it cannot be removed) reports the notebook's
  code reaching for frames, code objects, the profiler, the garbage collector, ``ctypes``, the
  channel itself or a child process, and the observers are re-checked whenever the answer's code
  calls anything (switched off by any spelling, their classes patched).

``record`` only accepts calls from the hidden tests themselves (their code, compiled from the
instructor's source the grader sends), and ``hidden_seed`` gives the hidden tests' random inputs
a seed the grader derives from the instructor's secret (:func:`derive_seed`), so the graded
inputs are not in the public notebooks. docs/INSTRUCTORS.md says what this guarantees and what it
cannot.

Outside grading (a student or instructor running the notebook) ``record`` only runs the answer,
and ``hidden_seed`` returns the public default, so the instructor's notebook runs top to bottom.
With ``HELPERS_GRADING_LOG`` set (the tests of the lessons), ``record`` appends each case as an
unsigned JSON line to that file, observed the same way.

The package, split by the recorder's own sections: :mod:`~helpers.grading.markers` (what a case
may hold beyond plain values), :mod:`~helpers.grading.dependencies` (everything the machinery
calls, taken once), :mod:`~helpers.grading.provenance` (where a piece of code comes from),
:mod:`~helpers.grading.observers` (what the answer called) and :mod:`~helpers.grading.plaindata`
(its result as plain data, its inputs' digest): the machinery, joined by
:mod:`~helpers.grading.machinery`; :mod:`~helpers.grading.sentinel` (the sealed recorder). This
module holds the recorder's API that the lessons call, and the seal.
"""

from __future__ import annotations

import hmac
import os
import sys
from collections.abc import Callable

from .dependencies import _dependencies, _kernel_files
from .machinery import _machinery
from .markers import (
    ANOTHER_THREAD,
    COMPILED,
    NUMPY_DTYPES,
    PUBLIC_SECRET,
    THIRD_PARTY,
    TORCHSCRIPT,
)
from .sentinel import _sentinel

__all__ = [
    "record",
    "hidden_seed",
    "hidden_cases",
    "derive_seed",
    "plain",
    "fingerprint",
    "observe",
    "CallNames",
    "THIRD_PARTY",
    "ANOTHER_THREAD",
    "COMPILED",
    "TORCHSCRIPT",
    "PUBLIC_SECRET",
    "NUMPY_DTYPES",
]

_cases: dict[str, int] = {}  # case numbers per exercise (outside the sealed recorder)


def derive_seed(secret: bytes, exercise: str) -> int:
    """The seed of ``exercise``'s hidden cases under ``secret``: the first four bytes of
    HMAC-SHA256(secret, "hidden-cases/" + exercise), an int in [0, 2**32). The grader derives
    the seeds of a lesson from the instructor's secret and gives the grading kernel only those."""
    if not isinstance(secret, bytes) or not secret:
        raise TypeError(f"secret must be non-empty bytes, got {type(secret).__name__}")
    if not isinstance(exercise, str) or not exercise:
        raise TypeError(f"exercise must be a non-empty str (a grade_id), got {exercise!r}")
    digest = hmac.digest(secret, b"hidden-cases/" + exercise.encode(), "sha256")
    return int.from_bytes(digest[:4], "big")


def hidden_seed(exercise: str, default: int) -> int:
    """Lesson exercises (hidden tests): the seed of the hidden cases of ``exercise`` (its
    solution cell's grade_id). ``default`` (the seed written in the notebook) is the public
    default: what it returns outside grading, and under a grader that has no instructor's secret
    (continuous integration); with a secret, a seed derived from it (:func:`derive_seed`), which
    only the hidden tests may ask for::

        g = torch.Generator().manual_seed(hidden_seed("l5_ex1", 2051))
    """
    _check_name(exercise)
    if type(default) is not int:
        raise TypeError(f"hidden_seed: default must be an int, got {type(default).__name__}")
    return default


def hidden_cases(exercise: str, default, draw: Callable):
    """Lesson exercises (hidden tests): the cases of ``exercise`` written in the notebook
    (``default``, the public default), or, under a grader with the instructor's secret,
    ``draw(rng)`` with ``rng`` a ``random.Random`` seeded from it (one per exercise: later calls
    continue its stream)::

        cases = hidden_cases("l6_ex1", [(384, 1536), (5, 13)],
                             lambda rng: [(rng.randrange(2, 1025), rng.randrange(2, 4097))
                                          for _ in range(2)])
    """
    _check_name(exercise)
    if not callable(draw):
        raise TypeError(f"hidden_cases: draw must be a function of a random.Random, got {draw!r}")
    return default


def _check_name(exercise) -> None:
    if not isinstance(exercise, str) or not exercise:
        raise TypeError(f"exercise must be a non-empty str (a grade_id), got {exercise!r}")


_PLAIN = _machinery(_dependencies())  # unsealed: the lessons' tests, the visible checks, dev logs


def plain(x):
    """``x`` as JSON-able plain data (see the module docstring); exact types only."""
    return _PLAIN["plain"](x)


def fingerprint(*args, **kwargs) -> str:
    """A digest of a hidden case's inputs (tensors' values, modules' classes, code and
    parameters, functions' code and the values they close over): the same inputs give the same
    digest in any process; a replaced class or function gives another."""
    return _PLAIN["fingerprint"](args, kwargs)


def observe(answer: Callable, *args, **kwargs):
    """Run ``answer(*args, **kwargs)`` as the grader's recorder does: returns ``(result, error,
    calls, problems)``: the exception it raised (or None), the names of what its own code called
    (torch functions, ATen operators, the course's functions, markers) in order of first use, and
    what it did to the observers. The visible checks use it, so what a check refuses is what the
    grade refuses."""
    return _PLAIN["observe"](answer, args, kwargs)


class CallNames:
    """A context manager: the names of what the code run inside it called (``names``, a set, and
    ``order``, first use first), observed as the grader's recorder observes an answer."""

    def __init__(self):
        self.names: set[str] = set()
        self.order: list[str] = []
        self.problems: list[str] = []

    def __enter__(self):
        _PLAIN["begin"]()
        return self

    def __exit__(self, *exc):
        order, problems = _PLAIN["end"]()
        self.order = [n for n in order if n not in self.names] if self.order else order
        self.names = set(order)
        self.problems = problems
        return False


_CourseCalls = CallNames  # the name lesson 9's and lesson 4's checks use


def record(exercise: str, answer: Callable, *args, **kwargs) -> None:
    """Lesson exercises (hidden tests). Call ``answer(*args, **kwargs)`` and, under the grader,
    record its result as plain data for case number k of ``exercise``. Returns None (a number
    shown as a cell's result would be read by nbgrader as partial credit)."""
    case = _cases.get(exercise, 0)
    _cases[exercise] = case + 1
    log = os.environ.get("HELPERS_GRADING_LOG")
    if not log:
        try:
            answer(*args, **kwargs)
        except Exception:  # noqa: BLE001 - outside grading a failing answer changes nothing
            pass
        return None
    caller = sys._getframe(1).f_code.co_filename
    code = getattr(answer, "__code__", None) if type(answer) is type(record) else None
    wrapper = code is not None and code.co_filename == caller  # defined beside the record call
    entry = _case_entry(_PLAIN, str(exercise), case, answer, args, kwargs, wrapper)
    with open(log, "a", encoding="utf-8") as f:
        f.write(_PLAIN["to_json"](entry) + "\n")
    return None


def _case_entry(machinery, exercise, case, answer, args, kwargs, wrapper=False) -> dict:
    """One case as plain data, what ``record`` writes to a developer's log: the machinery's
    ``case_entry``, which the sealed recorder builds its cases with too (an answer that raised
    something other than an Exception, a KeyboardInterrupt say, raises it again here).
    ``wrapper``: the answer is the hidden test's own function (defined in the cell that
    records), which may read its inputs again after the student's code it calls has run."""
    entry, error = machinery["case_entry"](exercise, case, answer, args, kwargs, wrapper)
    if error is not None and not isinstance(error, Exception):
        raise error
    return entry


def _seal(config: dict, fd: int) -> Callable[[], None]:
    """Seal this module (the grading kernel calls this before any notebook code): ``record`` and
    ``hidden_seed`` become the entry points of the sealed recorder (:func:`_sentinel`), which
    signs every case and flag with ``config["key"]`` and writes it to the file descriptor
    ``fd``. ``config``: ``key`` (hex), ``public`` (no instructor's secret: the notebook's own
    defaults), ``seeds`` ({exercise: int}), ``hidden`` (the sources of the hidden tests, as the
    grader sends them). Returns the recorder's ``kernel_ready``, which the grading kernel calls
    once, just before its first request runs: the Python threads alive then are the kernel's own
    (see :func:`_sentinel`)."""
    global record, hidden_seed, hidden_cases
    d = _dependencies()
    d["kernel_files"] = _kernel_files()
    m = _machinery(d)
    gen = _sentinel(d, m, config, fd)
    next(gen)
    record, hidden_seed, hidden_cases, ready = gen.send(gen.send)
    return ready
