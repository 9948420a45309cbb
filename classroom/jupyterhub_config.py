"""JupyterHub 6 for a class taking the course: local Unix users, the course environment as every
user's server, nbgrader's exchange for handing out and collecting the lessons.

    jupyterhub -f classroom/jupyterhub_config.py          # as root, from the hub's state folder

Needs ``configurable-http-proxy`` on PATH (``npm install -g configurable-http-proxy@5.3.0``). Each
student and instructor is a Unix account on this machine (``useradd``); they log in with their
Unix password (PAM), and each one's JupyterLab runs as that user (LocalProcessSpawner), which is
what lets nbgrader's exchange know who submitted what (classroom/owner_exchange.py). The steps,
and what changes on Kubernetes (Zero to JupyterHub): docs/INSTRUCTORS.md, "A classroom on
JupyterHub". The settings an installation changes are environment variables read below, each
with the default a real installation would use:

* ``COURSE_ENV``: the course's virtual environment (``pip install -r requirements-dev.txt``, or
  requirements.txt plus nbgrader and jupyterhub), readable and executable by every user;
  default ``/opt/course/venv``.
* ``COURSE_STUDENTS``, ``COURSE_INSTRUCTORS``: comma-separated Unix user names allowed to log in.
* ``COURSE_EXCHANGE``: nbgrader's exchange folder (default ``/srv/nbgrader/exchange``), passed to
  every server; ``COURSE_JUPYTER_CONFIG``: a folder holding classroom/nbgrader_config.py and
  owner_exchange.py, put first on every server's JUPYTER_CONFIG_PATH (default: none; the copies
  in ``<COURSE_ENV>/etc/jupyter``, or ``/etc/jupyter``, are read anyway).
* ``COURSE_HUB_URL`` (public URL, default ``http://:8000``), ``COURSE_HUB_API_URL`` (default
  ``http://127.0.0.1:8081``), ``COURSE_PROXY_API_URL`` (default ``http://127.0.0.1:8001``),
  ``COURSE_HUB_STATE`` (database, cookie secret, proxy pid; default the current folder).
* ``COURSE_CULL_IDLE_SECONDS``: stop a user's server after this long without activity (default
  3600; 0: never), checked every ``COURSE_CULL_EVERY_SECONDS`` (default 300) by the
  jupyterhub-idle-culler service (``pip install jupyterhub-idle-culler==2.0.0`` beside the hub).
  A stopped server frees its memory (about 0.65 GiB per student with a kernel); the saved
  notebooks stay in the student's home and the next log-in starts a new server.
* ``COURSE_INSTRUCTOR_COURSE_DIR``: where each instructor's course folder (``nbgrader/`` of their
  clone) is, relative to their home (default ``transformer-block/nbgrader``): it is put on the
  instructor's JUPYTER_CONFIG_PATH, so the formgrader reads its ``nbgrader_config.py``
  (``CourseDirectory.root``, the sanitiser) and lists the course's assignments.
* ``COURSE_SERVER_ENV_<NAME>=<value>``: every such variable of the hub sets ``<NAME>`` in every
  user's server (e.g. ``COURSE_SERVER_ENV_OMP_NUM_THREADS=1``).
* ``COURSE_ADMIN_TOKEN``: if set, a service ``course-admin`` holding this token may start and
  stop servers and make tokens for the course's users (automation, the test); unset: no service.
"""

import os
import pwd
import stat
import sys

c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file


def _names(variable: str) -> set[str]:
    return {n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()}


def _unreachable(path: str) -> str | None:
    """The first folder on the way to ``path`` that others cannot enter: the path as written,
    then where its symlinks lead (a venv's python links to the Python it was made from)."""
    for target in (os.path.abspath(path), os.path.realpath(path)):
        parents = [target]
        while os.path.dirname(parents[-1]) != parents[-1]:
            parents.append(os.path.dirname(parents[-1]))
        for folder in reversed(parents[1:]):
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return folder
    if not os.stat(os.path.realpath(path)).st_mode & stat.S_IXOTH:
        return os.path.realpath(path)
    return None


env = os.environ.get("COURSE_ENV", "/opt/course/venv")
python = os.path.join(env, "bin", "python")
if not os.path.exists(python):
    raise SystemExit(f"COURSE_ENV={env!r}: no {python}; COURSE_ENV must be the course's venv")
# a venv's python finds its standard library through pyvenv.cfg's "home" (the Python it was made
# from): a copy of the interpreter that students can run is not enough, its home must be reachable
# too (else it falls back to another Python's library, or fails "Permission denied")
homes = []
if os.path.exists(os.path.join(env, "pyvenv.cfg")):
    with open(os.path.join(env, "pyvenv.cfg")) as cfg:
        for line in cfg:
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                homes.append(value.strip())
for target in [python, *homes]:
    if (blocked := _unreachable(target)) is None:
        continue
    raise SystemExit(
        f"COURSE_ENV={env!r}: students cannot run {os.path.realpath(target)}: {blocked} is not "
        "executable by others (mode "
        f"{stat.S_IMODE(os.stat(blocked).st_mode):04o}). Make the course environment, and the "
        "Python it was made from, where every user can read and execute (e.g. /opt/course/venv "
        "from a python3 outside any home folder): docs/INSTRUCTORS.md, 'A classroom on JupyterHub'."
    )
state = os.path.abspath(os.environ.get("COURSE_HUB_STATE", "."))
students, instructors = _names("COURSE_STUDENTS"), _names("COURSE_INSTRUCTORS")

# --- the hub and its proxy (configurable-http-proxy, started and stopped by the hub) ----------
c.JupyterHub.bind_url = os.environ.get("COURSE_HUB_URL", "http://:8000")
c.JupyterHub.hub_bind_url = os.environ.get("COURSE_HUB_API_URL", "http://127.0.0.1:8081")
c.ConfigurableHTTPProxy.api_url = os.environ.get("COURSE_PROXY_API_URL", "http://127.0.0.1:8001")
c.ConfigurableHTTPProxy.pid_file = os.path.join(state, "jupyterhub-proxy.pid")
c.JupyterHub.db_url = "sqlite:///" + os.path.join(state, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(state, "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server

# --- who: local Unix users, their Unix password --------------------------------------------------
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = students | instructors
# instructors are not hub admins: an admin can open any student's server; nbgrader needs nothing
# from the hub, only the instructor's course folder and the exchange.

# --- each user's JupyterLab: the course environment, as that user --------------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [python, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.environment = {
    "PATH": os.pathsep.join([os.path.join(env, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
    "COURSE_EXCHANGE": os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange"),
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
if os.environ.get("COURSE_JUPYTER_CONFIG"):
    c.Spawner.environment["JUPYTER_CONFIG_PATH"] = os.environ["COURSE_JUPYTER_CONFIG"]
# COURSE_SERVER_ENV_<NAME>=<value> on the hub: <NAME>=<value> in every user's server
PREFIX = "COURSE_SERVER_ENV_"
for variable, value in sorted(os.environ.items()):
    if variable.startswith(PREFIX) and len(variable) > len(PREFIX):
        c.Spawner.environment[variable[len(PREFIX) :]] = value
course_dir = os.environ.get("COURSE_INSTRUCTOR_COURSE_DIR", "transformer-block/nbgrader")


def _instructor_course(spawner) -> None:
    """An instructor's server reads their course folder's nbgrader_config.py (the formgrader)."""
    if spawner.user.name not in instructors:
        return
    folder = os.path.join(pwd.getpwnam(spawner.user.name).pw_dir, course_dir)
    paths = [p for p in (folder, spawner.environment.get("JUPYTER_CONFIG_PATH")) if p]
    spawner.environment["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)


c.Spawner.pre_spawn_hook = _instructor_course
# the first start of a server on a busy machine imports JupyterLab and nbgrader: give it time
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180

services, roles = [], []
# --- the idle culler: a server idle for COURSE_CULL_IDLE_SECONDS is stopped ---------------------
cull = int(os.environ.get("COURSE_CULL_IDLE_SECONDS", "3600"))
if cull > 0:
    every = int(os.environ.get("COURSE_CULL_EVERY_SECONDS", "300"))
    services.append(
        {
            "name": "idle-culler",
            "command": [sys.executable, "-m", "jupyterhub_idle_culler"]
            + [f"--timeout={cull}", f"--cull-every={every}"],
        }
    )
    roles.append(
        {
            "name": "idle-culler",
            "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
            "services": ["idle-culler"],
        }
    )

# --- an optional service for automation (the classroom test uses it) ------------------------------
if os.environ.get("COURSE_ADMIN_TOKEN"):
    services.append({"name": "course-admin", "api_token": os.environ["COURSE_ADMIN_TOKEN"]})
    roles.append(
        {
            "name": "course-admin",
            "scopes": ["admin:servers", "admin:users", "tokens", "read:hub"],
            "services": ["course-admin"],
        }
    )
c.JupyterHub.services = services
c.JupyterHub.load_roles = roles
