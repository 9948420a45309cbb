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
"""

from __future__ import annotations

import builtins
import dis
import hashlib
import hmac
import os
import random
import sys
import threading
from collections.abc import Callable

import numpy
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

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

#: What an answer's call of these libraries is recorded as: a module prefix. No exercise needs
#: them, and some hold the answer outright (Hugging Face's rotary, ALiBi, RMSNorm, top-p), so
#: the grader refuses them everywhere (tools/grading/verdicts.py).
THIRD_PARTY = ("transformers",)
#: Recorded when the answer runs Python code in another thread: there the torch functions it
#: calls cannot be seen, so the grader refuses it wherever an exercise forbids a function.
ANOTHER_THREAD = "<another thread>"
#: Recorded when the answer runs code compiled by ``torch.compile`` (its kernels are not
#: operators the grader can see): refused wherever an exercise forbids a function.
COMPILED = "<torch.compile>"
#: Recorded when TorchScript runs in the answer, or was compiled in the notebook: its operators
#: are seen, but not the course functions it was made from: refused where anything is forbidden.
TORCHSCRIPT = "<TorchScript>"
#: The key of the hidden cases when the instructor has set no secret (continuous integration,
#: the committed notebooks): public, so their inputs are public too.
PUBLIC_SECRET = b"transformer-block-course: public hidden cases"
#: The numpy dtypes an answer may return (exact ``numpy.ndarray``, or a numpy scalar of one of
#: them): those ``torch.from_numpy`` takes, which is how the visible checks read a numpy answer
#: (helpers.checks._core.as_tensor). Recorded as the tensor ``torch.from_numpy`` would give (its
#: torch dtype, shape and values), so graded exactly as that tensor: a numpy scalar as a 0-d
#: tensor, complex values as complex tensors' (unsupported). Any other dtype (object, strings,
#: dates, long double) and subclasses of ndarray (np.matrix, masked arrays) are unsupported.
NUMPY_DTYPES = {
    "bool": "torch.bool",
    "int8": "torch.int8",
    "int16": "torch.int16",
    "int32": "torch.int32",
    "int64": "torch.int64",
    "uint8": "torch.uint8",
    "uint16": "torch.uint16",
    "uint32": "torch.uint32",
    "uint64": "torch.uint64",
    "float16": "torch.float16",
    "float32": "torch.float32",
    "float64": "torch.float64",
    "complex64": "torch.complex64",
    "complex128": "torch.complex128",
}

_HELPERS = os.path.dirname(os.path.abspath(__file__)) + os.sep
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


# ---------------------------------------------------------------------------------------------
# The machinery: observers, plain data, fingerprints. Built by a factory that reads nothing from
# this module's globals or from builtins at run time (everything it uses is bound when it is
# built), so that code in the kernel that rebinds a module attribute cannot change it. The
# sealed recorder builds its own copy before any notebook code runs.
# ---------------------------------------------------------------------------------------------


_BUILTINS = (
    "type isinstance issubclass len range list tuple dict set frozenset str int float bool bytes "
    "repr sorted enumerate zip min max abs getattr hasattr id vars callable iter next object all "
    "any compile Exception BaseException ValueError TypeError RuntimeError KeyError StopIteration"
).split()


def _dependencies() -> dict:
    """What the machinery calls, taken now (before any notebook code, when sealing)."""
    import _ast
    import _json
    import _thread

    C = torch._C
    T = C.TensorBase
    deps = {name: getattr(builtins, name) for name in _BUILTINS}
    deps.update(
        getframe=sys._getframe,
        setprofile=sys.setprofile,
        getprofile=sys.getprofile,
        gettrace=sys.gettrace,
        addaudithook=sys.addaudithook,
        threading_setprofile=threading.setprofile,
        get_ident=_thread.get_ident,
        current_frames=sys._current_frames,
        thread_count=_thread._count,
        thread_starters=(_thread.start_new_thread, getattr(_thread, "start_joinable_thread", None)),
        allocate_lock=_thread.allocate_lock,
        main_ident=threading.main_thread().ident,
        os_write=os.write,
        getpid=os.getpid,
        hmac_digest=hmac.digest,
        sha256=hashlib.sha256,
        encoder=_json.make_encoder(
            None, None, _json.encode_basestring_ascii, None, ":", ",", True, False, False
        ),
        float_repr=float.__repr__,
        ast_Module=_ast.Module,
        ast_Interactive=_ast.Interactive,
        only_ast=_ast.PyCF_ONLY_AST,
        top_level_await=_ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        Tensor=torch.Tensor,
        Module=nn.Module,
        Generator=torch.Generator,
        named_parameters=nn.Module.named_parameters,
        named_buffers=nn.Module.named_buffers,
        named_modules=nn.Module.named_modules,
        t_detach=T.detach,
        t_cpu=T.cpu,
        t_to=T.to,
        t_flatten=T.flatten,
        t_contiguous=T.contiguous,
        t_tolist=T.tolist,
        t_is_floating=T.is_floating_point,
        t_is_complex=T.is_complex,
        t_untyped_storage=T.untyped_storage,
        t_shape=T.__dict__["shape"].__get__,
        t_dtype=T.__dict__["dtype"].__get__,
        t_requires_grad=T.__dict__["requires_grad"].__get__,
        storage_ptr=torch.UntypedStorage.data_ptr,
        gen_state=torch.Generator.get_state,
        float64=torch.float64,
        bfloat16=torch.bfloat16,
        DisableTF=C.DisableTorchFunction,
        push_tf=C._push_on_torch_function_stack,
        pop_tf=C._pop_torch_function_stack,
        len_tf=C._len_torch_function_stack,
        tf_at=C._get_function_stack_at,
        push_dm=C._push_on_torch_dispatch_stack,
        pop_dm=C._pop_torch_dispatch_stack,
        len_dm=C._len_torch_dispatch_stack,
        dm_at=C._get_dispatch_stack_at,
        tf_all_disabled=C._is_torch_function_all_disabled,
        tf_mode_enabled=C._is_torch_function_mode_enabled,
        key_excluded=C._dispatch_tls_is_dispatch_key_excluded,
        python_key=C.DispatchKey.Python,
        snapshot_key=C.DispatchKey.PythonTLSSnapshot,
        ScriptTypes=(C.ScriptFunction, C.ScriptMethod),
        TorchFunctionMode=TorchFunctionMode,
        TorchDispatchMode=TorchDispatchMode,
        helpers_dir=_HELPERS,
        torch_dir=os.path.dirname(torch.__file__) + os.sep,
        stdlib_dir=os.path.dirname(os.__file__) + os.sep,
        this_module=__name__,
        third_party=THIRD_PARTY,
        numpy_dtypes=dict(NUMPY_DTYPES),
        markers=(ANOTHER_THREAD, COMPILED, TORCHSCRIPT),
        modules=sys.modules,
        public_secret=PUBLIC_SECRET,
        Random=random.Random,
        get_instructions=dis.get_instructions,
        np_ndarray=numpy.ndarray,
        np_scalars=frozenset(numpy.dtype(name).type for name in NUMPY_DTYPES),
        np_asarray=numpy.asarray,
        np_astype=numpy.ndarray.astype,
        np_ravel=numpy.ndarray.ravel,
        np_tolist=numpy.ndarray.tolist,
        np_dtype=numpy.ndarray.__dict__["dtype"].__get__,
        np_float64=numpy.float64,
    )
    return deps


def _machinery(d: dict) -> dict:  # noqa: C901 - one closure on purpose (see above)
    """The observers and converters, bound to the dependencies ``d`` (:func:`_dependencies`).

    Returns a dict of functions. Objects that torch or the interpreter keep, which the notebook
    could reach (the two modes and the profile functions), take what they need as default
    arguments, which cannot be read or replaced without an audited operation; the rest are
    closures, reachable only through their frames. Nothing here looks up a global name.
    """
    _type, _isinstance, _len, _range = d["type"], d["isinstance"], d["len"], d["range"]
    _list, _tuple, _dict, _set, _str = d["list"], d["tuple"], d["dict"], d["set"], d["str"]
    _int, _float, _bool, _bytes, _repr = d["int"], d["float"], d["bool"], d["bytes"], d["repr"]
    _sorted, _getattr, _vars, _id = d["sorted"], d["getattr"], d["vars"], d["id"]
    _all, _any, _callable, _object = d["all"], d["any"], d["callable"], d["object"]
    _BaseException, _TypeError, _ValueError = d["BaseException"], d["TypeError"], d["ValueError"]
    _getframe, _setprofile, _getprofile = d["getframe"], d["setprofile"], d["getprofile"]
    _thread_setprofile, _gettrace = d["threading_setprofile"], d["gettrace"]
    Tensor, Module, Generator = d["Tensor"], d["Module"], d["Generator"]
    _detach, _cpu, _to, _flatten = d["t_detach"], d["t_cpu"], d["t_to"], d["t_flatten"]
    _contiguous, _tolist, _storage = d["t_contiguous"], d["t_tolist"], d["t_untyped_storage"]
    _is_floating, _is_complex = d["t_is_floating"], d["t_is_complex"]
    _shape, _dtype, _requires_grad = d["t_shape"], d["t_dtype"], d["t_requires_grad"]
    _ptr, _gen_state = d["storage_ptr"], d["gen_state"]
    _named_parameters, _named_buffers = d["named_parameters"], d["named_buffers"]
    _named_modules = d["named_modules"]
    _float64, _bfloat16, _DisableTF = d["float64"], d["bfloat16"], d["DisableTF"]
    _push_tf, _pop_tf, _len_tf, _tf_at = d["push_tf"], d["pop_tf"], d["len_tf"], d["tf_at"]
    _push_dm, _pop_dm, _len_dm, _dm_at = d["push_dm"], d["pop_dm"], d["len_dm"], d["dm_at"]
    _all_disabled, _tf_mode_enabled = d["tf_all_disabled"], d["tf_mode_enabled"]
    _excluded, _python_key, _snapshot_key = d["key_excluded"], d["python_key"], d["snapshot_key"]
    _ScriptTypes, _sha256 = d["ScriptTypes"], d["sha256"]
    _encoder, _float_repr = d["encoder"], d["float_repr"]
    HELPERS, TORCH, STDLIB = d["helpers_dir"], d["torch_dir"], d["stdlib_dir"]
    THIS, THIRD = d["this_module"], d["third_party"]
    ANOTHER, COMPILED_, SCRIPT = d["markers"]
    _modules = d["modules"]
    NDARRAY, NP_SCALARS, _asarray = d["np_ndarray"], d["np_scalars"], d["np_asarray"]
    _np_astype, _np_ravel, _np_tolist = d["np_astype"], d["np_ravel"], d["np_tolist"]
    _np_dtype, _np_float64 = d["np_dtype"], d["np_float64"]
    NUMPY_TORCH = _dict(d["numpy_dtypes"])
    STARTERS = _tuple(f for f in d["thread_starters"] if f is not None)
    _thread_count = d["thread_count"]
    DYNAMO = TORCH + "_dynamo/"
    JIT_GLUE = (TORCH + "jit/", TORCH + "compiler/")  # TorchScript's way in, when it runs
    TORCH_GLUE = (DYNAMO, *JIT_GLUE)  # where compiled or scripted code is entered
    DISPATCH_GLUE = (TORCH + "_library/", TORCH + "_ops.py")
    DISABLER = TORCH + "_compile.py"  # torch._disable_dynamo's wrapper around torch's own functions
    # dynamo's and TorchScript's code that runs nothing compiled: once anything in the process
    # has used torch.compile, dynamo patches nn.Module.__init__/__setstate__ (and __setattr__ of
    # compiled modules' classes) to tag modules (mutation_guard.py; the tag's weak reference
    # calls back when the module is freed), so every module an answer builds passes through it;
    # and torch's own code asks is_compiling() or calls no-op markers. By (file, qualname); the
    # markers and queries count as glue only where torch's own Python code calls them by name
    # (TorchScript's C code calls is_exporting on its way in: from the frame that called the
    # scripted function, which does not name it)
    GLUE_FILES = (DYNAMO + "mutation_guard.py",)
    DISABLE_CONTEXT = (DYNAMO + "eval_frame.py", "DisableContext.__call__.<locals>._fn")
    GLUE_ANY_CALLER = {
        (DYNAMO + "utils.py", "ExactWeakKeyDictionary.__setitem__.<locals>.<lambda>")
    }
    GLUE_CALLED_BY_NAME = {
        (TORCH + "compiler/__init__.py", "is_compiling"),
        (TORCH + "compiler/__init__.py", "is_dynamo_compiling"),
        (TORCH + "compiler/__init__.py", "is_exporting"),
        (DYNAMO + "decorators.py", "graph_break"),
        (TORCH + "jit/__init__.py", "annotate"),
        (TORCH + "jit/_builtins.py", "_register_builtin"),  # an op's first lookup names it
    }
    FUNCTION = _type(lambda: 0)
    SITE = TORCH[: -_len("torch/")]  # the site-packages folder torch is installed in
    CODE = _type((lambda: 0).__code__)

    # --- where a piece of code comes from -----------------------------------------------------
    own_codes = _set()  # this machinery's own code objects (and the sealed recorder's)
    kinds: dict = {}  # id(code) -> (code, kind, course name); the code is kept, so ids stay valid
    course_map: dict = {}  # code (compared by content) -> "helpers.module.qualname"
    course_loaded: list = [None]

    def refresh_course_map():
        loaded = _tuple(_sorted(m for m in _list(_modules) if m.startswith("helpers.")))
        if loaded == course_loaded[0]:
            return
        course_loaded[0] = loaded
        course_map.clear()

        def add(code, name):
            if code not in course_map:
                course_map[code] = name
                for const in code.co_consts:
                    if _type(const) is CODE:
                        add(const, name + "." + const.co_name)

        for module_name in loaded:
            module = _modules.get(module_name)
            if module is None or module_name == THIS:
                continue
            for value in _list(_vars(module).values()):
                members = [value]
                if _isinstance(value, _type):
                    members += _list(_vars(value).values())
                for member in members:
                    member = _getattr(member, "fget", None) or _getattr(member, "__func__", member)
                    member = _getattr(member, "__wrapped__", member)
                    code = _getattr(member, "__code__", None)
                    if _type(code) is not CODE or not code.co_filename.startswith(HELPERS):
                        continue
                    home = _getattr(member, "__module__", None)
                    home = home if _isinstance(home, _str) else module_name
                    if home != THIS:
                        add(code, home + "." + code.co_qualname)
        kinds.clear()

    def kind_of(code):
        """(kind, course name): kind one of course, library, stdlib, ours, user."""
        known = kinds.get(_id(code))
        if known is not None and known[0] is code:
            return known[1], known[2]
        filename = code.co_filename
        name = None
        if code in own_codes:
            kind = "ours"
        elif filename.startswith(HELPERS):
            kind = "course"
            name = course_map.get(code)
            if name is None:
                module = filename[_len(HELPERS) :].removesuffix(".py").replace("/", ".")
                name = "helpers." + module.removesuffix(".__init__") + "." + code.co_qualname
        elif filename.startswith(SITE):
            kind = "library"
        elif filename.startswith(STDLIB) or filename.startswith("<frozen"):
            kind = "stdlib"
        else:
            name = course_map.get(code)  # a copy of a course function's code, under another name
            kind = "course" if name is not None else "user"
        kinds[_id(code)] = (code, kind, name)
        return kind, name

    def runs_nothing_compiled(frame):
        """Whether dynamo's or TorchScript's code at ``frame`` runs nothing compiled: it is (or
        was called by) the glue named above or the import of dynamo's modules, or it runs only
        because torch turned dynamo off around one of its own functions (``torch._disable_dynamo``,
        which importing ``torch._dynamo`` wraps ``torch.manual_seed`` in, or dynamo's
        ``DisableContext``, which optimizers' steps run in): nothing but such glue lies between
        ``frame`` and the code that entered it."""
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            in_torch_glue = filename.startswith(TORCH_GLUE)
            if in_torch_glue and (
                filename in GLUE_FILES
                or (filename, code.co_qualname) in GLUE_ANY_CALLER
                or code.co_name == "<module>"
                or ((filename, code.co_qualname) in GLUE_CALLED_BY_NAME and called_by_torch(frame))
            ):
                return True
            if filename == DISABLER or (filename, code.co_qualname) == DISABLE_CONTEXT:
                fn = frame.f_locals.get("fn")
                if _type(fn) is not FUNCTION:
                    return False
                wrapped = fn.__code__.co_filename
                return (
                    wrapped.startswith(TORCH)
                    and wrapped != DISABLER
                    and not wrapped.startswith(TORCH_GLUE)
                )
            if not (in_torch_glue or filename.startswith("<frozen")):
                return False
            frame = frame.f_back
        return False

    def called_by_torch(frame):
        """Whether torch's own Python code called ``frame``'s function by its name."""
        caller = frame.f_back
        return (
            caller is not None
            and caller.f_code.co_filename.startswith(TORCH)
            and frame.f_code.co_name in caller.f_code.co_names
        )

    def attributed_to_user(frame):
        """Whether the nearest frame that is not torch, a library, the standard library or this
        machinery is the notebook's code (not the course's: course helpers an exercise allows
        may call anything)."""
        while frame is not None:
            kind = kind_of(frame.f_code)[0]
            if kind == "user":
                return True
            if kind == "course":
                return False
            frame = frame.f_back
        return False

    # --- the observers ------------------------------------------------------------------------
    # one observation at a time per machinery (nested ones share it); ``inside`` counts the
    # modes' own handlers running (torch takes a mode off its stack while its handler runs)
    state = {"names": None, "problems": None, "depth": 0, "threads": 0}
    inside = [0]

    def note(name):
        names = state["names"]
        if names is not None and name not in names:
            names[name] = None  # a dict keeps the order of first use

    def problem(reason):
        problems = state["problems"]
        if problems is not None and reason not in problems:
            problems.append(reason)

    class _FunctionMode(d["TorchFunctionMode"]):
        def __torch_function__(
            self, func, types, args=(), kwargs=None, _note=note, _inside=inside,
            _getattr=_getattr, _str=_str,
        ):  # fmt: skip
            _note(_getattr(func, "__name__", None) or _str(func))
            _inside[0] += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                _inside[0] -= 1

    class _DispatchMode(d["TorchDispatchMode"]):
        @classmethod
        def _should_skip_dynamo(cls):  # keep __torch_dispatch__ as written (no dynamo wrapper)
            return False

        def __torch_dispatch__(
            self, func, types, args=(), kwargs=None, _note=note, _inside=inside,
            _getattr=_getattr, _str=_str,
        ):  # fmt: skip
            _note(_getattr(func, "__name__", None) or _str(func))
            _inside[0] += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                _inside[0] -= 1

    fm_method = _vars(_FunctionMode)["__torch_function__"]
    dm_method = _vars(_DispatchMode)["__torch_dispatch__"]
    modes: dict = {"fm": None, "dm": None, "vars": {}}

    def intact():
        """None when the observers are in place: both modes on their stacks and enabled, their
        classes and instances as built, torch's Python dispatch keys not excluded; else why not."""
        fm, dm = modes["fm"], modes["dm"]
        if fm is None:
            return None
        if _all_disabled() or not _tf_mode_enabled():
            return "torch's function modes were switched off"
        if _excluded(_python_key):  # (the snapshot key is excluded while TorchScript calls back)
            return "torch's dispatch modes were switched off"
        if not _any(_tf_at(i) is fm for i in _range(_len_tf())):
            return "the grader's torch function mode was taken off its stack"
        if not _any(_dm_at(i) is dm for i in _range(_len_dm())):
            return "the grader's torch dispatch mode was taken off its stack"
        if _vars(_FunctionMode).get("__torch_function__") is not fm_method or not same_vars(fm):
            return "the grader's torch function mode was changed"
        if _vars(_DispatchMode).get("__torch_dispatch__") is not dm_method or not same_vars(dm):
            return "the grader's torch dispatch mode was changed"
        return None

    def same_vars(mode):
        now, then = _vars(mode), modes["vars"][_id(mode)]
        return _len(now) == _len(then) and _all(k in now and now[k] is v for k, v in then)

    def check(frame):
        if not inside[0] and frame is not None and kind_of(frame.f_code)[0] == "user":
            why = intact()
            if why:
                problem(why)

    def on_event(frame, event, arg):
        """The profile function's work (sys.setprofile, in the answer's thread)."""
        if event == "call":
            code = frame.f_code
            kind, name = kind_of(code)
            if kind == "ours":  # the modes' own handlers: torch has taken the mode off meanwhile
                return
            if kind == "course":
                # every course function the answer's call tree reaches, whoever its immediate
                # caller: the answer's own code, torch, or another course function (a helper
                # that calls a forbidden one on the answer's behalf, ``checks.call(ex,
                # helpers.alibi_bias, ...)``): an exercise that forbids a course function
                # forbids it at any depth (a module's own code, run by an import, only when the
                # answer's code imported it: what else imports it is no part of the answer)
                if code.co_name != "<module>" or attributed_to_user(frame.f_back):
                    note(name)
            elif kind == "library":
                filename = code.co_filename
                if filename.startswith(TORCH_GLUE):
                    if (
                        not inside[0]
                        and attributed_to_user(frame.f_back)
                        and not runs_nothing_compiled(frame)
                    ):
                        note(COMPILED_ if filename.startswith(DYNAMO) else SCRIPT)
                module = frame.f_globals.get("__name__", "")
                if _isinstance(module, _str) and module.startswith(THIRD):
                    note(module.split(".")[0] + "." + code.co_qualname)
                if filename.startswith(DISPATCH_GLUE):
                    return  # torch's dispatcher, running its Python glue with a mode set aside
            check(frame.f_back)
        elif event == "c_call" or event == "c_return":
            if (event == "c_call" and arg in STARTERS) or _thread_count() > state["threads"]:
                note(ANOTHER)  # a thread started by the answer (threading's, or _thread's own)
            check(frame)
        elif event == "return":
            kind = kind_of(frame.f_code)[0]
            if kind != "ours" and not (
                kind == "library" and frame.f_code.co_filename.startswith(DISPATCH_GLUE)
            ):
                check(frame.f_back)

    def profile(frame, event, arg, _on=on_event):
        _on(frame, event, arg)

    def thread_profile(frame, event, arg, _on=on_event, _note=note):
        _note(ANOTHER)
        _on(frame, event, arg)

    def begin():
        """Start observing (nested calls share the outer observation)."""
        state["depth"] += 1
        if state["depth"] > 1:
            return
        refresh_course_map()
        names, problems = {}, []
        if _len_tf() or _len_dm():
            problems.append("a torch mode the grader did not set was active when the case began")
        if _getprofile() is not None or _gettrace() is not None:
            problems.append("a profile or trace function the grader did not set was active")
        fm, dm = _FunctionMode(), _DispatchMode()
        modes["fm"], modes["dm"] = fm, dm
        modes["vars"] = {_id(fm): _list(_vars(fm).items()), _id(dm): _list(_vars(dm).items())}
        state["names"], state["problems"] = names, problems
        state["threads"] = _thread_count()  # more while the answer runs: it started one
        _push_tf(fm)
        _push_dm(dm)
        _thread_setprofile(thread_profile)
        _setprofile(profile)

    def end():
        """Stop observing: (names in order of first use, problems)."""
        state["depth"] -= 1
        if state["depth"] > 0:
            return _list(state["names"] or ()), _list(state["problems"] or ())
        _setprofile(None)
        _thread_setprofile(None)
        names, problems = state["names"], state["problems"]
        why = intact()
        if why and why not in problems:
            problems.append(why)
        fm, dm = modes["fm"], modes["dm"]
        while _len_dm():  # the grader's modes off, and whatever the answer left above them
            top = _dm_at(_len_dm() - 1)
            _pop_dm(None)
            if top is dm:
                break
            problems.append("the answer left a torch dispatch mode active")
        while _len_tf():
            top = _tf_at(_len_tf() - 1)
            _pop_tf()
            if top is fm:
                break
            problems.append("the answer left a torch function mode active")
        if _len_tf() or _len_dm():
            problems.append("a torch mode stayed active after the answer")
        state["names"] = state["problems"] = None
        modes["fm"] = modes["dm"] = None
        return _list(names), problems

    def observe(answer, args, kwargs):
        """Run ``answer(*args, **kwargs)`` observed: (result, error, names, problems)."""
        result = error = None
        begin()
        try:
            result = answer(*args, **kwargs)
        except _BaseException as e:  # the caller records it (and re-raises what is no Exception)
            error = e
        finally:
            names, problems = end()
        return result, error, names, problems

    # --- plain data ---------------------------------------------------------------------------
    def number(x):
        return x if x - x == 0 else {"float": _float_repr(x)}  # NaN and infinities as text

    def tensor_data(t):
        data = _cpu(_detach(t))
        if _is_complex(data):
            return [{"unsupported": "complex"}]
        if _is_floating(data):
            return [number(v) for v in _tolist(_flatten(_to(data, _float64)))]
        return _tolist(_flatten(data))

    def tensor(t):
        return {
            "tensor": {"dtype": _str(_dtype(t)), "shape": _list(_shape(t)), "data": tensor_data(t)}
        }

    def array(a):
        """An exact numpy array as the tensor torch.from_numpy would give (NUMPY_DTYPES)."""
        dtype = _np_dtype(a)
        name = NUMPY_TORCH.get(dtype.name) if _type(dtype.name) is _str else None
        if name is None:
            return {"unsupported": "numpy array of dtype " + _str(dtype.name)}
        flat = _np_ravel(a)
        if dtype.kind == "c":
            data = [{"unsupported": "complex"}]
        elif dtype.kind == "f":
            data = [number(v) for v in _np_tolist(_np_astype(flat, _np_float64))]
        else:
            data = _np_tolist(flat)
        return {"tensor": {"dtype": name, "shape": [_int(n) for n in a.shape], "data": data}}

    def module(m):
        storages, objects, params = {}, {}, []
        for name, p in _named_parameters(m, remove_duplicate=False):
            group = storages.setdefault(_ptr(_storage(p)), _len(storages))
            params.append(
                {
                    "name": name,
                    "shape": _list(_shape(p)),
                    "storage": group,
                    "object": objects.setdefault(_id(p), _len(objects)),
                    "data": tensor_data(p),
                }
            )
        return {"module": {"class": _type(m).__name__, "parameters": params}}

    def plain(x, depth=0):
        if depth > 6:
            return {"unsupported": "nesting deeper than 6"}
        kind = _type(x)
        if x is None or kind is _bool or kind is _int or kind is _str:
            return x
        if kind is _float:
            return number(x)
        with _DisableTF():
            if kind is Tensor:
                return tensor(x)
            if kind is _list or kind is _tuple:
                return [plain(v, depth + 1) for v in x]
            if kind is _dict and _all(_type(k) is _str for k in x):
                return {k: plain(v, depth + 1) for k, v in _list(x.items())}
            if _isinstance(x, Module):
                return module(x)
            if kind is NDARRAY:
                return array(x)
            if kind in NP_SCALARS:  # as the 0-d tensor torch.from_numpy(numpy.asarray(x)) is
                return array(_asarray(x))
        return {"unsupported": kind.__name__}

    # --- fingerprints of the inputs -------------------------------------------------------------
    def code_digest(code, h):
        h.update(code.co_code)
        h.update(_repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
        for const in code.co_consts:
            if _type(const) is CODE:
                code_digest(const, h)
            else:
                h.update(_repr(const).encode())

    def digest(x, h, depth, seen):
        kind = _type(x)
        h.update(b"<" + kind.__qualname__.encode() + b">")
        if depth > 5 or _id(x) in seen:
            return
        if x is None or kind is _bool or kind is _int or kind is _str or kind is _bytes:
            h.update(_repr(x).encode())
            return
        if kind is _float:
            h.update(_float_repr(x).encode())
            return
        seen.add(_id(x))
        if _isinstance(x, Tensor):
            h.update(_repr((_str(_dtype(x)), _list(_shape(x)), _requires_grad(x))).encode())
            data = _cpu(_detach(x))
            if _dtype(data) == _bfloat16:
                data = _to(data, _float64)
            h.update(_repr(_tolist(_contiguous(data))).encode())
            return
        if kind is _list or kind is _tuple:
            for v in x:
                digest(v, h, depth + 1, seen)
            return
        if kind is _dict:
            for k, v in _list(x.items()):
                digest(k, h, depth + 1, seen)
                digest(v, h, depth + 1, seen)
            return
        if _isinstance(x, Generator):
            h.update(_repr(_tolist(_gen_state(x))).encode())
            return
        if _isinstance(x, _type):  # a class: where it is from and its methods' code
            for cls in x.__mro__:
                if cls is _object or cls.__module__.startswith("torch"):
                    continue
                h.update((cls.__module__ + "." + cls.__qualname__).encode())
                for key, member in _sorted(_vars(cls).items(), key=lambda kv: kv[0]):
                    code = _getattr(_getattr(member, "__func__", member), "__code__", None)
                    h.update(_str(key).encode())
                    if _type(code) is CODE:
                        code_digest(code, h)
            return
        if _isinstance(x, Module):
            for cls in _type(x).__mro__:
                if cls is _object or cls.__module__.startswith("torch"):
                    continue
                h.update((cls.__module__ + "." + cls.__qualname__).encode())
                for key, member in _sorted(_vars(cls).items(), key=lambda kv: kv[0]):
                    code = _getattr(_getattr(member, "__func__", member), "__code__", None)
                    h.update(_str(key).encode())
                    if _type(code) is CODE:
                        code_digest(code, h)
            for name, sub in _named_modules(x, remove_duplicate=False):
                h.update((name + ":" + _type(sub).__qualname__).encode())
            storages = {}
            for name, p in _named_parameters(x, remove_duplicate=False):
                group = storages.setdefault(_ptr(_storage(p)), _len(storages))
                h.update((name + "@" + _repr(group)).encode())
                digest(_detach(p), h, depth + 1, _set())
            for name, b in _named_buffers(x, remove_duplicate=False):
                h.update(name.encode())
                digest(b, h, depth + 1, _set())
            return
        code = _getattr(x, "__code__", None)
        if _type(code) is CODE and _callable(x):
            code_digest(code, h)
            digest(_getattr(x, "__defaults__", None), h, depth + 1, seen)
            for cell in _getattr(x, "__closure__", None) or ():
                try:
                    digest(cell.cell_contents, h, depth + 1, seen)
                except _ValueError:  # an empty cell
                    h.update(b"<empty>")
            glob = _getattr(x, "__globals__", None)
            if _type(glob) is _dict:
                reads = global_reads(code)  # not attribute names, which share co_names
                for name in code.co_names:
                    if name not in reads:
                        continue
                    value = glob.get(name)
                    if _isinstance(value, Tensor | Module) or _type(value) in (_int, _float, _bool):
                        h.update(name.encode())
                        digest(value, h, depth + 1, seen)
            owner = _getattr(x, "__self__", None)
            if owner is not None:
                digest(owner, h, depth + 1, seen)
            return
        try:
            attrs = _vars(x)
        except _TypeError:
            attrs = None
        if _type(attrs) is _dict:
            for k in _sorted(attrs, key=_str):
                h.update(_str(k).encode())
                digest(attrs[k], h, depth + 1, seen)
        else:
            h.update(kind.__qualname__.encode())

    def global_reads(code):
        """The names ``code`` reads as globals. ``co_names`` also holds attribute names: a lambda
        ``h.mean(-1)`` must not take in a notebook global named ``mean`` that it never reads
        (an honest notebook binding one would otherwise change the hidden inputs' digest)."""
        return {i.argval for i in _instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}

    def fingerprint(args, kwargs):
        h = _sha256()
        with _DisableTF():
            digest(_list(args), h, 0, _set())
            digest(_dict(kwargs), h, 0, _set())
        return h.hexdigest()[:32]

    _instructions = d["get_instructions"]
    VARARGS, VARKEYWORDS = 0x04, 0x08  # inspect.CO_VARARGS, CO_VARKEYWORDS

    def reads_inputs_again(code):
        """Whether a hidden test's wrapper (``code``) may read an input after the answer it
        calls has run: it loads one of its parameters more than once, or a nested function
        keeps one (a wrapper that passes each input on once, ``lambda *a: f(*a)``, does not)."""
        flags = code.co_flags
        count = code.co_argcount + code.co_kwonlyargcount
        count += (1 if flags & VARARGS else 0) + (1 if flags & VARKEYWORDS else 0)
        params = _set(code.co_varnames[:count])
        if _any(name in params for name in code.co_cellvars):
            return True
        loads: dict = {}
        for ins in _instructions(code):
            if ins.opname.startswith("LOAD_FAST"):
                names = ins.argval if _type(ins.argval) is _tuple else (ins.argval,)
                for name in names:
                    if name in params:
                        loads[name] = loads.get(name, 0) + 1
                        if loads[name] > 1:
                            return True
        return False

    def inputs_after(answer, args, kwargs, before, wrapper):
        """The inputs' digest after a hidden test's own wrapper ran, when the answer it called
        changed them in place and the wrapper may read them again (what it records may then be
        computed from inputs the answer chose); else None. An answer the hidden test calls
        directly may change its inputs: what is recorded is what it returned."""
        if not wrapper or _type(answer) is not FUNCTION:
            return None
        after = fingerprint(args, kwargs)
        if after == before or not reads_inputs_again(answer.__code__):
            return None
        return after

    def active():
        return state["depth"] > 0

    def to_json(value):
        return "".join(_encoder(value, 0))

    def add_codes(*functions):
        """Count these functions (or code objects) as the grader's own code."""

        def walk(code):
            own_codes.add(code)
            for const in code.co_consts:
                if _type(const) is CODE:
                    walk(const)

        for fn in functions:
            walk(fn if _type(fn) is CODE else fn.__code__)
        kinds.clear()

    add_codes(refresh_course_map, kind_of, attributed_to_user, note, problem, intact, same_vars, check,
              on_event, profile, thread_profile, begin, end, observe, number, tensor_data, tensor,
              array, module, plain, code_digest, digest, fingerprint, reads_inputs_again,
              inputs_after, active, to_json, add_codes, fm_method,
              dm_method)  # fmt: skip

    return {
        "observe": observe,
        "begin": begin,
        "end": end,
        "plain": plain,
        "fingerprint": fingerprint,
        "inputs_after": inputs_after,
        "to_json": to_json,
        "add_codes": add_codes,
        "kind_of": kind_of,
        "attributed_to_user": attributed_to_user,
        "note": note,
        "exposed": (profile, thread_profile, fm_method, dm_method),
        "active": active,
    }


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
    """One case: the inputs' fingerprint, then the answer observed, as plain data (what
    ``record`` writes to a developer's log; the sealed recorder builds the same). ``wrapper``:
    the answer is the hidden test's own function (defined in the cell that records), which may
    read its inputs again after the student's code it calls has run."""
    inputs = machinery["fingerprint"](args, kwargs)
    result, error, calls, problems = machinery["observe"](answer, args, kwargs)
    entry = {"kind": "case", "exercise": exercise, "case": case, "inputs": inputs, "calls": calls}
    after = machinery["inputs_after"](answer, args, kwargs, inputs, wrapper)
    if after is not None:
        entry["inputs_after"] = after
    if problems:
        entry["problems"] = problems
    if error is not None:
        entry["error"] = type(error).__name__
        if not isinstance(error, Exception):
            raise error
    else:
        entry["value"] = machinery["plain"](result)
    return entry


# ---------------------------------------------------------------------------------------------
# The sealed recorder (the grading kernel only)
# ---------------------------------------------------------------------------------------------


def _sentinel(d: dict, m: dict, config: dict, fd: int):  # noqa: C901 - one closure on purpose
    """The sealed recorder, a generator: its state (the channel's key, the seeds, the hidden
    tests' code) lives in its frame, which only an audited operation reaches. Protocol: the
    first ``send`` gives it its own ``send``; it yields the entry points ``(record,
    hidden_seed)``; each later ``send(request)`` from an entry point is answered by a yield."""
    _type, _len, _dict, _set, _list, _str = (
        d["type"],
        d["len"],
        d["dict"],
        d["set"],
        d["list"],
        d["str"],
    )
    _isinstance, _int, _bytes, _getattr = d["isinstance"], d["int"], d["bytes"], d["getattr"]
    _tuple = d["tuple"]
    _bool, _Random = d["bool"], d["Random"]
    _compile, _BaseException, _Exception = d["compile"], d["BaseException"], d["Exception"]
    _getframe, _get_ident, _write = d["getframe"], d["get_ident"], d["os_write"]
    _current_frames = d["current_frames"]
    _hmac, _main, _getpid = d["hmac_digest"], d["main_ident"], d["getpid"]
    _Module, _Interactive = d["ast_Module"], d["ast_Interactive"]
    ONLY_AST, AWAIT = d["only_ast"], d["top_level_await"]
    CODE = _type((lambda: 0).__code__)
    _lock = d["allocate_lock"]()
    observe, plain, fingerprint, to_json = m["observe"], m["plain"], m["fingerprint"], m["to_json"]
    inputs_after = m["inputs_after"]
    FUNCTION = _type(lambda: 0)
    kind_of, add_codes, note, active = m["kind_of"], m["add_codes"], m["note"], m["active"]
    ANOTHER, COMPILED_, SCRIPT = d["markers"]

    key = _bytes.fromhex(config["key"])
    public = _bool(config["public"])  # no instructor's secret: the notebook's own defaults
    seeds = _dict(config["seeds"])
    rngs: dict = {}  # one random.Random per exercise, for hidden_cases
    hidden_sources = _list(config["hidden"])
    config.clear()
    seq = [0]
    counters: dict = {}
    trusted: dict = {"codes": None}
    in_hook = _set()
    exposed = _set(m["exposed"])  # functions the notebook can reach (reading them is flagged)
    add_codes(_getframe(0).f_code)  # this generator's own code
    AUDITED_READS = (
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "gi_code",
        "cr_code",
        "ag_code",
    )

    def emit(entry):
        with _lock:
            entry["seq"] = seq[0]
            body = to_json(entry)
            mac = _hmac(key, body.encode(), "sha256").hex()
            line = (mac + " " + body + "\n").encode()
            while line:
                line = line[_write(fd, line) :]
            seq[0] += 1

    def flag(reason, event=None):
        emit({"kind": "flag", "reason": reason, "event": event})

    def trusted_codes():
        """Every code object the hidden tests compile to (by content: as IPython compiles each
        top-level statement of a cell, as a module or interactively, with or without top-level
        await): only these may call ``record`` and ``hidden_seed``."""
        if trusted["codes"] is not None:
            return trusted["codes"]
        codes = _set()

        def walk(code):
            codes.add(code)
            for const in code.co_consts:
                if _type(const) is CODE:
                    walk(const)

        for source in hidden_sources:
            try:
                tree = _compile(source, "<hidden tests>", "exec", ONLY_AST, True)
            except _Exception:
                continue
            for node in tree.body:
                for wrapped, mode in (
                    (_Module([node], []), "exec"),
                    (_Interactive([node]), "single"),
                ):
                    for flags in (0, AWAIT):
                        try:
                            walk(_compile(wrapped, "<hidden tests>", mode, flags, True))
                        except _Exception:
                            pass
        trusted["codes"] = codes
        return codes

    def caller(entry_code):
        """The frame that called the entry point (None when it was not called through it)."""
        frame = _getframe(1)  # the generator's own frame is 0; 1 is whoever resumed it
        while frame is not None and frame.f_code is not entry_code:
            if kind_of(frame.f_code)[0] != "ours":
                return None
            frame = frame.f_back
        return None if frame is None else frame.f_back

    # --- other threads ----------------------------------------------------------------------
    # The observers (sys.setprofile, torch's modes) see the thread that runs the answer only. A
    # Python thread the notebook started (threading, _thread, an executor), alive when a case
    # begins or ends, could do the answer's work unseen: the case is marked ANOTHER_THREAD. The
    # kernel's own threads (heartbeat, IOPub, control ...) are Python threads too: they are the
    # ones alive when the kernel is about to run its first request, before any notebook code
    # (:func:`kernel_ready`, called once by helpers._grading_kernel). Threads torch starts in C++
    # have no Python frame and are not counted (they run no notebook code).
    kernel_threads = _set()
    ready = [False]
    KERNEL_FILES = _tuple(d["kernel_files"])

    def kernel_ready():
        if ready[0]:
            return  # once, before the notebook's first request; later calls change nothing
        ready[0] = True
        kernel_threads.update(_current_frames())

    def other_threads():
        if not ready[0]:
            return False
        me = _get_ident()
        return any_of(
            i != me and i not in kernel_threads and not kernels_own(frame)
            for i, frame in _current_frames().items()
        )

    def kernels_own(frame):
        """A thread the kernel's libraries started later (pyzmq's garbage collector, after a
        large message): every frame on its stack is in threading, selectors or those libraries.
        Checked each time (an ident is reused once its thread ends)."""
        while frame is not None:
            name = frame.f_code.co_filename
            if not any_of(name == f or name.startswith(f) for f in KERNEL_FILES):
                return False
            frame = frame.f_back
        return True

    def any_of(items):
        for item in items:
            if item:
                return True
        return False

    def do_record(exercise, answer, args, kwargs, frame):
        if _type(exercise) is not _str:
            flag("record() was given an exercise that is not a str")
            return None
        case = counters.get(exercise, 0)
        counters[exercise] = case + 1
        if frame is None or frame.f_code not in trusted_codes():
            flag(
                f"record({exercise!r}) was called from code that is not the hidden tests", exercise
            )
            return None
        entry = {"kind": "case", "exercise": exercise, "case": case}
        entry["inputs"] = fingerprint(args, kwargs)
        before = other_threads()
        result, error, calls, problems = observe(answer, args, kwargs)
        if (before or other_threads()) and ANOTHER not in calls:
            calls.append(ANOTHER)
        entry["calls"] = calls
        # the hidden tests' own wrapper (its code is theirs): it may read its inputs again
        wrapper = _type(answer) is FUNCTION and answer.__code__ in trusted_codes()
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
        emit(entry)
        return None if error is None or _isinstance(error, _Exception) else error

    def do_seed(exercise, default, frame, cases=False):
        """The seed (or, for ``cases``, the exercise's random.Random) under the secret; None for
        the notebook's own default (no secret, or a caller that is not the hidden tests)."""
        if _type(exercise) is not _str:
            return None
        what = "hidden_cases" if cases else "hidden_seed"
        if frame is None or frame.f_code not in trusted_codes():
            flag(f"{what}({exercise!r}) was called from code that is not the hidden tests")
            return None
        if public:
            return None
        seed = seeds.get(exercise)
        if seed is None:
            flag(f"{what}({exercise!r}): the grader has no seed for this exercise")
            return None
        if not cases:
            return seed
        if exercise not in rngs:
            rngs[exercise] = _Random(seed)
        return rngs[exercise]

    # --- the audit hook -----------------------------------------------------------------------
    def user_caller(frame):
        """The nearest frame outside the standard library is the notebook's code."""
        while frame is not None:
            kind = kind_of(frame.f_code)[0]
            if kind == "user":
                return True
            if kind != "stdlib":
                return False
            frame = frame.f_back
        return False

    def ours(frame):
        return frame is not None and kind_of(frame.f_code)[0] == "ours"

    fds = {fd}
    fd_paths = _set()
    for base in ("/proc/self", f"/proc/{_getpid()}", "/proc/thread-self"):
        fd_paths.update({base + "/fd/" + _str(fd), base + "/fdinfo/" + _str(fd), base + "/mem"})
    fd_paths.update({"/dev/fd/" + _str(fd), "/proc/self/fd", "/proc/" + _str(_getpid()) + "/fd"})

    def on_audit(event, args, frame):
        if event == "sys.setprofile" or event == "sys.settrace":
            if _get_ident() != _main and event == "sys.setprofile":
                note(ANOTHER)  # a thread starting while an answer is observed (threading's hook)
                return
            if user_caller(frame) or active():  # not a library's own, outside the answers
                flag("the notebook's code set a profile or trace function (" + event + ")", event)
        elif event == "sys._getframe":
            got = args[0] if args else None
            if ours(got):
                flag("the notebook's code took one of the grader's frames", event)
            elif user_caller(frame):
                flag("the notebook's code reads stack frames (sys._getframe)", event)
        elif event == "sys._current_frames":
            if user_caller(frame):
                flag("the notebook's code reads stack frames (sys._current_frames)", event)
        elif event == "object.__getattr__":
            obj, name = args[0], args[1]
            if obj in exposed or obj is generator[0]:
                flag(f"the notebook's code read the grader's {name}", event)
            elif name in AUDITED_READS or name == "__code__":
                if user_caller(frame):
                    flag(f"the notebook's code reads {name}", event)
        elif event == "object.__setattr__":
            obj, name = args[0], args[1]
            if obj in exposed:
                flag(f"the notebook's code changed the grader's {name}", event)
            elif name == "__code__" and user_caller(frame):
                flag("the notebook's code replaced a function's __code__", event)
        elif event == "function.__new__" or event == "code.__new__":
            if user_caller(frame):
                flag(f"the notebook's code builds code objects ({event})", event)
        elif event[:3] == "gc." or event[:7] == "ctypes.":
            if user_caller(frame):
                flag(f"the notebook's code uses {event}", event)
        elif event == "open" or event == "os.listdir" or event == "os.scandir":
            path = args[0] if args else None
            if (_type(path) is _int and path in fds) or (
                _isinstance(path, _str) and path.rstrip("/") in fd_paths
            ):
                flag("the notebook's code opened the grader's channel", event)
        elif event == "sys.addaudithook":
            flag("the notebook's code added an audit hook", event)
        elif user_caller(frame):  # processes: a child holds a copy of everything in this one
            flag(f"the notebook's code starts a process ({event})", event)

    INTERESTING = _set(AUDITED_READS) | {"__code__"}
    WATCHED = _set(
        "sys.setprofile sys.settrace sys._getframe sys._current_frames object.__getattr__ "
        "object.__setattr__ function.__new__ code.__new__ gc.get_objects gc.get_referrers "
        "gc.get_referents open os.listdir os.scandir sys.addaudithook subprocess.Popen "
        "os.system os.fork os.forkpty os.posix_spawn os.exec os.spawn pty.spawn".split()
    )

    def hook(event, args):
        if event not in WATCHED and event[:7] != "ctypes.":
            return
        if event == "object.__getattr__" and not (
            args[1] in INTERESTING or args[0] in exposed or args[0] is generator[0]
        ):
            return  # the common case (a library reading f_code, say): nothing to look at
        ident = _get_ident()
        if ident in in_hook:
            return
        in_hook.add(ident)
        try:
            frame = _getframe(1)
            if not ours(frame):
                on_audit(event, args, frame)
        except _BaseException:  # noqa: BLE001 - the hook never breaks the notebook
            pass
        finally:
            in_hook.discard(ident)

    generator = [None]
    add_codes(emit, flag, trusted_codes, caller, do_record, do_seed, user_caller, ours, on_audit,
              hook, kernel_ready, other_threads, any_of)  # fmt: skip
    send = yield None  # the first send: this generator's own send

    def record(exercise, answer, /, *args, _send=send, **kwargs):
        error = _send(("record", exercise, answer, args, kwargs))
        if error is not None:
            raise error

    def hidden_seed(exercise, default, /, _send=send, _int=_int, _type=_type):
        if _type(default) is not _int:
            raise TypeError("hidden_seed: default must be an int")
        seed = _send(("seed", exercise, default))
        return default if seed is None else seed

    def hidden_cases(exercise, default, draw, /, _send=send):
        rng = _send(("cases", exercise, default))
        return default if rng is None else draw(rng)

    exposed.update({record, hidden_seed, hidden_cases, kernel_ready})
    generator[0] = _getattr(send, "__self__", None)
    add_codes(record, hidden_seed, hidden_cases)
    entry_codes = {
        "record": record.__code__,
        "seed": hidden_seed.__code__,
        "cases": hidden_cases.__code__,
    }
    d["addaudithook"](hook)
    request = yield (record, hidden_seed, hidden_cases, kernel_ready)
    while True:
        response = None
        try:
            kind = request[0]
            frame = caller(entry_codes.get(kind))
            if kind == "record":
                response = do_record(request[1], request[2], request[3], request[4], frame)
            elif kind == "seed" or kind == "cases":
                response = do_seed(request[1], request[2], frame, cases=kind == "cases")
        except _BaseException as e:  # noqa: BLE001 - the recorder never dies
            try:
                flag("the recorder failed: " + _type(e).__name__)
            except _BaseException:
                pass
        request = yield response


def _kernel_files() -> list[str]:
    """Where the kernel's own threads run: threading.py, selectors.py, and the folders of
    pyzmq, ipykernel, jupyter_client and tornado (found without importing them)."""
    import importlib.util
    import selectors

    files = [threading.__file__, selectors.__file__]
    for name in ("zmq", "ipykernel", "jupyter_client", "tornado"):
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            files.append(os.path.join(folder, ""))
    return files


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
