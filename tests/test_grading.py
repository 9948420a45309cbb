"""Grades that a one-line cheat cannot earn (tools/grading, helpers.grading, coursework.py).

Unit tests of the pieces (fast), then one nbgrader course built from a small notebook with the
shape of a lesson exercise, autograded with the documented commands: the instructor's solution
and a correct answer that warns get full marks, a wrong answer loses its points, and each kind of
cheat scores 0 on what it targets, cannot reach the gradebook, the instructor's source or another
student's work, leaves no process behind, and appears on the review list. The cheats on the real
lessons are in tests/test_coursework.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

from _grading_notebooks import code_cell, one_solution, python_notebook, run_coursework  # noqa: E402

from helpers.course import LESSONS, Lesson  # noqa: E402
from helpers.grading import plain, record  # noqa: E402
from tools import coursework as cw  # noqa: E402
from tools.grading import review as rv  # noqa: E402
from tools.grading.spec import Spec  # noqa: E402
from tools.grading.verdicts import judge, same  # noqa: E402

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (.ci/run does)",
)


# ---- plain data and verdicts, in this process ------------------------------------------------
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def test_plain_accepts_exact_types_only():
    assert plain(torch.tensor([1.5, 2.0]))["tensor"]["data"] == [1.5, 2.0]
    assert plain(torch.zeros(2).as_subclass(Liar)) == {"unsupported": "Liar"}
    assert plain(True) is True and plain(3) == 3 and plain("a") == "a"

    class MyFloat(float):
        def __eq__(self, other):
            return True

    assert plain(MyFloat(1.0)) == {"unsupported": "MyFloat"}
    assert plain([1, (2.5, None)]) == [1, [2.5, None]]


def _entries(values, **extra):
    return {
        i: [{"exercise": "x", "case": i, "value": plain(v), "calls": [], **extra}]
        for i, v in enumerate(values)
    }


def test_observing_the_course_model_imports_no_symbolic_shapes():
    """Under the grader's torch function mode, torch.broadcast_shapes goes through torch's
    symbolic shapes and imports sympy: about 5 s of CPU the first time in every grading kernel
    (lesson 9's greedy-decoding check took 6.5 s, 1.5 s after). The course's model, forward and
    backward with every way of giving position, observed as a graded answer is, must not need it
    (a fresh interpreter: another test may have imported sympy here)."""
    probe = (
        "import sys, torch\n"
        "from helpers import TransformerLM, grading\n"
        "for pos in ('sinusoidal', 'learned', 'rotary', 'alibi', 'none'):\n"
        "    m = TransformerLM(11, 16, 2, 2, max_len=24, positional=pos)\n"
        "    x = torch.randint(0, 11, (2, 5))\n"
        "    _, error, names, _ = grading.observe(lambda: m(x).sum().backward())\n"
        "    assert error is None and names, (pos, error)\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'sympy')[:3])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_judge_right_wrong_missing_repeated_forbidden():
    ref = _entries([torch.tensor([1.0, 2.0]), 3])
    assert judge("x", ref, _entries([torch.tensor([1.0, 2.0 + 1e-7]), 3])).correct
    wrong = judge("x", ref, _entries([torch.tensor([1.0, 2.1]), 3]))
    assert not wrong.correct and "hidden case 1" in wrong.message and "2.0" not in wrong.message
    assert "no answer" in judge("x", ref, {0: ref[0]}).message
    twice = {0: ref[0] * 2, 1: ref[1]}
    assert "recorded 2 times" in judge("x", ref, twice).message
    liar = _entries([torch.zeros(2).as_subclass(Liar), 3])
    assert "does not accept" in judge("x", ref, liar).message


def test_same_reports_without_showing_the_expected_value():
    problem = same(plain(torch.tensor([229.0])), plain(torch.tensor([229.446])), Spec())
    assert problem and "229.446" not in problem


def test_forbidden_function_is_seen_in_the_calls(monkeypatch, tmp_path):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    record("y", lambda x: torch.nn.functional.layer_norm(x, (4,)), torch.randn(2, 4))
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert "layer_norm" in entry["calls"]


def _assert_review(cheats: dict[str, str], clean: str) -> None:
    """Each solution cell of ``cheats`` is on the review list with its reason; ``clean`` is not."""
    instructor = nbformat.v4.new_notebook()
    instructor.cells = [nbformat.v4.new_code_cell("from helpers.checks import audit as checks")]
    for source, reason in cheats.items():
        found = rv.review(one_solution(source), instructor)
        assert any(reason in f.reason for f in found), (source, found)
    assert rv.review(one_solution(clean), instructor) == []


def test_review_lists_each_kind_of_reach():
    cheats = {
        "checks = object()": "rebinds 'checks'",
        "get_ipython().input_transformers_post.append(f)": "get_ipython",
        "import sys\nsys._getframe(1).f_locals": "stack frames",
        "class T(torch.Tensor):\n    def __torch_function__(cls): pass": "override machinery",
        "torch.allclose = lambda *a, **k: True": "patching a library",
        "import subprocess": "processes",
        "import sqlite3": "a database",
        "with torch._C.DisableTorchFunction():\n    pass": "override machinery",
        "from helpers.checks.feedforward import _x": "the course's checks",
    }
    clean = "def f(x):\n    return 2 * x"
    _assert_review(cheats, clean)


def test_review_lists_code_carried_as_data():
    cheats = {
        "import base64, pickle\npickle.loads(base64.b64decode(b'gASV'))": "unpickling",
        "import zlib, marshal\ncode = marshal.loads(zlib.decompress(b'x'))": "decompress into loads",
        "import codecs\nexec(codecs.decode('cevag(1)', 'rot13'))": "decode into exec",
        "exec(bytes.fromhex('7072696e742831 29').decode())": "decode into exec",
        "class P:\n    def __reduce__(self):\n        return (print, ('x',))": "unpickling",
        "g = __import__('helpers.' + 'grading')": "importlib",
        "from importlib import import_module\ng = import_module('helpers.' + 'grading')": "importlib",
    }
    # text decoded for printing, a tokenizer's decode: nothing
    clean = "def f(tok, ids):\n    text = tok.decode(ids)\n    return text.encode().decode('utf-8')"
    _assert_review(cheats, clean)


def test_channel_keeps_only_the_cases_that_arrived_during_hidden_tests():
    """A check of the code: channel.parse cuts the stream by the grader's marks; a case outside
    a hidden-test request is ignored and reported, a flag counts wherever it arrived."""
    import hmac as _hmac

    from tools.grading import channel

    key = b"k" * 32

    def line(entry):
        body = json.dumps(entry)
        return (_hmac.digest(key, body.encode(), "sha256").hex() + " " + body + "\n").encode()

    a = line({"kind": "case", "exercise": "x", "case": 0, "seq": 0})
    b = line({"kind": "flag", "reason": "gc", "seq": 1})
    c = line({"kind": "case", "exercise": "x", "case": 0, "seq": 2})
    data = a + b + c
    segments = [
        (channel.HIDDEN, "x_check", 0, len(a)),
        ("cell", "cell 9", len(a), len(data)),
    ]
    got = channel.parse(data, segments, key)
    assert [e["seq"] for e in got.entries] == [0, 1]
    assert got.problems == [
        "1 case record(s) arrived outside the hidden tests (cell 9) and were ignored"
    ]


# ---- a course built from a small notebook, autograded with the documented commands ------------
LESSON = Lesson(99, "synthetic exercise", "synthetic.ipynb", (), None, "synthetic")
SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
CHECK = (
    "assert torch.allclose(double(torch.ones(2)), 2 * torch.ones(2)), 'double(ones) is not 2'\n"
    "print('✓ passed')\n"
    "### BEGIN HIDDEN TESTS\n"
    "record('s_ex1', double, torch.tensor([1.5, -2.0, 0.25]))\n"
    "record('s_ex1', double, torch.tensor([[3.0], [7.0]]))\n"
    "### END HIDDEN TESTS"
)
# a second exercise under lesson 5's RMSNorm grade_id: its spec forbids torch's normalizations,
# so the cheats that hide a forbidden call have something to hide
SOLUTION2 = (
    "def rms(x):\n    ### BEGIN SOLUTION\n"
    "    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)\n    ### END SOLUTION"
)
CHECK2 = (
    "assert torch.allclose(rms(torch.ones(1, 4)), torch.ones(1, 4), atol=1e-4), 'rms(ones) is not ones'\n"
    "print('✓ passed')\n"
    "### BEGIN HIDDEN TESTS\n"
    "record('l5_ex4', rms, torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], dtype=torch.float64))\n"
    "### END HIDDEN TESTS"
)
MARK = "cw-cheat-daemon"

#: What a cheat puts in a cell the student adds after the last check cell.
LAST_CELL = "\n# --- a cell added at the end ---\n"
#: Re-sign every hidden case as right with the sealed recorder's own key and converters (the
#: machinery dict its frame holds).
FORGE = (
    "import gc, hmac, os\n"
    "def _forge():\n"
    "    gen = next(o for o in gc.get_objects() if type(o).__name__ == 'generator' and o.__name__ == '_sentinel')\n"
    "    f = gen.gi_frame.f_locals\n"
    "    m = f['m']  # the machinery the recorder was built with: its converters\n"
    "    lines = []\n"
    "    def fake(exercise, answer, *args, **kwargs):\n"
    "        x = args[0]\n"
    "        value = 2 * x if exercise == 's_ex1' else x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)\n"
    "        case = sum(1 for e in lines if e['exercise'] == exercise)\n"
    "        lines.append({'kind': 'case', 'exercise': exercise, 'case': case,\n"
    "                      'inputs': m['fingerprint'](args, kwargs), 'calls': [], 'value': m['plain'](value)})\n"
    "    for source in f['hidden_sources']:\n"
    "        exec(source, {**globals(), 'record': fake})\n"
    "    try:\n"
    "        os.ftruncate(f['fd'], 0)\n"
    "        start = 0\n"
    "    except OSError:  # a channel that cannot be truncated: continue its numbering\n"
    "        start = f['seq'][0]\n"
    "    for seq, entry in enumerate(lines, start):\n"
    "        entry['seq'] = seq\n"
    "        body = f['to_json'](entry)\n"
    "        mac = hmac.digest(f['key'], body.encode(), 'sha256').hex()\n"
    "        os.write(f['fd'], (mac + ' ' + body + '\\n').encode())\n"
    "    f['seq'][0] = start + len(lines)\n"
)


def _wrapped_worker():
    """The worker-thread cheat, pickled (a reduce that runs exec) and marshalled (a code object)."""
    import base64
    import marshal
    import pickle
    import zlib

    source = (
        "import queue, threading\nimport torch.nn.functional as F\n"
        "_jobs, _done = queue.Queue(), queue.Queue()\n"
        "def _work():\n    while True:\n        x = _jobs.get()\n"
        "        _done.put(F.rms_norm(x, (x.shape[-1],), eps=1e-6))\n"
        "threading.Thread(target=_work, daemon=True).start()\n"
        "def _rms(x):\n    _jobs.put(x)\n    return _done.get()\n"
    )

    class Payload:
        def __reduce__(self):
            return (exec, (source,))  # no globals given: the caller's, the notebook's

    pickled = base64.b64encode(pickle.dumps(Payload())).decode()
    # the marshalled function: runs the source in the notebook's globals
    body = compile(f"def _install():\n    exec({source!r}, globals())\n", "<x>", "exec")
    install = next(c for c in body.co_consts if hasattr(c, "co_code"))
    return pickled, zlib.compress(marshal.dumps(install))


PICKLED, MARSHALLED = _wrapped_worker()

CHEATS = {
    # every check_* name prints "passed"
    "rebind_checks": "class _Ok:\n    def __getattr__(self, name):\n        return lambda *a, **k: print('✓ passed')\n"
    "checks = _Ok()\nassert_ = None\ndef double(x):\n    raise NotImplementedError()",
    # the comparison functions patched to say yes
    "patch_allclose": "import math\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
    "math.isclose = lambda *a, **k: True\ndef double(x):\n    return x",
    # a tensor subclass that answers True to allclose
    "tensor_subclass": "class Liar(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
    "        if func in (torch.allclose, torch.equal):\n            return True\n"
    "        return super().__torch_function__(func, types, args, kwargs or {})\n"
    "def double(x):\n    return torch.zeros_like(x).as_subclass(Liar)",
    # an input transformer that rewrites every later cell: no hidden record runs
    "input_transformer": "def _skip(lines):\n    return [l for l in lines if 'record(' not in l and 'assert' not in l]\n"
    "get_ipython().input_transformers_post.append(_skip)\ndef double(x):\n    return x",
    # the caller's frame: what does the hidden test hold?
    "frame_reading": "import sys\ndef double(x):\n    frame = sys._getframe(1)\n"
    "    return next((v for v in frame.f_locals.values() if isinstance(v, torch.Tensor) and v is not x), x)",
    # records forged before the hidden test runs (the file is the only writable place)
    "forged_records": "import json, os\nlog = os.environ.get('HELPERS_GRADING_LOG', 'none')\n"
    "if log != 'none':\n    with open(log, 'a') as f:\n"
    "        for case in range(2):\n            f.write(json.dumps({'exercise': 's_ex1', 'case': case, 'value': 1.0, 'calls': []}) + '\\n')\n"
    "def double(x):\n    return x",
    # a detached process that waits for grading to end, then rewrites the gradebook
    "detached_process": "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(40); "
    f'open("GRADEBOOK", "w").write("x")\', \'{MARK}\'], start_new_session=True)\n'
    "def double(x):\n    return x",
    # reading the instructor's source and another student's submission
    # the instructor's solution, read from the course folder, or another student's
    "read_instructor": "import json\ndef double(x):\n    return x\ntry:\n"
    "    nb = json.load(open('COURSE/source/lesson99/synthetic.ipynb'))\n"
    "    exec(next(''.join(c['source']) for c in nb['cells'] if 'BEGIN SOLUTION' in ''.join(c['source'])))\n"
    "    print('read the source')\nexcept OSError as e:\n    print('blocked:', type(e).__name__)",
    "read_other_student": "import json\ndef double(x):\n    return x\ntry:\n"
    "    nb = json.load(open('COURSE/submitted/instructor/lesson99/synthetic.ipynb'))\n"
    "    exec(next(''.join(c['source']) for c in nb['cells'] if 'BEGIN SOLUTION' in ''.join(c['source'])))\n"
    "    print('read a submission')\nexcept OSError as e:\n    print('blocked:', type(e).__name__)",
    # --- the bypasses of the unconfined side (one symlink stole any grade) --------------------
    # the record log pointed at a classmate's, the notebook at the instructor's source, the log
    # replaced by a folder
    "symlinks": "import os\nfor target, name in (('../../instructor/lesson99/.grading.jsonl', '.grading.jsonl'),\n"
    "                     ('COURSE/source/lesson99/synthetic.ipynb', 'synthetic.ipynb'),\n"
    "                     ('COURSE/.reference', '.reference')):\n"
    "    try:\n        os.symlink(target, name)\n    except OSError as e:\n        print('no link:', e)\n"
    "os.makedirs('.grading', exist_ok=True)\ndef double(x):\n    return x",
    # an answer that is no tensor but looks like a record of one (TypeError in the comparison)
    "record_shaped": "def double(x):\n    return {'tensor': 0}",
    # a cell the reviewer cannot parse (RecursionError in review)
    "deep_chain": "def double(x):\n    return x\nif False:\n    _ = x" + ".real" * 20_000,
    # forbidden calls hidden: TorchScript around the library's RMSNorm
    "torchscript": "import torch.nn.functional as F\n@torch.jit.script\n"
    "def _n(x: torch.Tensor) -> torch.Tensor:\n    return F.rms_norm(x, [x.shape[-1]], eps=1e-6)\n"
    "def rms(x):\n    return _n(x)",
    # ... the observers switched off by computed names
    "observers_off": "import sys\nimport torch.nn.functional as F\ndef rms(x):\n"
    "    getattr(sys, 'set' + 'profile')(None)\n"
    "    with getattr(torch._C, 'Disable' + 'TorchFunction')():\n"
    "        return F.rms_norm(x, (x.shape[-1],), eps=1e-6)",
    # ... the recorder replaced through sys.modules, and the hidden test's name for it rebound
    "replace_recorder": "import sys\n_g = sys.modules['helpers.' + 'grading']\n"
    "_g.record = lambda exercise, answer, *a, **k: None\nrecord = _g.record\n"
    "def double(x):\n    return x",
    # ... the record channel written by hand (every descriptor the kernel holds)
    "write_channel": "import io, json, os, stat\nfor fd in range(3, 64):\n    try:\n"
    "        if stat.S_ISREG(os.fstat(fd).st_mode):  # the files the kernel holds open\n"
    "            io.FileIO(fd, 'w', closefd=False).write(json.dumps({'kind': 'case', 'exercise': 's_ex1', 'seq': 0}).encode() + b'\\n')\n"
    "    except OSError:\n        pass\ndef double(x):\n    return x",
    # the hidden test's inputs replaced: torch.tensor makes zeros, the answer returns zeros
    "replace_inputs": "_tensor = torch.tensor\ntorch.tensor = lambda *a, **k: _tensor(*a, **k) * 0\n"
    "def double(x):\n    return torch.zeros_like(x)",
    # --- records rewritten after their cases (the key, the channel and the hidden tests' sources
    # found through the garbage collector in the sealed recorder's frame, and every case re-signed
    # as right): in a cell added after the last check, and during the hidden tests themselves
    # (IPython's post_run_cell hook runs inside the hidden tests' request)
    "rewrite_after_cases": "def double(x):\n    return x\n\n"
    "import torch.nn.functional as F\ndef rms(x):\n    return F.rms_norm(x, (x.shape[-1],), eps=1e-6)\n"
    + LAST_CELL
    + FORGE
    + "_forge()",
    "rewrite_during_hidden_tests": "def double(x):\n    return x\n\n"
    "import torch.nn.functional as F\ndef rms(x):\n    return F.rms_norm(x, (x.shape[-1],), eps=1e-6)\n"
    + FORGE
    # the hook acts in the hidden tests' request only (the name split, so not in this cell's own)
    + 'def _after(result):\n    if "record(\'l5_" + "ex4\'" in result.info.raw_cell:\n'
    "        _forge()\n"
    "get_ipython().events.register('post_run_cell', _after)",
    # --- a worker thread started by the solution cell: the answer only hands work to it
    "worker_thread": "import queue, threading\nimport torch.nn.functional as F\n"
    "_jobs, _done = queue.Queue(), queue.Queue()\n"
    "def _work():\n    while True:\n        x = _jobs.get()\n"
    "        _done.put(F.rms_norm(x, (x.shape[-1],), eps=1e-6))\n"
    "threading.Thread(target=_work, daemon=True).start()\n"
    "def rms(x):\n    _jobs.put(x)\n    return _done.get()",
    # ... the same with the low-level _thread (no threading.Thread object, no threading hook)
    "raw_thread": "import queue, _thread\nimport torch.nn.functional as F\n"
    "_jobs, _done = queue.Queue(), queue.Queue()\n"
    "def _work():\n    while True:\n        x = _jobs.get()\n"
    "        _done.put(F.rms_norm(x, (x.shape[-1],), eps=1e-6))\n"
    "_thread.start_new_thread(_work, ())\n"
    "def rms(x):\n    _jobs.put(x)\n    return _done.get()",
    # --- the worker-thread cheat wrapped so that its source shows none of it
    "pickled_code": "import base64, pickle\n"
    f"pickle.loads(base64.b64decode({PICKLED!r}))\n"
    "def rms(x):\n    return _rms(x)",
    "compressed_code": "import zlib, marshal, types\n"
    f"types.FunctionType(marshal.loads(zlib.decompress({MARSHALLED!r})), globals())()\n"
    "def rms(x):\n    return _rms(x)",
}

# Honest answers written another way: full marks (and nothing on the review list)
HONEST = {
    "honest_sum": "def double(x):\n    return x + x\n\n"
    "def rms(x):\n    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)",
    "honest_numpy": "import numpy as np\n\ndef double(x):\n    return torch.from_numpy(np.multiply(x.numpy(), 2))\n\n"
    "def rms(x):\n    y = x.to(torch.float32)  # float32 inside, the input's dtype out\n"
    "    return (y / y.square().mean(-1, keepdim=True).add(1e-6).sqrt()).to(x.dtype)",
    "honest_inplace": "def double(x):\n    y = x.clone()\n    y.mul_(2)\n    return y\n\n"
    "def rms(x):\n    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True) / x.shape[-1] ** 0.5\n"
    "    out = x.clone()\n    out /= torch.sqrt(norm**2 + 1e-6)\n    return out",
}
#: submissions whose folder holds symbolic links (made outside the kernel, e.g. in an upload)
LINKED = ("linked", "dangling", "stealer")


def _submission(release_nb, cheat: str | None = None, answer: str | None = None):
    """The release with the first solution cell replaced by the cheat (or ``answer``); a cheat
    that defines ``rms`` goes in the second solution cell, the first keeps its stub."""
    nb = nbformat.reads(nbformat.writes(release_nb), as_version=4)
    text = answer if answer is not None else CHEATS[cheat]
    text, *added = text.split(LAST_CELL)
    nb.cells += [nbformat.v4.new_code_cell(a) for a in added]  # cells added after the last check
    cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    if answer is None and "def rms" in text:
        cells[1].source = text
    else:
        cells[0].source = text
    return nb


def _honest(release_nb, answer: str):
    """Both solution cells answered (the functions split at the blank line before ``def rms``)."""
    nb = nbformat.reads(nbformat.writes(release_nb), as_version=4)
    first, second = answer.split("\n\ndef rms", 1)
    cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    head = first.split("def double", 1)[0]
    cells[0].source, cells[1].source = first, head + "def rms" + second
    return nb


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip(
            "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (.ci/run does)"
        )
    base = tmp_path_factory.mktemp("grading")
    notebooks, course = base / "notebooks", base / "course"
    notebooks.mkdir()
    cell = code_cell
    nb = python_notebook(
        [
            # a magic first, as in the lessons (the review strips it before parsing)
            cell(
                "%matplotlib inline\nimport torch\nfrom helpers.grading import record\nchecks = None"
            ),
            cell(SOLUTION, solution=True, grade=False, locked=False, grade_id="s_ex1"),
            cell(CHECK, solution=False, grade=True, locked=True, points=2, grade_id="s_ex1_check"),
            cell(SOLUTION2, solution=True, grade=False, locked=False, grade_id="l5_ex4"),
            cell(
                CHECK2, solution=False, grade=True, locked=True, points=2, grade_id="l5_ex4_check"
            ),
        ]
    )
    nbformat.write(nb, notebooks / LESSON.notebook)
    cw.release([LESSON], course, notebooks=notebooks)
    release_nb = nbformat.read(cw.student_notebook(LESSON, course), as_version=4)
    gradebook = course / "gradebook.db"
    subs = {
        "instructor": nbformat.read(notebooks / LESSON.notebook, as_version=4),
        "wrong": _submission(release_nb, answer="def double(x):\n    return 2.02 * x"),
        "warns": _submission(
            release_nb,
            answer="import warnings\ndef double(x):\n    warnings.warn('a harmless warning')\n    return x + x",
        ),
        "blank": release_nb,
    }
    for name, answer in HONEST.items():
        subs[name] = _honest(release_nb, answer)
    for name in CHEATS:
        sub = _submission(release_nb, name)
        for c in sub.cells:
            c.source = c.source.replace("GRADEBOOK", str(gradebook)).replace("COURSE", str(course))
        subs[name] = sub
    downloads = base / "downloads"
    downloads.mkdir()
    for name, sub in subs.items():
        nbformat.write(sub, downloads / f"{name}.ipynb")
    malformed = json.loads(nbformat.writes(subs["instructor"]))
    malformed["cells"][2]["metadata"]["nbgrader"]["grade_id"] = "renamed"
    (downloads / "malformed.ipynb").write_text(json.dumps(malformed), encoding="utf-8")

    def run(*args):  # the documented command line, in this process (lesson99 is not in the course)
        return run_coursework(cw, LESSON, course, *args)

    start = time.perf_counter()
    assert run("collect", "lesson99", str(downloads)).returncode == 0
    # submissions whose folder holds links (an upload, an archive): the notebook a symlink to the
    # instructor's source, a dangling one, and a blank notebook beside a link to a classmate's log
    source = course / "source" / "lesson99" / LESSON.notebook
    for sid in LINKED:
        folder = course / "submitted" / sid / "lesson99"
        folder.mkdir(parents=True)
    (course / "submitted" / "linked" / "lesson99" / LESSON.notebook).symlink_to(source)
    (course / "submitted" / "dangling" / "lesson99" / LESSON.notebook).symlink_to(base / "nowhere")
    stealer = course / "submitted" / "stealer" / "lesson99"
    nbformat.write(release_nb, stealer / LESSON.notebook)
    (stealer / ".grading.jsonl").symlink_to("../../instructor/lesson99/.grading.jsonl")
    source_before = (source.read_bytes(), source.stat().st_mode)
    before = gradebook.stat().st_mtime
    graded = run("autograde", "lesson99", "--jobs", "2")
    seconds = time.perf_counter() - start
    feedback = cw.nbgrader(course, "generate_feedback", "lesson99", "--force", check=False)
    return {
        "course": course,
        "out": graded,
        "seconds": seconds,
        "gradebook_before": before,
        "source_before": source_before,
        "feedback": feedback,
    }


def _score_lines(out: str) -> dict[str, str]:
    return {line.split(":")[0]: line for line in out.splitlines() if "/4" in line}


@needs_bwrap
@pytest.mark.slow
def test_grading_honest_answers(synthetic):
    lines = _score_lines(synthetic["out"].stdout)
    assert "4/4" in lines["instructor"], synthetic["out"].stdout
    assert "2/4" in lines["warns"], "a correct answer that warns keeps its points"
    assert "0/4" in lines["wrong"] and "0/4" in lines["blank"]


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(HONEST))
def test_grading_honest_answers_written_another_way_get_full_marks(synthetic, variant):
    lines = _score_lines(synthetic["out"].stdout)
    assert lines[variant].startswith(f"{variant}: 4/4"), synthetic["out"].stdout


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_grading_each_cheat_scores_zero(synthetic, cheat):
    lines = _score_lines(synthetic["out"].stdout)
    assert lines[cheat].startswith(f"{cheat}: 0/4"), (
        synthetic["out"].stdout + synthetic["out"].stderr
    )


@needs_bwrap
@pytest.mark.slow
def test_grading_links_in_a_submission_are_removed_and_trusted_for_nothing(synthetic):
    out, err = synthetic["out"].stdout, synthetic["out"].stderr
    lines = _score_lines(out)
    for sid in LINKED:
        assert lines[sid].startswith(f"{sid}: 0/4"), out + err
        assert f"{sid}: removed from the submission:" in err, err
    # the notebook itself was a link: nothing to grade, a zero with the reason
    assert "linked: NOT GRADED (0 points)" in err and "dangling: NOT GRADED (0 points)" in err
    # nbgrader wrote and chmod-ed nothing through them: the instructor's source is as it was
    source = synthetic["course"] / "source" / "lesson99" / LESSON.notebook
    assert (source.read_bytes(), source.stat().st_mode) == synthetic["source_before"]
    assert "4/4" in lines["instructor"]


@needs_bwrap
@pytest.mark.slow
def test_grading_feedback_shows_no_hidden_test(synthetic):
    pages = sorted((synthetic["course"] / "feedback").glob("*/lesson99/*.html"))
    found = {p.parent.parent.name for p in pages}
    assert found >= {"instructor", "wrong", "blank"}, synthetic["feedback"].stderr[-3000:]
    instructor = synthetic["course"] / "feedback" / "instructor" / "lesson99" / "synthetic.html"
    assert "✓ passed" in instructor.read_text(encoding="utf-8")  # the visible checks are shown
    for page in pages:
        html = page.read_text(encoding="utf-8")
        for hidden in ("BEGIN HIDDEN", "record('s_ex1'", "record('l5_ex4'", "1.5, -2.0, 0.25"):
            assert hidden not in html, (page, hidden)


@needs_bwrap
@pytest.mark.slow
def test_grading_cheats_are_on_the_review_list(synthetic):
    out = synthetic["out"].stdout
    review = out[out.index("review") :]
    for cheat in ("rebind_checks", "patch_allclose", "tensor_subclass", "input_transformer",
                  "frame_reading", "forged_records", "detached_process", "symlinks",
                  "deep_chain", "torchscript", "observers_off", "replace_recorder",
                  "write_channel", "replace_inputs", "rewrite_after_cases",
                  "rewrite_during_hidden_tests", "worker_thread", "raw_thread", "pickled_code",
                  "compressed_code"):  # fmt: skip
        assert f"  {cheat}  " in review, (cheat, review)
    for honest in ("instructor", "wrong", "warns", "blank", *HONEST):
        assert f"  {honest}  " not in review, (honest, review)


@needs_bwrap
@pytest.mark.slow
def test_records_written_after_a_case_are_not_trusted(synthetic):
    """The sealed recorder's key, descriptor and converters taken through the garbage collector,
    every case re-signed as right: after the last check (a cell the student added) and inside
    the hidden tests' own request (IPython's post_run_cell hook). What arrived during each
    hidden-test request is what counts; the rewrite is reported, and the honest notebooks of the
    same run keep full marks."""
    lines = _score_lines(synthetic["out"].stdout)
    for cheat in ("rewrite_after_cases", "rewrite_during_hidden_tests"):
        assert lines[cheat].startswith(f"{cheat}: 0/4"), synthetic["out"].stdout
    for honest in ("instructor", *HONEST):
        assert lines[honest].startswith(f"{honest}: 4/4"), synthetic["out"].stdout
    logs = synthetic["course"] / ".grading" / "log" / "lesson99"

    def logged(student):
        return json.loads((logs / f"{student}.json").read_text(encoding="utf-8"))

    after = logged("rewrite_after_cases")  # re-signed, numbered on: arrived after the checks
    assert any("outside the hidden tests" in p for p in after["problems"]), after
    during = logged("rewrite_during_hidden_tests")  # taken, but after the flags it raised
    assert "gc.get_objects" in " ".join(during["flags"]), during
    for honest in ("instructor", *HONEST):
        assert not logged(honest)["problems"] and not logged(honest)["flags"], logged(honest)


@needs_bwrap
@pytest.mark.slow
def test_a_thread_the_solution_cell_started_is_seen_at_each_case(synthetic):
    """A worker thread (threading, or _thread's own) started when the solution cell runs; the
    answer only hands it the work: every case is marked as run in another thread, and the
    exercise, which forbids torch's normalizations, scores 0. The kernel's own threads do not
    count: the honest answers keep full marks."""
    lines = _score_lines(synthetic["out"].stdout)
    for cheat in ("worker_thread", "raw_thread", "pickled_code", "compressed_code"):
        assert lines[cheat].startswith(f"{cheat}: 0/4"), synthetic["out"].stdout
    for honest in ("instructor", *HONEST):
        assert lines[honest].startswith(f"{honest}: 4/4"), synthetic["out"].stdout


@needs_bwrap
@pytest.mark.slow
def test_grading_one_malformed_submission_is_named_and_the_others_graded(synthetic):
    assert "malformed: NOT GRADED" in synthetic["out"].stderr
    assert "4/4" in _score_lines(synthetic["out"].stdout)["instructor"]


@needs_bwrap
@pytest.mark.slow
def test_grading_confinement_holds(synthetic):
    course = synthetic["course"]
    # the detached process was killed with the kernel's PID namespace
    time.sleep(1)
    leftover = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "a process the notebook started outlived its grading"
    # the student could see neither the instructor's source nor another submission
    for cheat in ("read_instructor", "read_other_student"):
        graded = nbformat.read(
            course / "autograded" / cheat / "lesson99" / LESSON.notebook, as_version=4
        )
        text = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
        assert "blocked: FileNotFoundError" in text, text
    assert (course / "gradebook.db").read_bytes()[:15] == b"SQLite format 3"


# ---- the capstone's release, cheated on: each cheat loses what it targets ---------------------
CAPSTONE = next(lesson for lesson in LESSONS if lesson.topic == "audit")
CAPSTONE_CHEATS = {
    # every check name prints "passed", every answer a stub: nothing earned
    "rebind_checks": {
        "l10_ex1": "class _Ok:\n    def __getattr__(self, name):\n        return lambda *a, **k: print('✓ passed')\n\n"
        "checks = _Ok()\n\ndef fix_reused_blocks(model):\n    raise NotImplementedError()",
    },
    # the audit patched to pass everything, the model left broken
    "patch_audit": {
        "l10_ex1": "import helpers.checklist, helpers.checks.audit as _a\n"
        "_a.audit = lambda m, **k: type('R', (), {'__getitem__': lambda s, k: type('C', (), "
        "{'status': 'passed', 'finding': 'tied'})(), '__iter__': lambda s: iter(())})()\n"
        "def fix_reused_blocks(model):\n    return model",
    },
    # exercise 1 answered with a fresh model, exercise 3 with the library's class
    "fresh_model": {
        "l10_ex1": "def fix_reused_blocks(model):\n    return TransformerLM(**checks.SETTINGS)",
        "l10_ex3": "class RepairedLM(TransformerLM):\n    pass",
    },
    # exercise 2 left untied (an audit passes untied models on K5)
    "untied": {"l10_ex2": "def tie_transposed(model):\n    return model"},
    # the hidden test's input replaced: the broken model class it builds is the healthy one, and
    # the model is returned unrepaired
    "replace_inputs": {
        "l10_ex1": "import sys\nsys.modules['helpers.checks.audit'].ReusedBlockLM = TransformerLM\n"
        "def fix_reused_blocks(model):\n    return model",
    },
}


def _capstone_submission(release_nb, answers: dict[str, str]):
    nb = nbformat.reads(nbformat.writes(release_nb), as_version=4)
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nb


@pytest.fixture(scope="module")
def capstone(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.skip(
            "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (.ci/run does)"
        )
    base = tmp_path_factory.mktemp("capstone")
    course, downloads = base / "course", base / "downloads"
    downloads.mkdir()
    assert cw.main(["--course-dir", str(course), "release", "--lessons", str(CAPSTONE.number)]) == 0
    release_nb = nbformat.read(cw.student_notebook(CAPSTONE, course), as_version=4)
    instructor = nbformat.read(ROOT / "notebooks" / CAPSTONE.notebook, as_version=4)
    solutions = {
        c.metadata.nbgrader["grade_id"]: c.source
        for c in instructor.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }
    nbformat.write(instructor, downloads / "instructor.ipynb")
    warned = {
        k: "import warnings\nwarnings.warn('a harmless warning')\n" + v
        for k, v in solutions.items()
    }
    nbformat.write(_capstone_submission(release_nb, warned), downloads / "warns.ipynb")
    for name, answers in CAPSTONE_CHEATS.items():
        full = {**solutions, **answers} if name in ("fresh_model", "untied") else answers
        nbformat.write(_capstone_submission(release_nb, full), downloads / f"{name}.ipynb")
    aid = cw.assignment_id(CAPSTONE)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cw.main(["--course-dir", str(course), "collect", aid, str(downloads)]) == 0
        assert cw.main(["--course-dir", str(course), "autograde", aid]) == 0
    return cw.scores(CAPSTONE, course), out.getvalue()


@needs_bwrap
@pytest.mark.slow
def test_capstone_cheats_lose_what_they_target(capstone):
    scores, out = capstone
    # answers graded by hand (a written explanation) are pending, not part of what is checked here
    by_hand = {m.grade_id for m in cw.manual_answers(ROOT / "notebooks" / CAPSTONE.notebook)}
    scores = {sid: {k: v for k, v in g.items() if k not in by_hand} for sid, g in scores.items()}
    full = {k: most for k, (_, most) in scores["instructor"].items()}
    assert all(s == m for s, m in scores["instructor"].values()), scores["instructor"]
    assert all(s == m for s, m in scores["warns"].values()), "a warning cost points"
    for name, answers in CAPSTONE_CHEATS.items():
        got = scores[name]
        for check, (score, _most) in got.items():
            targeted = check.removesuffix("_check") in answers
            if targeted:
                assert score == 0, (name, check, got)
            elif name in ("fresh_model", "untied"):
                assert score == full[check], (name, check, got)
    for name in ("rebind_checks", "patch_audit", "replace_inputs"):
        assert f"  {name}  " in out, (name, out)


def test_an_answer_that_calls_the_lessons_own_helper_is_seen_and_refused(monkeypatch, tmp_path):
    import helpers

    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    record("l4b_ex2", lambda h, n: helpers.alibi_bias(h, n, dtype=torch.float64), 8, 4)
    distance = (torch.arange(4.0)[:, None] - torch.arange(4.0)[None]).abs().double()
    record(
        "l4b_ex2",
        lambda h, n: -(2 ** (-8 * torch.arange(1.0, h + 1) / h)).double()[:, None, None] * distance,
        8,
        4,
    )
    by_hand, borrowed = (json.loads(line) for line in reversed(log.read_text().splitlines()))
    assert "helpers.positional.alibi_bias" in borrowed["calls"]
    assert not any(c.startswith("helpers.") for c in by_hand["calls"])
    reference = {0: [{**by_hand, "case": 0}]}
    verdict = judge("l4b_ex2", reference, {0: [{**borrowed, "case": 0}]})
    assert not verdict.correct and "forbids" in verdict.message
    assert judge("l4b_ex2", reference, reference).correct


def test_a_helper_the_exercise_allows_keeps_its_points_and_its_inner_calls_are_seen(
    monkeypatch, tmp_path
):
    """sinusoidal_encoding_at (lesson 4's encoding) calls angle_rates internally: an answer
    reading the wavelength off the encoding at position 1 is honest and keeps its points (l4_ex2
    forbids nothing); what the helper called for it is recorded too (an exercise that forbids a
    course function forbids it at any depth: tests/test_grading_answers.py)."""
    import math

    import helpers

    def via_encoding(i, d):
        pe = helpers.sinusoidal_encoding_at([1.0], d, dtype=torch.float64)
        return 2 * math.pi / math.atan2(float(pe[0, 2 * i]), float(pe[0, 2 * i + 1]))

    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    for case in ((2, 64), (31, 64)):
        record("l4_ex2", lambda i, d: 2 * math.pi * 10000 ** (2 * i / d), *case)
        record("l4_ex2", via_encoding, *case)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    ref = {c: [{**entries[2 * c], "case": c}] for c in range(2)}
    got = {c: [{**entries[2 * c + 1], "case": c}] for c in range(2)}
    assert "helpers.positional.sinusoidal_encoding_at" in got[0][0]["calls"]
    assert any("angle_rates" in name for name in got[0][0]["calls"])
    verdict = judge("l4_ex2", ref, got)
    assert verdict.correct, verdict.message


# ---- what an adversarial review hid from the grader, and is seen now --------------------------


def _judged(exercise, tmp_path, monkeypatch, honest, cheat, *args):
    """Record ``honest`` (the reference) and ``cheat`` on the same case; judge the cheat."""
    log = tmp_path / f"{exercise}.jsonl"
    monkeypatch.setenv("HELPERS_GRADING_LOG", str(log))
    record(exercise, honest, *args)
    record(exercise, cheat, *args)
    ref, got = (json.loads(line) for line in log.read_text().splitlines())
    verdict = judge(exercise, {0: [{**ref, "case": 0}]}, {0: [{**got, "case": 0}]})
    assert judge(exercise, {0: [{**ref, "case": 0}]}, {0: [{**ref, "case": 0}]}).correct
    return got, verdict


def test_a_helper_run_from_a_copy_of_its_code_is_still_seen(monkeypatch, tmp_path):
    import types

    from helpers import positional

    code = positional.apply_rotary.__code__.replace(co_filename="<mine>")
    copy = types.FunctionType(code, {**vars(positional), "__name__": "helpers.grading"}, "mine")
    copy.__defaults__ = positional.apply_rotary.__defaults__
    x = torch.randn(6, 8, dtype=torch.float64)
    want = positional.apply_rotary(x)  # computed here, outside the records
    torch.testing.assert_close(copy(x), want)  # the copy computes the answer
    # l4b_ex1's spec forbids apply_rotary (the copy runs under a grading-module name, too)
    got, verdict = _judged("l4b_ex1", tmp_path, monkeypatch, lambda x: want.clone(), copy, x)
    assert "helpers.positional.apply_rotary" in got["calls"]
    assert not verdict.correct and "forbids" in verdict.message


def test_a_forbidden_call_in_another_thread_is_refused(monkeypatch, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    def in_a_thread(x):
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(torch.nn.functional.rms_norm, x, (x.shape[-1],)).result()

    def by_hand(x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps)

    x = torch.randn(3, 8, dtype=torch.float64)
    got, verdict = _judged("l5_ex4", tmp_path, monkeypatch, by_hand, in_a_thread, x)
    assert "rms_norm" not in got["calls"]  # torch's mode does not see into the thread...
    assert "<another thread>" in got["calls"]  # ...but the thread is seen
    assert not verdict.correct and "forbids" in verdict.message


def _rms_by_hand(x):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)


def test_torch_switching_dynamo_off_around_manual_seed_is_no_compiled_code(monkeypatch, tmp_path):
    """Once anything imports torch._dynamo (an optimizer does, in a demonstration cell or the
    student's own), torch.manual_seed runs inside torch's own dynamo-disabling wrapper: an answer
    (or a hidden test's wrapper) that seeds is not code the grader cannot see into."""
    import torch._dynamo  # noqa: F401 - wraps torch.manual_seed in torch._disable_dynamo

    assert torch.manual_seed is not torch.random.manual_seed  # the wrapper is there

    def seeds_then_computes(x):
        torch.manual_seed(0)
        return _rms_by_hand(x)

    x = torch.randn(3, 8, dtype=torch.float64)
    got, verdict = _judged("l5_ex4", tmp_path, monkeypatch, _rms_by_hand, seeds_then_computes, x)
    assert "<torch.compile>" not in got["calls"] and "<TorchScript>" not in got["calls"]
    assert verdict.correct, verdict.message


def test_modules_and_optimizers_after_torch_compile_ran_are_no_compiled_code(monkeypatch, tmp_path):
    """Once torch.compile has run anywhere in the process (a cell of the student's, another
    test), dynamo patches nn.Module.__init__ to tag every module built after; optimizers' steps
    run inside dynamo's DisableContext and ask is_compiling(). None of that runs compiled code:
    an honest answer that builds a module, copies it or steps an optimizer keeps its marks (the
    05b exercise's honest nn.LayerNorm answer lost them in CI for this)."""
    import copy

    torch.compile(lambda a: a * 2, backend="eager")(torch.ones(3))  # dynamo's patches installed

    def builds_modules(x):
        norm = copy.deepcopy(torch.nn.Identity())
        p = torch.nn.Parameter(x.clone())
        for opt in (torch.optim.SGD([p], lr=0.0), torch.optim.AdamW([p], lr=0.0)):
            (p * p).sum().backward()
            opt.step()
        return _rms_by_hand(norm(p.detach()))

    x = torch.randn(3, 8, dtype=torch.float64)
    got, verdict = _judged("l5_ex4", tmp_path, monkeypatch, _rms_by_hand, builds_modules, x)
    assert "<torch.compile>" not in got["calls"] and "<TorchScript>" not in got["calls"]
    assert verdict.correct, verdict.message


@pytest.mark.parametrize("behind_the_wrapper", [False, True], ids=["compiled", "compiled, wrapped"])
def test_compiled_code_is_seen_even_behind_torchs_dynamo_wrapper(
    monkeypatch, tmp_path, behind_the_wrapper
):
    compiled = torch.compile(_rms_by_hand, backend="eager")
    run = torch._disable_dynamo(compiled) if behind_the_wrapper else compiled

    def answer(x):  # the student's function, calling the compiled one
        return run(x)

    x = torch.randn(3, 8, dtype=torch.float64)
    got, verdict = _judged("l5_ex4", tmp_path, monkeypatch, _rms_by_hand, answer, x)
    assert "<torch.compile>" in got["calls"]
    assert not verdict.correct  # forbidden, or (on the first compile) the modes were switched off


@pytest.mark.parametrize(
    "cheat",
    [
        # the layer norm of [x, -x] is RMSNorm, and so is local response norm with beta 1/2
        lambda x: helpers_LayerNorm_of_mirror(x),
        lambda x: torch.nn.functional.local_response_norm(
            x.reshape(-1, x.shape[-1], 1),
            2 * x.shape[-1] - 1,
            alpha=(2 * x.shape[-1] - 1) / x.shape[-1],
            beta=0.5,
            k=1e-6,
        ).reshape(x.shape),
    ],
    ids=["course LayerNorm of [x, -x]", "local_response_norm"],
)
def test_rmsnorm_by_another_normalization_is_refused(monkeypatch, tmp_path, cheat):
    def by_hand(x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)

    x = torch.randn(3, 8, dtype=torch.float64)
    torch.testing.assert_close(cheat(x), by_hand(x), rtol=1e-5, atol=1e-6)  # it is the answer
    got, verdict = _judged("l5_ex4", tmp_path, monkeypatch, by_hand, cheat, x)
    assert not verdict.correct and "forbids" in verdict.message, got["calls"]


def helpers_LayerNorm_of_mirror(x):
    from helpers import LayerNorm

    d = x.shape[-1]
    norm = LayerNorm(2 * d, eps=1e-6).double()
    return norm(torch.cat([x, -x], dim=-1))[..., :d]


def test_transformers_is_refused_everywhere(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    from transformers.generation.logits_process import TopPLogitsWarper

    def by_hand(logits):
        return logits.softmax(-1)

    def borrowed(logits):
        return TopPLogitsWarper(1.0)(None, logits).softmax(-1)

    logits = torch.randn(2, 9, dtype=torch.float64)
    got, verdict = _judged("l9_ex3", tmp_path, monkeypatch, by_hand, borrowed, logits)
    assert any(c.startswith("transformers.") for c in got["calls"])
    assert not verdict.correct and "transformers." in verdict.message


@needs_bwrap
@pytest.mark.slow
def test_grading_a_rerun_grades_nobody_twice_and_keeps_every_grade(synthetic):
    course = synthetic["course"]
    before = cw.scores(LESSON, course)
    out, err = io.StringIO(), io.StringIO()
    known = cw._lesson
    cw._lesson = lambda arg: LESSON if arg == "lesson99" else known(arg)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert cw.main(["--course-dir", str(course), "autograde", "lesson99"]) == 0
    finally:
        cw._lesson = known
    students = len(before)
    assert f"{students} submission(s) graded before and unchanged since" in err.getvalue(), err
    assert "graded, " not in err.getvalue()  # no progress line: nobody was graded again
    assert cw.scores(LESSON, course) == before


@needs_bwrap
@pytest.mark.slow
def test_grading_csv_and_summary(synthetic):
    import csv

    course = synthetic["course"]
    out = io.StringIO()
    n = cw.write_csv([LESSON], course, out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    header, possible, students = rows[0], rows[1], {r[2]: r for r in rows[2:]}
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert header[5:] == [
        "lesson99 s_ex1 (2)",
        "lesson99 l5_ex4 (2)",
        "lesson99 late penalty",
        "lesson99 total",
    ]
    assert possible[0] == "Points Possible" and possible[5:] == ["2", "2", "0", "4"]
    assert n == len(students) == len(cw.scores(LESSON, course))
    assert students["instructor"][5:] == ["2", "2", "0", "4"]
    assert students["warns"][5:] == ["2", "0", "0", "2"]
    assert students["blank"][5:] == ["0", "0", "0", "0"]
    rows = {check: (mean, full) for check, _, mean, full in cw.summary(LESSON, course)}
    table = cw.scores(LESSON, course)
    full_s1 = sum(g["s_ex1_check"][0] == 2 for g in table.values()) / len(table)
    assert rows["s_ex1_check"][1] == pytest.approx(full_s1) and 0 < full_s1 < 1
