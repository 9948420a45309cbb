"""One grading worker: nbgrader's autograde, in this process, for the students it is sent.

    python -m tools.grading.worker COURSE_DIR ASSIGNMENT     # from the repository's root

``coursework.py autograde --jobs N`` starts N of these. Each reads one student id per line on
stdin and answers one JSON line on stdout per student: ``{"student", "success", "error",
"seconds", "cpu"}``. nbgrader runs with the course folder's own configuration, so every submission
goes through the course's confined executor and verdicts (``nbgrader_config.py``). The gradebook
is SQLite: its own lock lets one writer at a time in, and the others wait (``timeout=60``).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    course_dir, assignment = Path(argv[0]).resolve(), argv[1]
    os.chdir(course_dir)  # nbgrader works in the course folder, as `nbgrader autograde` does
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    # Ctrl-C reaches the whole process group: the parent decides; this worker finishes or is
    # told to stop (SIGTERM), and its kernel is shut down on the way out
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(SystemExit(143)))
    _stop_with_parent()
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()
    config.CourseDirectory.root = str(course_dir)
    config.CourseDirectory.db_url = f"sqlite:///{course_dir / 'gradebook.db'}?timeout=60"
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    # what every student's autograde needs, loaded once at the start rather than in the first
    # student's time (the confined executor and the recorder it reads seeds from import torch)
    import helpers.grading  # noqa: F401
    import tools.grading.execute  # noqa: F401
    import tools.grading.saveverdicts  # noqa: F401

    # the answers go to a copy of stdout; fd 1 becomes stderr, so that nbgrader's and the kernels'
    # chatter (they inherit fd 1) never mixes with them
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        student = line.strip()
        if not student:
            continue
        start, cpu = time.perf_counter(), _cpu()
        try:
            result = api.autograde(assignment, student, force=True, create=True)
        except Exception as e:  # noqa: BLE001 - reported to the parent, which zeroes the student
            result = {"success": False, "error": f"{type(e).__name__}: {e}"}
        answer = {
            "student": student,
            "success": bool(result.get("success")),
            "error": _last_error(result.get("error") or result.get("log") or ""),
            "seconds": round(time.perf_counter() - start, 3),
            "cpu": round(_cpu() - cpu, 3),
        }
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


def _stop_with_parent() -> None:
    """SIGTERM this worker when the process that started it dies (Linux's PR_SET_PDEATHSIG), so
    that a grading run killed outright leaves no worker grading on."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _last_error(text: str) -> str:
    import re

    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\w(Error|Exception)\b", ln)]
    return (errors or lines or [""])[-1][:300]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
