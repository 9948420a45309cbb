"""Coursework (lessons 4-10): an answer's result as plain data, and the digest of a case's inputs.

:func:`_plain_data` builds, from the dependencies (:func:`helpers.grading.dependencies.
_dependencies`), the converter of what an answer returned into JSON-able plain data (exact types:
numbers, strings, lists and dicts of them, tensors, modules' parameters, numpy arrays as the
tensor ``torch.from_numpy`` gives) and the fingerprint of a hidden case's inputs, taken before
the answer runs and, for the hidden test's own wrapper, after. Nothing in it looks up a global
name: everything it uses is bound when it is built.
"""

from __future__ import annotations


def _plain_data(d: dict) -> dict:  # noqa: C901 - one closure on purpose (see above)
    """The converters, bound to the dependencies ``d``. Returns a dict of functions; ``own``:
    the functions to count as the grader's own code (:func:`helpers.grading.machinery._machinery`)."""
    _type, _isinstance, _len = d["type"], d["isinstance"], d["len"]
    _list, _tuple, _dict, _set, _str = d["list"], d["tuple"], d["dict"], d["set"], d["str"]
    _int, _float, _bool, _bytes, _repr = d["int"], d["float"], d["bool"], d["bytes"], d["repr"]
    _sorted, _getattr, _vars, _id = d["sorted"], d["getattr"], d["vars"], d["id"]
    _all, _any, _callable, _object = d["all"], d["any"], d["callable"], d["object"]
    _TypeError, _ValueError = d["TypeError"], d["ValueError"]
    Tensor, Module, Generator = d["Tensor"], d["Module"], d["Generator"]
    _detach, _cpu, _to, _flatten = d["t_detach"], d["t_cpu"], d["t_to"], d["t_flatten"]
    _contiguous, _tolist, _storage = d["t_contiguous"], d["t_tolist"], d["t_untyped_storage"]
    _is_floating, _is_complex = d["t_is_floating"], d["t_is_complex"]
    _shape, _dtype, _requires_grad = d["t_shape"], d["t_dtype"], d["t_requires_grad"]
    _ptr, _gen_state = d["storage_ptr"], d["gen_state"]
    _named_parameters, _named_buffers = d["named_parameters"], d["named_buffers"]
    _named_modules = d["named_modules"]
    _float64, _bfloat16, _DisableTF = d["float64"], d["bfloat16"], d["DisableTF"]
    _sha256, _encoder, _float_repr = d["sha256"], d["encoder"], d["float_repr"]
    NDARRAY, NP_SCALARS, _asarray = d["np_ndarray"], d["np_scalars"], d["np_asarray"]
    _np_astype, _np_ravel, _np_tolist = d["np_astype"], d["np_ravel"], d["np_tolist"]
    _np_dtype, _np_float64 = d["np_dtype"], d["np_float64"]
    NUMPY_TORCH = _dict(d["numpy_dtypes"])
    FUNCTION = _type(lambda: 0)
    CODE = _type((lambda: 0).__code__)

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

    def class_digest(t, h):
        """A class's own code: each class of its MRO outside torch, by name and methods' code."""
        for cls in t.__mro__:
            if cls is _object or cls.__module__.startswith("torch"):
                continue
            h.update((cls.__module__ + "." + cls.__qualname__).encode())
            for key, member in _sorted(_vars(cls).items(), key=lambda kv: kv[0]):
                code = _getattr(_getattr(member, "__func__", member), "__code__", None)
                h.update(_str(key).encode())
                if _type(code) is CODE:
                    code_digest(code, h)

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
            class_digest(x, h)
            return
        if _isinstance(x, Module):
            class_digest(_type(x), h)
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

    def to_json(value):
        return "".join(_encoder(value, 0))

    own = (number, tensor_data, tensor, array, module, plain, code_digest, digest, fingerprint,
           reads_inputs_again, inputs_after, to_json)  # fmt: skip
    return {
        "plain": plain,
        "fingerprint": fingerprint,
        "inputs_after": inputs_after,
        "to_json": to_json,
        "own": own,
    }
