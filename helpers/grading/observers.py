"""Coursework (lessons 4-10): the observers, what an answer's code called while it ran.

:func:`_observers` builds them from the dependencies (:func:`helpers.grading.dependencies.
_dependencies`): a torch function mode and a torch dispatch mode (the torch functions and ATen
operators the answer called), a profile function (the course's functions it reached, libraries
that hold answers, markers for threads, ``torch.compile`` and TorchScript), and the checks that
the observers are still in place whenever the answer's code calls anything. Where a piece of
code comes from (the course, a library, the standard library, the grader's own code, or the
notebook) it asks :mod:`helpers.grading.provenance`. Nothing in it looks up a global name:
everything it uses is bound when it is built, so code in the kernel that rebinds a module
attribute cannot change it.
"""

from __future__ import annotations


def _observers(d: dict, where: dict) -> dict:  # noqa: C901 - one closure on purpose (see above)
    """The observers, bound to the dependencies ``d`` and to ``where`` code comes from
    (:func:`helpers.grading.provenance._provenance`). Returns a dict of functions; ``own``: the
    functions to count as the grader's own code (:func:`helpers.grading.machinery._machinery`).

    Objects that torch or the interpreter keep, which the notebook could reach (the two modes and
    the profile functions), take what they need as default arguments, which cannot be read or
    replaced without an audited operation; the rest are closures, reachable only through their
    frames."""
    _isinstance, _len, _range = d["isinstance"], d["len"], d["range"]
    _list, _tuple, _str = d["list"], d["tuple"], d["str"]
    _getattr, _vars, _id = d["getattr"], d["vars"], d["id"]
    _all, _any, _BaseException = d["all"], d["any"], d["BaseException"]
    _setprofile, _getprofile = d["setprofile"], d["getprofile"]
    _thread_setprofile, _gettrace = d["threading_setprofile"], d["gettrace"]
    _push_tf, _pop_tf, _len_tf, _tf_at = d["push_tf"], d["pop_tf"], d["len_tf"], d["tf_at"]
    _push_dm, _pop_dm, _len_dm, _dm_at = d["push_dm"], d["pop_dm"], d["len_dm"], d["dm_at"]
    _all_disabled, _tf_mode_enabled = d["tf_all_disabled"], d["tf_mode_enabled"]
    _excluded, _python_key = d["key_excluded"], d["python_key"]
    THIRD = d["third_party"]
    ANOTHER, COMPILED_, SCRIPT = d["markers"]
    STARTERS = _tuple(f for f in d["thread_starters"] if f is not None)
    _thread_count = d["thread_count"]
    kind_of, attributed_to_user = where["kind_of"], where["attributed_to_user"]
    refresh_course_map = where["refresh_course_map"]
    runs_nothing_compiled = where["runs_nothing_compiled"]
    TORCH_GLUE, DYNAMO, DISPATCH_GLUE = where["torch_glue"], where["dynamo"], where["dispatch_glue"]

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

    def active():
        return state["depth"] > 0

    own = (note, problem, intact, same_vars, check, on_event, profile, thread_profile, begin, end,
           observe, active, fm_method, dm_method)  # fmt: skip
    return {
        "observe": observe,
        "begin": begin,
        "end": end,
        "note": note,
        "exposed": (profile, thread_profile, fm_method, dm_method),
        "active": active,
        "own": own,
    }
