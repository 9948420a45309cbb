"""Coursework (lessons 4-10): everything the recorder's machinery calls, taken once, when it is built.

The machinery (:mod:`helpers.grading.machinery`) and the sealed recorder
(:mod:`helpers.grading.sentinel`) read nothing from a module's globals or from builtins at run
time: every function, type and constant they use is in the dict :func:`_dependencies` returns,
taken before any notebook code runs (when the grading kernel seals the recorder), so that code
in the kernel that later rebinds a module attribute or a builtin cannot change them.
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

import numpy
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .markers import ANOTHER_THREAD, COMPILED, NUMPY_DTYPES, PUBLIC_SECRET, THIRD_PARTY, TORCHSCRIPT

#: The folder of the ``helpers`` package: code from there is the course's (or the recorder's own)
_HELPERS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: The recorder's package: its own modules are not course functions an answer calls
_PACKAGE = __name__.rpartition(".")[0]

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
        this_module=_PACKAGE,
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
