"""Support for tests/test_classroom.py: Unix users, the course environment they can run, a
JupyterHub on loopback, and each user's server driven over its REST and kernel APIs.

Everything here is started by the test and stopped by it: users are removed (their processes
killed by pid first), the hub is stopped (it stops the proxy and the user servers), and whatever
is left of the proxy or of a test user's processes is killed by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Unix users ----------------------------------------------------------------------------------


@dataclass
class User:
    name: str
    uid: int
    gid: int
    home: Path
    password: str


# the guide's command (docs/INSTRUCTORS.md, "A classroom on JupyterHub"): useradd alone makes homes 0755
USERADD = ["useradd", "--create-home", "--key", "HOME_MODE=0700", "--user-group"]


def add_user(name: str, home: Path) -> User:
    """A local account made as the guide says (home mode 0700) with a random password (PAM)."""
    subprocess.run(
        [*USERADD, "--home-dir", str(home), "--shell", "/bin/bash", name],
        check=True,
        capture_output=True,
    )
    password = secrets.token_urlsafe(18)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True)
    entry = pwd.getpwnam(name)
    return User(name, entry.pw_uid, entry.pw_gid, home, password)


def pids_of(uid: int) -> list[int]:
    """Processes whose real uid is ``uid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if int(line.split()[1]) == uid:
                        found.append(int(entry.name))
                    break
    return found


def kill_pids(pids, sig=signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def remove_user(user: User) -> None:
    """Kill the user's processes (by pid), then delete the account and its home."""
    for _ in range(20):
        pids = pids_of(user.uid)
        if not pids:
            break
        kill_pids(pids)
        time.sleep(0.2)
    subprocess.run(["userdel", "--remove", user.name], capture_output=True)
    with contextlib.suppress(KeyError):  # a group of the same name left behind
        import grp

        grp.getgrnam(user.name)
        subprocess.run(["groupdel", user.name], capture_output=True)
    shutil.rmtree(user.home, ignore_errors=True)


def as_user(user: User, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``argv`` as ``user`` (from the test process, not through the hub)."""
    return subprocess.run(
        argv,
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        env={"HOME": str(user.home), "PATH": "/usr/bin:/bin", "USER": user.name},
        cwd=str(user.home),
        **kwargs,
    )


# --- the course environment, runnable by every user -----------------------------------------------


def world_reachable(path: Path) -> bool:
    """Can a user who is neither owner nor in the group reach ``path`` (o+x on every parent)?"""
    path = Path(path).resolve()
    for parent in [*reversed(path.parents)]:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def _patch_runpath(binary: Path, old_lib: str) -> None:
    """Point an ELF's RUNPATH ``old_lib`` at ``$ORIGIN/../lib`` (same length or shorter)."""
    data = binary.read_bytes()
    old, new = old_lib.encode() + b"\0", b"$ORIGIN/../lib\0"
    if old in data and len(new) <= len(old):
        data = data.replace(old, new.ljust(len(old), b"\0"), 1)
    mode = binary.stat().st_mode
    binary.unlink()  # a hard link to the original: never write through it
    binary.write_bytes(data)
    binary.chmod(stat.S_IMODE(mode))


def _replace_text(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    mode = path.stat().st_mode
    path.unlink()  # break the hard link before writing
    path.write_text(text.replace(old, new))
    path.chmod(stat.S_IMODE(mode))


def course_environment(dest: Path) -> tuple[Path, str]:
    """The course's venv (this interpreter's), or a copy every user can run, and how it was made.

    A real installation puts the venv where everyone can read it (/opt/course/venv) and needs
    nothing of this. Here the venv (or its base Python, e.g. a pyenv build in root's home) may sit
    under a folder others cannot enter: then the Python installation and the venv are copied as
    hard links (seconds, no disk), with the few files that name their old place rewritten (the
    interpreter's RUNPATH, the venv's pyvenv.cfg and its scripts' shebangs), and helpers/ is copied
    if the checkout is not reachable.
    """
    venv, base = Path(sys.prefix), Path(sys.base_prefix)
    exe = Path(sys.executable)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    helpers_dir = ROOT / "helpers"
    reachable = [exe.resolve(), venv, helpers_dir, base / "lib" / version]  # the stdlib too
    if all(world_reachable(p) for p in reachable):
        return venv, "the course venv as it is (every user can reach it)"
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)
    pybase, pyvenv = dest / "python", dest / "venv"
    subprocess.run(["cp", "-al", str(base), str(pybase)], check=True)
    subprocess.run(["cp", "-al", str(venv), str(pyvenv)], check=True)
    for binary in (pybase / "bin").iterdir():
        if binary.is_file() and not binary.is_symlink() and binary.name.startswith(version):
            if binary.read_bytes()[:4] == b"\x7fELF":
                _patch_runpath(binary, str(base / "lib"))
    for entry in (pyvenv / "bin").iterdir():
        if entry.name.startswith("python") and not entry.is_symlink() and entry.is_file():
            if entry.read_bytes()[:4] == b"\x7fELF":  # a copied interpreter: link the copy's
                entry.unlink()
                entry.symlink_to(pybase / "bin" / version)
                continue
        if entry.is_symlink():
            target = os.readlink(entry)
            if os.path.isabs(target):
                entry.unlink()
                real = Path(target).resolve()
                entry.symlink_to(
                    pybase / real.relative_to(base) if real.is_relative_to(base) else real
                )
        elif entry.is_file() and entry.stat().st_size < 100_000:
            head = entry.read_bytes()[:200]
            if head.startswith(b"#!") and str(venv).encode() in head:
                _replace_text(entry, str(venv), str(pyvenv))
    cfg = pyvenv / "pyvenv.cfg"
    _replace_text(cfg, str(base), str(pybase))
    _replace_text(cfg, str(venv), str(pyvenv))
    how = "hard-linked copies of the Python installation and the venv"
    if not world_reachable(helpers_dir):
        shutil.copytree(helpers_dir, dest / "helpers")
        site = pyvenv / "lib" / version / "site-packages"
        for finder in site.glob("__editable__*finder.py"):
            _replace_text(finder, str(helpers_dir), str(dest / "helpers"))
        how += ", and a copy of helpers/"
    return pyvenv, how


# --- the hub ----------------------------------------------------------------------------------


class HubError(AssertionError):
    pass


def _request(url, method="GET", token=None, body=None, timeout=60, cookies=None):
    data = None
    headers = {}
    if token:
        headers["Authorization"] = f"token {token}"
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw and raw[:1] in b"[{" else raw)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


class Hub:
    """A JupyterHub started from classroom/jupyterhub_config.py, on loopback."""

    def __init__(self, state: Path, env: dict, log: Path):
        self.state, self.log = state, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(32)
        self.env = {
            **env,
            "COURSE_HUB_URL": self.url,
            "COURSE_HUB_API_URL": f"http://127.0.0.1:{free_port()}",
            "COURSE_PROXY_API_URL": f"http://127.0.0.1:{free_port()}",
            "COURSE_HUB_STATE": str(state),
            "COURSE_ADMIN_TOKEN": self.token,
        }
        self.proc = None
        self.tokens: dict[str, str] = {}

    def start(self, timeout=120) -> None:
        cmd = [
            sys.executable,
            "-m",
            "jupyterhub",
            "-f",
            str(ROOT / "classroom/jupyterhub_config.py"),
        ]
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.state,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise HubError(f"the hub exited with {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError):
                status, _ = _request(f"{self.url}/hub/api/", token=self.token, timeout=5)
                if status == 200:
                    return
            if time.monotonic() > deadline:
                raise HubError(f"the hub did not answer in {timeout} s:\n{self.tail()}")
            time.sleep(0.5)

    def tail(self, n=4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def api(self, path, method="GET", body=None, expect=(200, 201, 202, 204)):
        status, got = _request(f"{self.url}/hub/api{path}", method, self.token, body)
        if status not in expect:
            raise HubError(f"{method} /hub/api{path}: {status} {got}\n{self.tail()}")
        return got

    def user_token(self, name: str) -> str:
        if name not in self.tokens:
            got = self.api(f"/users/{name}/tokens", "POST", {"note": "classroom test"})
            self.tokens[name] = got["token"]
        return self.tokens[name]

    def start_server(self, name: str) -> None:
        self.api(f"/users/{name}/server", "POST", {})

    def start_servers(self, names) -> None:
        """Ask for every server at once (each POST waits for its spawn up to ~10 s)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(names)) as pool:
            list(pool.map(self.start_server, names))
        for name in names:
            self.wait_ready(name)

    def wait_ready(self, name: str, timeout=240) -> None:
        start = time.monotonic()
        deadline = start + timeout
        while True:
            model = self.api(f"/users/{name}")
            server = model.get("servers", {}).get("")
            if server and server.get("ready"):
                return
            if not server and time.monotonic() > start + 10:
                raise HubError(f"{name}'s server is neither running nor starting:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise HubError(f"{name}'s server not ready in {timeout} s:\n{self.tail()}")
            time.sleep(1)

    def server(self, name: str) -> Server:
        return Server(f"{self.url}/user/{name}", self.user_token(name), self)

    def stop(self) -> None:
        """SIGTERM the hub (it stops the user servers and the proxy), then kill what is left."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        pid_file = self.state / "jupyterhub-proxy.pid"
        if pid_file.exists():
            with contextlib.suppress(ValueError, OSError):
                pid = int(pid_file.read_text().strip())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"configurable-http-proxy" in cmdline:
                    os.kill(pid, signal.SIGKILL)


# --- a user's server ----------------------------------------------------------------------------


class Server:
    """One user's JupyterLab behind the hub's proxy, with that user's token."""

    def __init__(self, url: str, token: str, hub: Hub):
        self.url, self.token, self.hub = url, token, hub
        self._kernel = None

    def api(self, path, method="GET", body=None, expect=(200, 201, 204), timeout=300):
        path, _, query = path.partition("?")
        path = urllib.parse.quote(path) + (f"?{query}" if query else "")  # feedback/<timestamp>/
        status, got = _request(f"{self.url}{path}", method, self.token, body, timeout=timeout)
        if status not in expect:
            raise HubError(f"{method} {self.url}{path}: {status} {str(got)[:3000]}")
        return got

    # nbgrader's assignment list server extension (what the Assignments panel calls)
    def assignments(self, course="transformer-block") -> list[dict]:
        got = self.api(f"/assignments?course_id={course}")
        assert got["success"], got
        return got["value"]

    def nbgrader_action(self, action, assignment, course="transformer-block") -> dict:
        got = self.api(
            f"/assignments/{action}",
            "POST",
            {"assignment_id": assignment, "course_id": course},
        )
        return got

    def read_notebook(self, path: str) -> dict:
        return self.api(f"/api/contents/{path}?content=1&type=notebook")["content"]

    def save_notebook(self, path: str, nb: dict) -> None:
        self.api(
            f"/api/contents/{path}", "PUT", {"type": "notebook", "format": "json", "content": nb}
        )

    def run(self, code: str, timeout=900) -> str:
        """Execute ``code`` in a kernel of this server (so: as this Unix user); its stdout."""
        import websocket

        if self._kernel is None:
            self._kernel = self.api("/api/kernels", "POST", {"name": "python3"})["id"]
        ws_url = self.url.replace("http://", "ws://") + f"/api/kernels/{self._kernel}/channels"
        ws = websocket.create_connection(
            ws_url, header=[f"Authorization: token {self.token}"], timeout=timeout
        )
        msg_id = uuid.uuid4().hex
        ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "username": "test",
                        "session": uuid.uuid4().hex,
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": False,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                    "channel": "shell",
                    "buffers": [],
                }
            )
        )
        out, error = [], None
        try:
            while True:
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["msg_type"]
                if kind == "stream":
                    out.append(msg["content"]["text"])
                elif kind == "error":
                    error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    break
        finally:
            ws.close()
        if error:
            raise HubError(f"in {self.url}'s kernel: {error}\n{''.join(out)[-3000:]}")
        return "".join(out)

    def sh(self, argv: list[str], cwd: str = "~", check=True) -> tuple[int, str]:
        """Run a command in this server's kernel (as the user); (exit code, stdout + stderr)."""
        code = (
            "import json as _j, os as _o, subprocess as _s\n"
            f"_r = _s.run({argv!r}, cwd=_o.path.expanduser({cwd!r}), capture_output=True, text=True)\n"
            "print('\\n@@' + _j.dumps([_r.returncode, _r.stdout + _r.stderr]))\n"
        )
        got = self.run(code)
        rc, text = json.loads(got.rsplit("\n@@", 1)[1])
        if check and rc != 0:
            raise HubError(f"`{' '.join(argv)}` in {cwd} exited {rc}:\n{text[-4000:]}")
        return rc, text

    def py(self, code: str):
        """Run Python in this server's kernel; the JSON value its last line prints after '@@'."""
        got = self.run(code)
        return json.loads(got.rsplit("@@", 1)[1])
