"""The classroom's configuration files on their own, without a hub (fast): what
classroom/jupyterhub_config.py makes of its environment variables, and the width at which
``nbgrader validate`` cuts a verdict with classroom/nbgrader_config.py.

The hub itself, driven through a term, is tests/test_classroom.py; the idle culler on a running
hub is tests/test_classroom_culler.py.
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from traitlets.config import Config

ROOT = Path(__file__).resolve().parent.parent
HUB_CONFIG = ROOT / "classroom" / "jupyterhub_config.py"


def load_hub_config(monkeypatch, **env) -> Config:
    """classroom/jupyterhub_config.py run as JupyterHub runs it, with ``env`` set."""
    for name in [n for n in os.environ if n.startswith("COURSE_")]:
        monkeypatch.delenv(name)
    env.setdefault("COURSE_ENV", sys.prefix)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = Config()
    runpy.run_path(str(HUB_CONFIG), init_globals={"get_config": lambda: config})
    return config


@pytest.fixture
def open_tmp():
    """A temporary folder others can enter (pytest's own tmp_path sits in a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="classroom-config-"))
    folder.chmod(0o755)
    for parent in folder.parents:
        if not os.stat(parent).st_mode & 0o001:
            pytest.skip(f"{parent} is not traversable by others here")
    yield folder
    for entry in folder.rglob("*"):  # private folders made by a test: let rmtree in
        if entry.is_dir() and not entry.is_symlink():
            entry.chmod(0o755)
    shutil.rmtree(folder)


@pytest.fixture
def reachable_env(open_tmp):
    """A stand-in course venv every user can reach: bin/python a symlink to /usr/bin/env."""
    env = open_tmp / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to("/usr/bin/env")
    for folder in (env, env / "bin"):
        folder.chmod(0o755)
    return env


def test_course_env_others_cannot_enter_stops_the_hub_naming_the_folder(monkeypatch, open_tmp):
    private = open_tmp / "private"
    env = private / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to("/usr/bin/env")
    private.chmod(0o700)
    with pytest.raises(SystemExit) as raised:
        load_hub_config(monkeypatch, COURSE_ENV=str(env))
    message = str(raised.value)
    assert "COURSE_ENV" in message and f"{private} is not executable by others" in message


def test_course_env_through_a_symlink_into_a_private_folder_is_refused(monkeypatch, open_tmp):
    """A venv in a world-readable place whose python links into root's home (the issue's case)."""
    private = open_tmp / "root-home"
    (private / "bin").mkdir(parents=True)
    shutil.copy("/usr/bin/env", private / "bin" / "python3")
    private.chmod(0o700)
    env = open_tmp / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(private / "bin" / "python3")
    with pytest.raises(SystemExit, match=f"{private} is not executable by others"):
        load_hub_config(monkeypatch, COURSE_ENV=str(env))


def test_course_env_made_from_a_python_in_a_private_home_is_refused(monkeypatch, open_tmp):
    """The venv's own python is a world-readable copy, but pyvenv.cfg's home (where its standard
    library is) sits in a folder others cannot enter: students would run another Python's library
    or fail (what this machine's pyenv build under /root does)."""
    private = open_tmp / "root-home"
    (private / "python" / "bin").mkdir(parents=True)
    private.chmod(0o700)
    env = open_tmp / "venv"
    (env / "bin").mkdir(parents=True)
    shutil.copy("/usr/bin/env", env / "bin" / "python")
    (env / "pyvenv.cfg").write_text(f"home = {private / 'python' / 'bin'}\nversion = 3.11.7\n")
    for folder in (env, env / "bin"):
        folder.chmod(0o755)
    with pytest.raises(SystemExit, match=f"{private} is not executable by others"):
        load_hub_config(monkeypatch, COURSE_ENV=str(env))


def test_course_env_without_python_is_refused(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="no .*bin/python"):
        load_hub_config(monkeypatch, COURSE_ENV=str(tmp_path))


def test_reachable_course_env_runs_every_server(monkeypatch, reachable_env):
    c = load_hub_config(monkeypatch, COURSE_ENV=str(reachable_env))
    assert c.Spawner.cmd[0] == str(reachable_env / "bin" / "python")


def test_server_environment_variables_come_from_prefixed_hub_variables(monkeypatch, reachable_env):
    c = load_hub_config(
        monkeypatch,
        COURSE_ENV=str(reachable_env),
        COURSE_SERVER_ENV_OMP_NUM_THREADS="1",
        COURSE_SERVER_ENV_MPLBACKEND="Agg",
    )
    environment = c.Spawner.environment
    assert environment["OMP_NUM_THREADS"] == "1" and environment["MPLBACKEND"] == "Agg"
    assert not any(name.startswith("COURSE_SERVER_ENV") for name in environment)


def test_idle_culler_runs_as_a_hub_service_with_the_configured_timeout(monkeypatch, reachable_env):
    c = load_hub_config(
        monkeypatch,
        COURSE_ENV=str(reachable_env),
        COURSE_CULL_IDLE_SECONDS="1200",
        COURSE_CULL_EVERY_SECONDS="60",
    )
    (culler,) = [s for s in c.JupyterHub.services if s["name"] == "idle-culler"]
    assert culler["command"][1:3] == ["-m", "jupyterhub_idle_culler"]
    assert "--timeout=1200" in culler["command"] and "--cull-every=60" in culler["command"]
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == "idle-culler"]
    assert {"list:users", "read:users:activity", "delete:servers"} <= set(role["scopes"])
    __import__("jupyterhub_idle_culler")  # the service's module is installed beside the hub


def test_idle_culler_is_on_by_default_and_off_at_zero(monkeypatch, reachable_env):
    default = load_hub_config(monkeypatch, COURSE_ENV=str(reachable_env))
    (culler,) = [s for s in default.JupyterHub.services if s["name"] == "idle-culler"]
    assert "--timeout=3600" in culler["command"]
    off = load_hub_config(monkeypatch, COURSE_ENV=str(reachable_env), COURSE_CULL_IDLE_SECONDS="0")
    assert not [s for s in off.JupyterHub.services if s["name"] == "idle-culler"]


def test_instructors_server_reads_their_course_folder_config(monkeypatch, reachable_env):
    import pwd

    root = pwd.getpwuid(0)
    c = load_hub_config(
        monkeypatch,
        COURSE_ENV=str(reachable_env),
        COURSE_INSTRUCTORS=root.pw_name,
        COURSE_STUDENTS="nobody",
        COURSE_JUPYTER_CONFIG="/etc/course-jupyter",
        COURSE_INSTRUCTOR_COURSE_DIR="course/nbgrader",
    )
    hook = c.Spawner.pre_spawn_hook
    instructor = SimpleNamespace(user=SimpleNamespace(name=root.pw_name), environment={})
    instructor.environment["JUPYTER_CONFIG_PATH"] = "/etc/course-jupyter"
    hook(instructor)
    assert instructor.environment["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [
        os.path.join(root.pw_dir, "course/nbgrader"),
        "/etc/course-jupyter",
    ]
    student = SimpleNamespace(user=SimpleNamespace(name="nobody"), environment={})
    hook(student)
    assert "JUPYTER_CONFIG_PATH" not in student.environment


# --- nbgrader validate, as a student runs it with the classroom's shared settings -------------


def _failing_notebook(path: Path, verdict: str) -> None:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(f"raise AssertionError({verdict!r})")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "points": 1,
        "grade_id": "check",
        "schema_version": 3,
    }
    nb.cells.append(cell)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, str(path))


def _validate(tmp_path: Path, config_dir: Path | None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "user-config")  # not the machine's ~/.jupyter
    env["JUPYTER_CONFIG_PATH"] = str(config_dir) if config_dir else str(tmp_path / "empty")
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run(
        [str(nbgrader), "validate", "answer.ipynb"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout + done.stderr


VERDICT = (
    "✗ Exercise 1 (the block without its nonlinearity) is not right yet: collapse is not "
    "implemented yet (it raises NotImplementedError): replace that line with your answer."
)


@pytest.mark.slow
def test_nbgrader_validate_shows_a_long_verdict_whole_with_the_classroom_settings(tmp_path):
    assert len(VERDICT) > 150
    _failing_notebook(tmp_path / "answer.ipynb", VERDICT)
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("nbgrader_config.py", "owner_exchange.py"):
        shutil.copy(ROOT / "classroom" / name, shared / name)
    with_classroom = _validate(tmp_path, shared)
    assert VERDICT in with_classroom, with_classroom[-2000:]
    # nbgrader's default cuts it (what students saw before)
    without = _validate(tmp_path, None)
    assert VERDICT[:40] in without and VERDICT not in without, without[-2000:]
