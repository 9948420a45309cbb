"""Coursework (lessons 4-10): the sealed recorder, what the grading kernel's hidden tests call.

:func:`_sentinel` is a generator whose frame holds the channel's key, the seeds of the hidden
cases and the hidden tests' code; its entry points (``record``, ``hidden_seed``,
``hidden_cases``) are what :func:`helpers.grading._seal` puts in place of the unsealed ones. It
signs every case and flag and writes it to the channel, and its audit hook reports the notebook's
code reaching for frames, code objects, the profiler, the garbage collector, ``ctypes``, the
channel or a child process. Like the machinery, it reads no module global at run time: everything
it uses is in the dependencies it is given (:func:`helpers.grading.dependencies._dependencies`).
"""

from __future__ import annotations


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
    _TypeError = d["TypeError"]
    _getframe, _get_ident, _write = d["getframe"], d["get_ident"], d["os_write"]
    _current_frames = d["current_frames"]
    _hmac, _main, _getpid = d["hmac_digest"], d["main_ident"], d["getpid"]
    _Module, _Interactive = d["ast_Module"], d["ast_Interactive"]
    ONLY_AST, AWAIT = d["only_ast"], d["top_level_await"]
    CODE = _type((lambda: 0).__code__)
    _lock = d["allocate_lock"]()
    case_entry, to_json = m["case_entry"], m["to_json"]
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
        # the hidden tests' own wrapper (its code is theirs): it may read its inputs again
        wrapper = _type(answer) is FUNCTION and answer.__code__ in trusted_codes()
        entry, error = case_entry(exercise, case, answer, args, kwargs, wrapper, other_threads)
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

    def hidden_seed(exercise, default, /, _send=send, _int=_int, _type=_type, _error=_TypeError):
        if _type(default) is not _int:
            raise _error("hidden_seed: default must be an int")
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
