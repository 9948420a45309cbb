"""The grading kernel: an IPython kernel whose recorder is sealed before any notebook code runs.

    python -m helpers._grading_kernel -f CONNECTION_FILE

The grader (``tools/grading/confine.py``, inside its sandbox) starts this instead of the plain
kernel, with two file descriptors open and named in the environment:

* ``HELPERS_GRADING_STARTUP_FD``: what the grader tells the recorder (the channel's key, the
  seeds of the hidden cases, the hidden tests' sources), read once here and closed;
* ``HELPERS_GRADING_RECORDS_FD``: the channel, a file the grader created outside the sandbox's
  view; the recorder appends signed lines to it.

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

    grading._seal(config, records)
    del config

    from ipykernel import kernelapp

    kernelapp.launch_new_instance(argv=sys.argv[1:])


if __name__ == "__main__":
    main()
