"""The grading kernel: an IPython kernel whose recorder is sealed before any notebook code runs.

    python -m helpers._grading_kernel -f CONNECTION_FILE

The grader (``tools/grading/confine.py``, inside its sandbox) starts this instead of the plain
kernel, with two file descriptors open and named in the environment:

* ``HELPERS_GRADING_STARTUP_FD``: what the grader tells the recorder (the channel's key, the
  seeds of the hidden cases, the hidden tests' sources), read once here and closed;
* ``HELPERS_GRADING_RECORDS_FD``: the channel, a socket connected to the grader outside the
  sandbox (``tools/grading/channel.py``); the recorder writes signed lines to it, which cannot be
  read back, rewritten or truncated from inside.

The recorder is told when the kernel is about to run its first request (IPython's
``pre_execute``, once): the Python threads alive then are the kernel's own, and any other one
alive at a hidden case marks it as run in another thread (``helpers.grading.ANOTHER_THREAD``).

Both variables are removed from the environment before the kernel starts, and the startup
descriptor is closed, so the notebook's code never sees what the grader sent.
"""

from __future__ import annotations

import json
import os
import sys


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def main() -> None:
    try:
        startup = int(os.environ.pop("HELPERS_GRADING_STARTUP_FD"))
        records = int(os.environ.pop("HELPERS_GRADING_RECORDS_FD"))
    except (KeyError, ValueError):
        raise SystemExit(
            "helpers._grading_kernel: HELPERS_GRADING_STARTUP_FD and HELPERS_GRADING_RECORDS_FD "
            "must name the grader's open file descriptors (tools/grading/confine.py sets them)"
        ) from None
    config = json.loads(_read_all(startup))
    os.close(startup)
    os.environ.pop("IPYKERNEL_CELL_NAME", None)

    from helpers import grading

    ready = grading._seal(config, records)
    del config

    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(sys.argv[1:])

    def first_request(*_args):
        # the kernel's own threads (heartbeat, IOPub, control, ...) are all running by now, and
        # no notebook code has run yet: the recorder takes them as the kernel's
        app.shell.events.unregister("pre_execute", first_request)
        ready()

    app.shell.events.register("pre_execute", first_request)
    app.start()


if __name__ == "__main__":
    main()
