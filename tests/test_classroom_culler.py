"""The classroom hub's idle culler (classroom/jupyterhub_config.py, COURSE_CULL_IDLE_SECONDS):
a student's server left idle is stopped by the jupyterhub-idle-culler service, and the notebook
the student saved is there when the next server starts.

One student, made with the guide's ``useradd`` (home 0700), a hub on loopback with a 20 s idle
timeout checked every 5 s, and a variable passed to the server through
``COURSE_SERVER_ENV_<NAME>``. Marked ``hub`` and ``slow`` (about a minute); skipped where
tests/test_classroom.py is (not root, no useradd, no configurable-http-proxy, no jupyterhub).
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path

import _hub
import nbformat
import pytest

IDLE_SECONDS = 20


def _why_not() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the culler test makes a Unix user and runs a hub as root: run it as root"
    for tool in ("useradd", "userdel", "chpasswd"):
        if shutil.which(tool) is None:
            return f"the culler test needs `{tool}` (Debian's passwd package)"
    if shutil.which("configurable-http-proxy") is None:
        return "the culler test needs configurable-http-proxy on PATH (npm)"
    try:
        import jupyterhub  # noqa: F401
        import jupyterhub_idle_culler  # noqa: F401
        import websocket  # noqa: F401
    except ImportError as e:
        return f"the culler test needs jupyterhub and jupyterhub-idle-culler: {e}"
    return None


pytestmark = [
    pytest.mark.hub,
    pytest.mark.slow,
    pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""),
]


def _server_running(hub: _hub.Hub, name: str) -> bool:
    return bool(hub.api(f"/users/{name}").get("servers", {}).get(""))


def test_idle_server_is_culled_and_the_saved_notebook_survives():
    base = Path(tempfile.mkdtemp(prefix="classroom-culler-"))
    base.chmod(0o755)
    user = hub = None
    try:
        (base / "home").mkdir(mode=0o755)
        user = _hub.add_user(f"cwc{secrets.token_hex(3)}", base / "home" / "student")
        assert stat.S_IMODE(os.stat(user.home).st_mode) == 0o700  # the guide's useradd
        env_dir, _ = _hub.course_environment(base / "env")
        state = base / "hub"
        state.mkdir(mode=0o700)
        hub_env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_")}
        proxy_dir = str(Path(shutil.which("configurable-http-proxy")).parent)
        probe = secrets.token_hex(4)
        hub_env.update(
            PATH=os.pathsep.join([proxy_dir, hub_env.get("PATH", "/usr/bin:/bin")]),
            COURSE_ENV=str(env_dir),
            COURSE_STUDENTS=user.name,
            COURSE_EXCHANGE=str(base / "exchange"),
            COURSE_CULL_IDLE_SECONDS=str(IDLE_SECONDS),
            COURSE_CULL_EVERY_SECONDS="5",
            COURSE_SERVER_ENV_COURSE_PROBE=probe,
        )
        hub = _hub.Hub(state, hub_env, base / "hub.log")
        hub.start()
        hub.start_servers([user.name])
        server = hub.server(user.name)
        got = server.run("import os\nprint(os.environ.get('COURSE_PROBE'))").strip()
        assert got == probe, "COURSE_SERVER_ENV_COURSE_PROBE did not reach the server"

        nb = nbformat.v4.new_notebook()
        nb.cells.append(nbformat.v4.new_code_cell(f"answer = {probe!r}"))
        server.save_notebook("work.ipynb", nb)
        started = time.monotonic()
        while _server_running(hub, user.name):
            assert time.monotonic() - started < IDLE_SECONDS + 120, (
                f"the idle server was not culled in {IDLE_SECONDS + 120} s:\n{hub.tail()}"
            )
            time.sleep(2)
        culled = [
            line
            for line in hub.log.read_text(errors="replace").splitlines()
            if f"/users/{user.name}/server" in line and "DELETE" in line
        ]
        assert any("idle-culler" in line for line in culled), culled or hub.tail()

        hub.start_servers([user.name])
        again = hub.server(user.name).read_notebook("work.ipynb")
        assert again["cells"][0]["source"] == f"answer = {probe!r}"
        spawns = [
            line.split("] ", 1)[-1]
            for line in hub.log.read_text(errors="replace").splitlines()
            if "seconds to start" in line
        ]
        print("\nspawns (the hub's log):", *spawns, sep="\n  ")
    finally:
        if hub is not None:
            hub.stop()
        if user is not None:
            _hub.remove_user(user)
        shutil.rmtree(base, ignore_errors=True)
