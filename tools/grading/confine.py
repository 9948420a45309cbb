"""Start an IPython kernel for grading inside a bubblewrap sandbox (the kernelspec's argv).

    python tools/grading/confine.py CONNECTION_FILE

nbgrader's autograder starts this in place of the plain kernel (``coursework.py`` writes a
kernelspec ``course-confined`` whose argv is this script). The kernel, and so the student's code,
runs:

* as the unprivileged user ``nobody`` in a user namespace of its own, with no capabilities;
* in a PID namespace of its own: when nbgrader shuts the kernel down, every process the notebook
  started (a detached daemon included) is killed with it;
* with a file system that holds only what a kernel needs, read-only: the system's libraries, the
  Python installation and its virtual environment, the course's ``helpers`` package. The folder
  nbgrader grades the notebook in is the only writable place (and a private ``/tmp``). The course
  folder (gradebook, instructor source, other students' submissions) and the grading tools are not
  in the sandbox at all;
* under limits: address space (``GRADING_MEMORY_MB``, default 4096), CPU time
  (``GRADING_CPU_SECONDS``, default 900) and wall-clock time (``GRADING_WALL_SECONDS``, default
  1200) for the whole notebook; nbgrader's own per-cell timeout (600 s) comes on top.

Bubblewrap (Debian's ``bubblewrap``) is used because it is small, audited, used by Flatpak, and
needs no daemon; as root (CI) it creates the namespaces directly.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
from pathlib import Path

NOBODY = 65534
#: Where helpers.grading.record writes, in the folder the notebook is graded in.
LOG_NAME = ".grading.jsonl"


def _ro_binds() -> list[str]:
    """Read-only paths the kernel needs: system libraries, Python, the venv, helpers."""
    import helpers  # the course package, as this environment installs it

    paths = ["/usr", "/etc"]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.exists(link):
            paths.append(link)
    paths += [sys.base_prefix, sys.prefix, str(Path(helpers.__file__).resolve().parent)]
    args: list[str] = []
    for path in dict.fromkeys(paths):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def command(connection_file: str, workdir: str) -> list[str]:
    """The bwrap command line that runs the kernel confined in ``workdir``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit(
            "confine: bubblewrap (bwrap) is not installed; install Debian's `bubblewrap` "
            "(apt-get install bubblewrap), or grade without confinement at your own risk"
        )
    connection_file = str(Path(connection_file).resolve())
    wall = os.environ.get("GRADING_WALL_SECONDS", "1200")
    return [
        shutil.which("timeout") or "/usr/bin/timeout",
        "--signal=KILL",
        wall,
        bwrap,
        "--unshare-user",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        # a private /tmp first: the read-only binds and the work folder below may lie under /tmp
        # (a checkout or pytest's folders), and a later mount would hide them
        "--tmpfs",
        "/tmp",
        *_ro_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--bind",
        workdir,
        workdir,
        "--ro-bind",
        connection_file,
        connection_file,
        "--chdir",
        workdir,
        "--clearenv",
        "--setenv",
        "PATH",
        f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "MPLCONFIGDIR",
        "/tmp/matplotlib",
        "--setenv",
        "PYDEVD_DISABLE_FILE_VALIDATION",
        "1",
        "--setenv",
        "HELPERS_GRADING_LOG",
        str(Path(workdir) / LOG_NAME),
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        connection_file,
        "--HistoryManager.hist_file=:memory:",
    ]


def _limits() -> None:
    memory = int(os.environ.get("GRADING_MEMORY_MB", "4096")) * 1024 * 1024
    cpu = int(os.environ.get("GRADING_CPU_SECONDS", "900"))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: confine.py CONNECTION_FILE")
    cmd = command(argv[0], os.getcwd())
    _limits()  # inherited by bwrap and the kernel
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
