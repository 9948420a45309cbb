# Over 450 lines, one file: the kernelspec runs it as a script (python confine.py), and a
# module it imported from beside it would be a second copy of one execute.py imports.
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

* as an unprivileged user of the host whoever starts the grader: started as root, this script
  drops to ``GRADING_SANDBOX_UID``/``GRADING_SANDBOX_GID`` (default 65534, ``nobody``/``nogroup``;
  no supplementary groups, no capabilities) before it starts bubblewrap, so the user namespace
  maps the kernel's user to that host user, never to root (a host file only root may read, such
  as ``/etc/shadow``, stays unreadable). Started by another user, the kernel is that user on the
  host (nothing of theirs is in the sandbox but what is listed below);
* in a user namespace of its own (no nested one: ``--disable-userns``), with no capabilities;
* in a PID namespace of its own: when the kernel is shut down, every process the notebook
  started (a detached daemon included) is killed with it;
* in a network namespace of its own, with nothing but a loopback device of its own: no
  connection to the outside or to the grader's machine (its loopback included). The kernel talks
  to the grader over Unix sockets (Jupyter's transport "ipc") in a folder of their own, bound into
  the sandbox; the kernel may create its sockets there at start-up, then the grader takes the
  right to write there away (:func:`seal_sockets`, when the grader runs as root);
* with a file system that holds only what a kernel needs, read-only: the system's libraries, the
  Python installation and its virtual environment, the course's ``helpers`` package; the working
  folder ``/grading`` and ``/tmp`` are fresh in-memory file systems of their own
  (``GRADING_TMPFS_MB`` each, default 512), ``/dev`` holds the usual devices and is read-only but
  for ``/dev/shm``, in memory too (``GRADING_SHM_MB``, default 64); all gone with the kernel. No
  folder of the course (the gradebook, the instructor's source, any student's work, the folder
  nbgrader writes the graded notebook to) and none of the grading tools is in the sandbox at all;
* under one share per student (:class:`Share`): where the host lets the grader make a control
  group (cgroup v1 or v2, as root), every process of the sandbox and every in-memory file it
  writes count against one memory budget (``GRADING_MEMORY_MB``, default 4096) and one number of
  processes and threads (``GRADING_PROCESSES``, default 512); crossing the budget kills the
  sandbox and the notebook scores 0 with that reason. Where no control group can be made, the
  grader watches the same share instead (:meth:`Share.watch`), and the run's log says which;
* under limits per process: address space (``GRADING_MEMORY_MB``), CPU time
  (``GRADING_CPU_SECONDS``, default 900), the size of any file it writes (``GRADING_FILE_MB``,
  default 256); and wall-clock time (``GRADING_WALL_SECONDS``, default 1200) for the whole
  notebook. The grader's limit per cell (``GRADING_CELL_SECONDS``, else nbgrader's
  ``Execute.timeout``, default 600) stops the sandbox outright when a cell crosses it;
* with one compute thread (``OMP_NUM_THREADS``; ``GRADING_THREADS`` to change it): ``--jobs N``
  grades N students at once, each kernel on a core of its own.

Bubblewrap (Debian's ``bubblewrap``) is used because it is small, audited, used by Flatpak, and
needs no daemon; it always runs as the unprivileged user (never set-uid, never as root), and
creates the namespaces as that user.
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


def _env_int(name: str, default: int, lowest: int = 1) -> int:
    """An integer setting from the environment, checked (a clear error naming it otherwise)."""
    raw = os.environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < lowest:
        raise SystemExit(f"confine: {name} must be a whole number >= {lowest}, not {raw!r}")
    return value


def sandbox_ids() -> tuple[int, int]:
    """(uid, gid) of the host user the sandbox runs as when the grader is root
    (``GRADING_SANDBOX_UID``, ``GRADING_SANDBOX_GID``; default 65534, ``nobody``/``nogroup``)."""
    return _env_int("GRADING_SANDBOX_UID", NOBODY), _env_int("GRADING_SANDBOX_GID", NOBODY)


def drop_privileges() -> None:
    """As root: become the sandbox's host user (:func:`sandbox_ids`) for good, with no
    supplementary group and no capability left; checked, and an error if any remains. As any
    other user: nothing to drop (the kernel runs as that user)."""
    if os.geteuid() != 0 and os.getuid() != 0:
        return
    uid, gid = sandbox_ids()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise SystemExit("confine: could not drop to the sandbox's user")
    status = Path("/proc/self/status").read_text(encoding="utf-8")
    for line in status.splitlines():
        if line.startswith(("CapEff:", "CapPrm:", "CapAmb:")) and int(line.split()[1], 16):
            raise SystemExit(f"confine: capabilities remain after dropping privileges ({line})")


def _ro_binds(stage: Path | None) -> list[str]:
    """Read-only paths the kernel needs: system libraries, Python, the venv, helpers. With a
    ``stage`` (the grader is root and is about to drop to an unprivileged user, who may not be
    allowed to reach these paths, e.g. a Python installed under /root), each is first bound, as
    root, in a mount namespace private to this process, onto a folder of ``stage`` that user can
    reach (:func:`_private_stage`); what is inside must still be readable by the sandbox's user."""
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
    for number, path in enumerate(dict.fromkeys(paths)):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path) and stage is not None:
            args += ["--ro-bind", str(_bind_onto_stage(path, stage / str(number))), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


_libc = None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None):
    import ctypes

    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)

    def enc(v):
        return None if v is None else v.encode()

    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise SystemExit(f"confine: mount {source} on {target}: {os.strerror(err)}")


MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18


def _private_stage(sockets: Path) -> Path:
    """As root: a mount namespace of this process's own (nothing it mounts is seen by the host),
    and in it a small in-memory folder beside the sockets' folder, reachable by the sandbox's
    user, where :func:`_bind_onto_stage` binds what the sandbox needs to read. The grader
    removes the (empty, on the host) folder with the sockets' one."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
        raise SystemExit(f"confine: unshare(mount): {os.strerror(ctypes.get_errno())}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    stage = stage_folder(sockets)
    stage.mkdir(mode=0o755, exist_ok=True)
    _mount("grading-stage", str(stage), "tmpfs", 0, "size=64k,mode=0755")
    return stage


def stage_folder(sockets: Path) -> Path:
    """The folder :func:`_private_stage` uses, beside the sockets' folder (the grader removes it)."""
    return Path(sockets).parent / (Path(sockets).name + ".ro")


def _bind_onto_stage(path: str, target: Path) -> Path:
    if os.path.isdir(path):
        target.mkdir(mode=0o755)
    else:
        target.touch(mode=0o644)
    _mount(path, str(target), None, MS_BIND | MS_REC, None)
    return target


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


def command(connection_file: str, fd_in: int, fd_out: int, stage: Path | None = None) -> list[str]:
    """The bwrap command line that runs the grading kernel confined."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit(
            "confine: bubblewrap (bwrap) is not installed; install Debian's `bubblewrap` "
            "(apt-get install bubblewrap), or grade without confinement at your own risk"
        )
    connection_file = str(Path(connection_file).resolve())
    sockets = str(_sockets_folder(connection_file))
    wall = str(_env_int("GRADING_WALL_SECONDS", 1200))
    tmpfs = str(_env_int("GRADING_TMPFS_MB", 512) * 1024 * 1024)
    shm = str(_env_int("GRADING_SHM_MB", 64) * 1024 * 1024)
    threads = str(max(1, int(os.environ.get("GRADING_THREADS", "1"))))
    return [
        shutil.which("timeout") or "/usr/bin/timeout",
        "--signal=KILL",
        wall,
        bwrap,
        "--unshare-user",
        "--disable-userns",  # no nested user namespace (and so no capability) inside
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
        *_ro_binds(stage),
        "--proc",
        "/proc",
        # the usual devices, read-only (nothing can be written to /dev itself), and a bounded
        # in-memory /dev/shm (Python's multiprocessing and torch's shared memory use it)
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--size",
        shm,
        "--tmpfs",
        "/dev/shm",
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


def open_sockets(connection_file: str) -> None:
    """As root, before dropping privileges: let the sandbox's group create the kernel's sockets
    in their folder and read the connection file (the folder stays root's; :func:`seal_sockets`
    takes the right to write away once the kernel has started)."""
    if os.geteuid() != 0:
        return
    _, gid = sandbox_ids()
    folder = Path(connection_file).resolve().parent
    os.chown(folder, 0, gid)
    os.chmod(folder, 0o770)
    os.chown(connection_file, 0, gid)
    os.chmod(connection_file, 0o640)


def seal_sockets(folder: Path) -> bool:
    """Once the kernel has bound its sockets: nobody but root may write in their folder any more
    (the sandbox's user can neither add a file nor remove one). Only possible when the grader is
    root (the folder is then root's, the kernel another user); returns whether it was done."""
    if os.geteuid() != 0:
        return False
    os.chmod(folder, 0o750)
    return True


class Share:
    """One student's share of the machine, as a control group around the whole sandbox.

    Made by the grader (:func:`grading.execute.run`) before the kernel starts; ``confine.py``
    puts itself in it (:meth:`join`, as root, before dropping privileges), so bubblewrap, the
    kernel and every process the notebook starts are in it, and so is every page of the
    in-memory file systems they write (``/tmp``, ``/grading``, ``/dev/shm``). ``memory`` bytes
    and ``processes`` tasks (threads included) for all of them together; the kernel's OOM killer
    acts inside the group when the memory runs out, and :meth:`oom_kills` says so afterwards.

    cgroup v1 (a ``memory`` and a ``pids`` hierarchy) or v2 (``memory`` and ``pids`` enabled in
    this process's group's subtree), whichever the host lets this process write; ``kind`` says
    which is in force. Where none can be made (a grader that is not root, a cgroup v2 host
    without delegation), or with ``mode="watch"`` (``GRADING_SHARE=watch``), the grader watches
    instead (:meth:`watch`): four times a second it adds up the memory of every process of the
    sandbox (their proportional set sizes, shared pages counted once) and what its in-memory
    folders hold, counts their threads, and kills the sandbox when either is over the share.
    A watch can be overrun between two looks (by what a process allocates in a quarter of a
    second, each process still under its own address-space limit).
    """

    ENV = "GRADING_SHARE_CGROUPS"
    #: how often the watch looks (seconds)
    PERIOD = 0.25

    def __init__(self, memory: int, processes: int, mode: str = "auto"):
        if mode not in ("auto", "watch"):
            raise ValueError(f"GRADING_SHARE must be 'auto' or 'watch', not {mode!r}")
        self.memory, self.processes = memory, processes
        self.folders: list[Path] = []
        self.kind = "watched"
        self.why = "GRADING_SHARE=watch"
        self.over = ""
        self._thread = None
        self._stop = None
        if mode == "watch":
            return
        try:
            self._make()
        except OSError as e:
            self.close()
            self.folders, self.kind = [], "watched"
            self.why = f"no control group could be made: {type(e).__name__}: {e}"

    @classmethod
    def from_env(cls) -> Share:
        """The share the environment sets (``GRADING_MEMORY_MB``, ``GRADING_PROCESSES``,
        ``GRADING_SHARE``), made."""
        memory = _env_int("GRADING_MEMORY_MB", 4096) * 1024 * 1024
        mode = os.environ.get("GRADING_SHARE", "auto")
        return cls(memory, _env_int("GRADING_PROCESSES", 512), mode)

    def describe(self) -> str:
        """One line for the run's log: which limits hold the sandbox, and how much."""
        mb = self.memory // 2**20
        if self.kind == "watched":
            return (
                f"per student, watched by the grader ({self.why}): {mb} MB of memory for every "
                "process and in-memory file of the sandbox together, at most "
                f"{self.processes} processes and threads, looked at every {self.PERIOD} s"
            )
        return (
            f"per student ({self.kind}): {mb} MB of memory for every process and in-memory file"
            f" of the sandbox together, at most {self.processes} processes and threads"
        )

    # -- making it -------------------------------------------------------------------------------
    def _make(self) -> None:
        own = _own_cgroups()
        mounts = _cgroup_mounts()
        name = f"grading-{os.getpid()}-{os.urandom(4).hex()}"
        if "memory" in mounts and "pids" in mounts and "memory" in own and "pids" in own:
            memory = mounts["memory"] / own["memory"].lstrip("/") / name
            pids = mounts["pids"] / own["pids"].lstrip("/") / name
            for folder in (memory, pids):
                folder.mkdir()
                self.folders.append(folder)
            (memory / "memory.limit_in_bytes").write_text(str(self.memory))
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(self.memory))
            (pids / "pids.max").write_text(str(self.processes))
            self.kind = "cgroup v1"
            return
        if "" in mounts and "" in own:
            parent = mounts[""] / own[""].lstrip("/")
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(enabled):
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            folder = parent / name
            folder.mkdir()
            self.folders.append(folder)
            (folder / "memory.max").write_text(str(self.memory))
            swap = folder / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            (folder / "pids.max").write_text(str(self.processes))
            self.kind = "cgroup v2"
            return
        raise FileNotFoundError("no writable memory and pids control group")

    def env(self) -> dict[str, str]:
        """What ``confine.py`` reads to join the group (nothing when there is none)."""
        return {self.ENV: os.pathsep.join(map(str, self.folders))} if self.folders else {}

    # -- using it --------------------------------------------------------------------------------
    @staticmethod
    def join(value: str | None) -> None:
        """Put this process in the groups ``value`` names (``confine.py``, as root)."""
        for folder in filter(None, (value or "").split(os.pathsep)):
            (Path(folder) / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> set[int]:
        """The processes in the group now (none without a group)."""
        found: set[int] = set()
        for folder in self.folders:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def oom_kills(self) -> int:
        """How many processes the OOM killer killed in the group, or 1 if the watch killed the
        sandbox for its memory (0 otherwise)."""
        if self.over.startswith("memory"):
            return 1
        for folder in self.folders:
            for name in ("memory.oom_control", "memory.events"):
                try:
                    text = (folder / name).read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        return 0

    def over_processes(self) -> bool:
        """Whether the sandbox asked for more processes and threads than its share (a fork the
        group refused, or the watch's count)."""
        if self.over.startswith("processes"):
            return True
        for folder in self.folders:
            try:
                text = (folder / "pids.events").read_text()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("max ") and int(line.split()[1]) > 0:
                    return True
        return False

    def kill(self) -> None:
        """SIGKILL every process left in the group, until it is empty (a few seconds at most)."""
        import signal
        import time

        if not self.folders:
            return
        kill_file = self.folders[0] / "cgroup.kill"
        if kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        for _ in range(100):
            left = self.pids()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    # -- the watch, where no control group holds the share ----------------------------------------
    def watch(self, pid: int) -> None:
        """Watch the sandbox started as process ``pid`` (``confine.py``, which became ``timeout``;
        the leader of its process group) until :meth:`close`; nothing with a control group."""
        import threading

        if self.kind != "watched" or self._thread is not None:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(pid,), daemon=True)
        self._thread.start()

    def _watch(self, pid: int) -> None:
        import signal

        while not self._stop.wait(self.PERIOD):
            tree = _descendants(pid)
            if not tree:
                return
            memory, threads = _usage(tree)
            if memory > self.memory:
                self.over = f"memory: {memory // 2**20} MB"
            elif threads > self.processes:
                self.over = f"processes: {threads} processes and threads"
            if self.over:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                return

    def close(self) -> None:
        """Stop the watch, kill what is left and remove the group."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.kill()
        for folder in reversed(self.folders):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    import time

                    time.sleep(0.05)
        self.folders = []


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc; empty once ``pid`` is gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat_line = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        parent = int(stat_line.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    if not os.path.exists(f"/proc/{pid}"):
        return []
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _usage(tree: list[int]) -> tuple[int, int]:
    """(bytes, tasks) of the processes ``tree``: their proportional set sizes (a page shared by
    n of them counts 1/n to each) and threads, plus what the sandbox's in-memory folders hold
    (read through the root of a process inside the sandbox)."""
    memory = threads = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    memory += int(line.split()[1]) * 1024
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    threads += int(line.split()[1])
        except (OSError, ValueError):
            continue
    inside = None  # a process inside the sandbox: its root is the sandbox's, not the host's
    host_root = os.stat("/").st_dev
    for pid in tree:
        try:
            if os.stat(f"/proc/{pid}/root").st_dev != host_root:
                inside = pid
                break
        except OSError:
            continue
    for folder in ("tmp", WORKDIR.strip("/"), "dev/shm") if inside else ():
        try:
            fs = os.statvfs(f"/proc/{inside}/root/{folder}")
        except OSError:
            continue
        memory += (fs.f_blocks - fs.f_bfree) * fs.f_frsize
    return memory, threads


def _own_cgroups() -> dict[str, str]:
    """{controller: this process's group} from /proc/self/cgroup ("" for cgroup v2)."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _cgroup_mounts() -> dict[str, Path]:
    """{controller: where its hierarchy is mounted} ("" for the cgroup v2 hierarchy, when it
    offers the memory and pids controllers)."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if rest[0] == "cgroup":
            for option in rest[2].split(","):
                if option in ("memory", "pids"):
                    found.setdefault(option, point)
        elif rest[0] == "cgroup2":
            try:
                offered = (point / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if {"memory", "pids"} <= set(offered):
                found.setdefault("", point)
    return found


def _limits() -> None:
    memory = _env_int("GRADING_MEMORY_MB", 4096) * 1024 * 1024
    cpu = _env_int("GRADING_CPU_SECONDS", 900)
    size = _env_int("GRADING_FILE_MB", 256) * 1024 * 1024
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
    root = os.geteuid() == 0
    # everything that needs the grader's rights first: its private files, the student's share,
    # the sockets' folder, the read-only paths (bound where that user can reach them); then the rights are dropped
    fd_in, fd_out = open_channel(startup, records)
    Share.join(os.environ.get(Share.ENV))
    open_sockets(argv[0])
    stage = _private_stage(Path(argv[0]).resolve().parent) if root else None
    cmd = command(argv[0], fd_in, fd_out, stage)
    drop_privileges()
    _limits()  # inherited by bwrap and the kernel
    # the kernel's own standard output (its start-up banner, and anything the notebook writes to
    # file descriptor 1 past ipykernel's capture) is nobody's to read: never the instructor's
    # terminal. Standard error stays: bubblewrap's own errors are how a sandbox that cannot start
    # says why.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
