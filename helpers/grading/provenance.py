"""Coursework (lessons 4-10): where a piece of code comes from, for the recorder's observers.

:func:`_provenance` builds, from the dependencies (:func:`helpers.grading.dependencies.
_dependencies`), what tells a code object's kind: the course's (a function of ``helpers``, by
its module and name, or a copy of one's code under another name), a library's, the standard
library's, the grader's own, or the notebook's; whether dynamo's or TorchScript's code runs
anything compiled; and the set of the grader's own code objects. Nothing in it looks up a global
name: everything it uses is bound when it is built.
"""

from __future__ import annotations


def _provenance(d: dict) -> dict:  # noqa: C901 - one closure on purpose (see above)
    """Where code comes from, bound to the dependencies ``d``. Returns a dict of functions and
    the glue folders the observers also read; ``own``: the functions to count as the grader's
    own code (:func:`helpers.grading.machinery._machinery`)."""
    _type, _isinstance, _len, _set = d["type"], d["isinstance"], d["len"], d["set"]
    _list, _tuple, _str, _sorted = d["list"], d["tuple"], d["str"], d["sorted"]
    _getattr, _vars, _id = d["getattr"], d["vars"], d["id"]
    HELPERS, TORCH, STDLIB = d["helpers_dir"], d["torch_dir"], d["stdlib_dir"]
    THIS = d["this_module"]
    THESE = THIS + "."  # the recorder's own modules (helpers.grading.observers ...)
    _modules = d["modules"]
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
            if module is None or module_name == THIS or module_name.startswith(THESE):
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
                    if home != THIS and not home.startswith(THESE):
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

    own = (refresh_course_map, kind_of, attributed_to_user, add_codes)  # fmt: skip
    return {
        "refresh_course_map": refresh_course_map,
        "kind_of": kind_of,
        "runs_nothing_compiled": runs_nothing_compiled,
        "attributed_to_user": attributed_to_user,
        "add_codes": add_codes,
        "torch_glue": TORCH_GLUE,
        "dynamo": DYNAMO,
        "dispatch_glue": DISPATCH_GLUE,
        "own": own,
    }
