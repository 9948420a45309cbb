"""Coursework (lessons 4-10): what a recorded case may hold beyond plain values, and the public key.

The markers a case's ``calls`` may hold for what the grader cannot see into, the libraries whose
calls are recorded by name, the numpy dtypes an answer may return, and the key of the hidden cases
when the instructor has set no secret. Re-exported by :mod:`helpers.grading`.
"""

from __future__ import annotations

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
