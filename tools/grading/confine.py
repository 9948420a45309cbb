"""Start the grading kernel inside a bubblewrap sandbox (the confined kernelspec's argv).

    python tools/grading/confine.py CONNECTION_FILE

nbgrader's autograder (through :class:`grading.execute.ConfinedExecute`) starts this in place of
the plain kernel. The environment names two files in a folder private to the grader, which the
sandbox does not contain: ``GRADING_STARTUP`` (what the grader tells the recorder: the channel's
key, the seeds, the hidden tests) and ``GRADING_RECORDS`` (the channel: a Unix socket the grader
listens on, ``grading.channel``). Both are opened here, outside the sandbox, and passed to the
kernel as open file descriptors (``helpers._grading_kernel``); the notebook's code never has their
paths. The kernel,
and so the student's code, runs:

* as the unprivileged user ``nobody`` in a user namespace of its own, with no capabilities;
* in a PID namespace of its own: when the kernel is shut down, every process the notebook
  started (a detached daemon included) is killed with it;
* in a network namespace of its own, with nothing but a loopback device of its own: no
  connection to the outside or to the grader's machine (its loopback included). The kernel talks
  to the grader over Unix sockets (Jupyter's transport "ipc") in a folder of their own, bound into
  the sandbox: the only writable place outside the sandbox's own memory;
* with a file system that holds only what a kernel needs, read-only: the system's libraries, the
  Python installation and its virtual environment, the course's ``helpers`` package; the working
  folder ``/grading`` and ``/tmp`` are fresh in-memory file systems of their own
  (``GRADING_TMPFS_MB`` each, default 512), gone with the kernel. No folder of the course (the
  gradebook, the instructor's source, any student's work, the folder nbgrader writes the graded
  notebook to) and none of the grading tools is in the sandbox at all;
* under limits: address space (``GRADING_MEMORY_MB``, default 4096), CPU time
  (``GRADING_CPU_SECONDS``, default 900), the size of any file it writes (``GRADING_FILE_MB``,
  default 256) and wall-clock time (``GRADING_WALL_SECONDS``, default 1200) for the whole
  notebook; nbgrader's own per-cell timeout comes on top;
* with one compute thread (``OMP_NUM_THREADS``; ``GRADING_THREADS`` to change it): ``--jobs N``
  grades N students at once, each kernel on a core of its own.

Bubblewrap (Debian's ``bubblewrap``) is used because it is small, audited, used by Flatpak, and
needs no daemon; as root (CI) it creates the namespaces directly.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import stat
import sys
from pathlib import Path

NOBODY = 65534
#: The kernel's working folder inside the sandbox (an in-memory file system).
WORKDIR = "/grading"


def _ro_binds() -> list[str]:
    """Read-only paths the kernel needs: system libraries, Python, the venv, helpers."""
    import importlib.util

    # the course package, as this environment installs it: found, not imported (importing it
    # imports torch, about 2 s of CPU per student for a path)
    spec = importlib.util.find_spec("helpers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("confine: the course's helpers package is not installed here")
    helpers_dir = Path(next(iter(spec.submodule_search_locations))).resolve()
    paths = ["/usr", "/etc"]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.exists(link):
            paths.append(link)
    paths += [sys.base_prefix, sys.prefix, str(helpers_dir)]
    args: list[str] = []
    for path in dict.fromkeys(paths):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def open_channel(startup: str, records: str) -> tuple[int, int]:
    """Open the startup file (read, a regular file, no symlink) and connect to the records
    channel (the Unix socket the grader listens on, ``grading.channel.Receiver``): both in the
    grader's private folders. What the kernel writes to the socket has left the sandbox: it
    cannot be read back, rewritten or truncated from inside."""
    fd_in = os.open(startup, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd_in).st_mode):
        raise SystemExit(f"confine: {startup} is not a regular file")
    if not stat.S_ISSOCK(os.lstat(records).st_mode):
        raise SystemExit(f"confine: {records} is not the grader's socket")
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    channel.connect(records)
    channel.shutdown(socket.SHUT_RD)  # the kernel only writes
    fd_out = channel.detach()
    for fd in (fd_in, fd_out):
        os.set_inheritable(fd, True)
    return fd_in, fd_out


def command(connection_file: str, fd_in: int, fd_out: int) -> list[str]:
    """The bwrap command line that runs the grading kernel confined."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit(
            "confine: bubblewrap (bwrap) is not installed; install Debian's `bubblewrap` "
            "(apt-get install bubblewrap), or grade without confinement at your own risk"
        )
    connection_file = str(Path(connection_file).resolve())
    sockets = str(_sockets_folder(connection_file))
    wall = os.environ.get("GRADING_WALL_SECONDS", "1200")
    tmpfs = str(int(os.environ.get("GRADING_TMPFS_MB", "512")) * 1024 * 1024)
    threads = str(max(1, int(os.environ.get("GRADING_THREADS", "1"))))
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
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        # a private /tmp first: the read-only binds below may lie under /tmp (a checkout or
        # pytest's folders), and a later mount would hide them
        "--size",
        tmpfs,
        "--tmpfs",
        "/tmp",
        *_ro_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        tmpfs,
        "--tmpfs",
        WORKDIR,
        "--bind",  # the kernel's Unix sockets and its connection file, in their own folder
        sockets,
        sockets,
        "--chdir",
        WORKDIR,
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
        # one thread per kernel: ``--jobs N`` runs N kernels at once, and the lessons' models
        # are small (several lessons set one thread themselves); GRADING_THREADS to change it
        "--setenv",
        "OMP_NUM_THREADS",
        threads,
        "--setenv",
        "MKL_NUM_THREADS",
        threads,
        "--setenv",
        "HELPERS_GRADING_STARTUP_FD",
        str(fd_in),
        "--setenv",
        "HELPERS_GRADING_RECORDS_FD",
        str(fd_out),
        sys.executable,
        "-m",
        "helpers._grading_kernel",
        "-f",
        connection_file,
        "--HistoryManager.hist_file=:memory:",
    ]


def _sockets_folder(connection_file: str) -> Path:
    """The folder of the kernel's Unix sockets: the connection file's own folder, which must name
    transport "ipc" there (over TCP, a kernel in a sandbox without network cannot be reached)."""
    import json

    info = json.loads(Path(connection_file).read_text(encoding="utf-8"))
    folder = Path(connection_file).parent
    if info.get("transport") != "ipc" or Path(str(info.get("ip", ""))).resolve().parent != folder:
        raise SystemExit(
            "confine: the grading kernel has no network; its connection file must use transport "
            f"'ipc' with sockets beside it in {folder} (tools/grading/execute.py writes one)"
        )
    return folder


def _limits() -> None:
    memory = int(os.environ.get("GRADING_MEMORY_MB", "4096")) * 1024 * 1024
    cpu = int(os.environ.get("GRADING_CPU_SECONDS", "900"))
    size = int(os.environ.get("GRADING_FILE_MB", "256")) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: confine.py CONNECTION_FILE")
    try:
        startup, records = os.environ["GRADING_STARTUP"], os.environ["GRADING_RECORDS"]
    except KeyError:
        raise SystemExit(
            "confine: GRADING_STARTUP and GRADING_RECORDS must name the grader's files "
            "(tools/grading/execute.py sets them)"
        ) from None
    fd_in, fd_out = open_channel(startup, records)
    cmd = command(argv[0], fd_in, fd_out)
    _limits()  # inherited by bwrap and the kernel
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
