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
  owner_exchange.py, put first on every server's JUPYTER_CONFIG_PATH (default: none, the copies
  in ``/etc/jupyter`` are read anyway).
* ``COURSE_HUB_URL`` (public URL, default ``http://:8000``), ``COURSE_HUB_API_URL`` (default
  ``http://127.0.0.1:8081``), ``COURSE_PROXY_API_URL`` (default ``http://127.0.0.1:8001``),
  ``COURSE_HUB_STATE`` (database, cookie secret, proxy pid; default the current folder).
* ``COURSE_ADMIN_TOKEN``: if set, a service ``course-admin`` holding this token may start and
  stop servers and make tokens for the course's users (automation, the test); unset: no service.
"""

import os

c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file


def _names(variable: str) -> set[str]:
    return {n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()}


env = os.environ.get("COURSE_ENV", "/opt/course/venv")
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
c.Spawner.cmd = [os.path.join(env, "bin", "python"), "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.environment = {
    "PATH": os.pathsep.join([os.path.join(env, "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
    "COURSE_EXCHANGE": os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange"),
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
if os.environ.get("COURSE_JUPYTER_CONFIG"):
    c.Spawner.environment["JUPYTER_CONFIG_PATH"] = os.environ["COURSE_JUPYTER_CONFIG"]
# the first start of a server on a busy machine imports JupyterLab and nbgrader: give it time
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180

# --- an optional service for automation (the classroom test uses it) ------------------------------
if os.environ.get("COURSE_ADMIN_TOKEN"):
    c.JupyterHub.services = [
        {"name": "course-admin", "api_token": os.environ["COURSE_ADMIN_TOKEN"]}
    ]
    c.JupyterHub.load_roles = [
        {
            "name": "course-admin",
            "scopes": ["admin:servers", "admin:users", "tokens", "read:hub"],
            "services": ["course-admin"],
        }
    ]
