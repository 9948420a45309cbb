"""A real classroom (issue 16): JupyterHub with local Unix users and nbgrader's exchange, one
lesson's whole term, end to end.

One module fixture builds the classroom and drives the term; each test then asserts one part of
what happened. In a temporary folder the test owns (mode 755, so that every user can reach it):

* four Unix accounts with unique names (``useradd``; an instructor and three students, a random
  password each), removed afterwards whatever happens (their processes killed by pid first);
* the course environment those users' servers run (tests/_hub.py ``course_environment``: the
  course venv itself if every user can reach it, otherwise hard-linked copies of the venv and its
  Python, since a checkout or a pyenv build may sit in a home no one else can enter);
* nbgrader's exchange (mode 0777) and the classroom's shared nbgrader settings
  (classroom/nbgrader_config.py, classroom/owner_exchange.py), which every server reads through
  ``JUPYTER_CONFIG_PATH``, as ``/etc/jupyter`` would be read on a real hub;
* the instructor's course folder in their home: a copy of tools/, helpers/, nbgrader/'s config
  and lesson 4's notebook, as an instructor's clone would be;
* a JupyterHub from classroom/jupyterhub_config.py on loopback (random free ports; PAM; the
  LocalProcessSpawner), which starts configurable-http-proxy itself; stopped at the end (it stops
  every user server and the proxy; anything left is killed by pid).

The term, every step through the hub: the hub API starts the servers (a service token), each
user's server is then driven with that user's own token: nbgrader's REST endpoints (the ones the
Assignments panel calls), the contents API (a student's saved notebook), and commands run in a
kernel of that user's server (so as that Unix user). The third student uses JupyterLab's
Assignments panel in Chromium (log in with the Unix password, Fetch, Submit, Fetch Feedback).

Marked ``hub`` (and ``slow``). Skipped, saying why, where it cannot run: not root (useradd and
the hub's spawner need it), no useradd, no configurable-http-proxy on PATH, no jupyterhub, no
bubblewrap (the grading is confined). Without /usr/bin/chromium the third student uses the REST
endpoints too and only the panel test is skipped.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import _hub  # noqa: E402
import nbformat
import pytest
from test_coursework import wrong_answer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
from helpers.course import LESSONS  # noqa: E402
from tools import coursework as cw  # noqa: E402

LESSON = next(x for x in LESSONS if x.number == 4)
ASSIGNMENT = cw.assignment_id(LESSON)  # lesson04
NOTEBOOK = LESSON.notebook  # 04_positional_encoding.ipynb
COURSE = "transformer-block"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"


def _why_not() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return (
            "the classroom test makes Unix users and runs a hub as root: run it as root (CI does)"
        )
    for tool in ("useradd", "userdel", "chpasswd"):
        if shutil.which(tool) is None:
            return f"the classroom test needs `{tool}` (Debian's passwd package)"
    if shutil.which("configurable-http-proxy") is None:
        return (
            "the classroom test needs configurable-http-proxy on PATH: "
            "`npm install -g configurable-http-proxy@5.3.0` (.ci/run does)"
        )
    try:
        import jupyterhub  # noqa: F401
        import websocket  # noqa: F401
    except ImportError as e:
        return f"the classroom test needs jupyterhub==6.1.1 (requirements-dev.txt): {e}"
    if shutil.which("bwrap") is None:
        return "the classroom grades confined: `apt-get install bubblewrap` (.ci/run does)"
    if not (ROOT / "notebooks" / NOTEBOOK).exists():
        return f"notebooks/{NOTEBOOK} does not exist"
    return None


pytestmark = [
    pytest.mark.hub,
    pytest.mark.slow,
    pytest.mark.skipif(_why_not() is not None, reason=_why_not() or ""),
]

TIMINGS: dict[str, float] = {}


class _Clock:
    def __init__(self):
        self.t0 = self.last = time.perf_counter()

    def lap(self, what: str) -> None:
        now = time.perf_counter()
        TIMINGS[what] = round(now - self.last, 1)
        self.last = now


# --- the three students' answers ------------------------------------------------------------------


def _strip_markers(source: str) -> str:
    return "\n".join(
        ln
        for ln in source.splitlines()
        if "### BEGIN SOLUTION" not in ln and "### END SOLUTION" not in ln
    )


def answered(released: dict, instructor, wrong: set[int]) -> dict:
    """The released notebook with every exercise answered as the instructor did, except the
    exercises in ``wrong`` (indices into cw.exercises), answered 1 % off (test_coursework)."""
    nb = copy.deepcopy(released)
    for i, ex in enumerate(cw.exercises(instructor)):
        source = instructor.cells[ex.solution_index].source
        if i in wrong:
            source = wrong_answer(source)
        nb["cells"][ex.solution_index]["source"] = _strip_markers(source)
    return nb


def _solution_sources(nb: dict, instructor) -> list[str]:
    def text(source):
        return "".join(source) if isinstance(source, list) else source

    return [text(nb["cells"][ex.solution_index]["source"]) for ex in cw.exercises(instructor)]


# --- the browser student ------------------------------------------------------------------------


class Panel:
    """Chromium logged in as one student, on JupyterLab's Assignments panel (nbgrader)."""

    def __init__(self, hub: _hub.Hub, user: _hub.User, driver):
        self.browser = driver.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
            + ["--disable-component-update", "--disable-sync", "--no-first-run"],
            headless=True,
        )
        self.page = self.browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        self.page.set_default_timeout(120_000)
        self.hub, self.user = hub, user
        self.log: list[str] = []

    def login(self) -> None:
        page = self.page
        page.goto(f"{self.hub.url}/hub/login")
        page.fill("#username_input", self.user.name)
        page.fill("#password_input", self.user.password)
        page.click("#login_submit")
        page.wait_for_url(re.compile(r".*/(hub/home|hub/spawn-pending|user/).*"))
        self.log.append(f"logged in with the Unix password: {page.url.split('?')[0]}")

    def open_assignments(self) -> None:
        page = self.page
        page.goto(f"{self.hub.url}/user/{self.user.name}/lab?reset")
        page.wait_for_selector(".lm-MenuBar-itemLabel >> text=Nbgrader")
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
        page.locator(".lm-Menu-content .lm-Menu-item:visible").filter(
            has=page.locator(".lm-Menu-itemLabel", has_text="Assignment List")
        ).first.click()
        page.wait_for_selector("#released_assignments_list")

    def click(self, section: str, label: str, then: str) -> None:
        """Click ``label`` on lesson04's row of ``section``; wait until ``then`` shows it."""
        page = self.page
        row = page.locator(f"#{section} .list_item", has_text=ASSIGNMENT).first
        row.get_by_role("button", name=label, exact=True).click()
        page.locator(f"#{then} .list_item", has_text=ASSIGNMENT).first.wait_for()
        self.log.append(f"clicked {label} in {section}; lesson04 now in {then}")

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        with contextlib.suppress(Exception):
            self.page.screenshot(path=str(ARTIFACTS / f"classroom_{name}.png"))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.browser.close()


# --- the term -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def term(playwright_driver):
    clock = _Clock()
    base = Path(tempfile.mkdtemp(prefix="classroom-test-", dir="/tmp"))
    base.chmod(0o755)
    users: list[_hub.User] = []
    hub = panel = None
    seen: dict = {"timings": TIMINGS}
    try:
        (base / "home").mkdir(mode=0o755)
        exchange = base / "exchange"
        exchange.mkdir()
        exchange.chmod(0o777)  # nbgrader's own requirement (it resets the mode to this)
        shared = base / "jupyter"  # what /etc/jupyter holds on a real hub
        shared.mkdir(mode=0o755)
        for name in ("nbgrader_config.py", "owner_exchange.py"):
            shutil.copy(ROOT / "classroom" / name, shared / name)
        state = base / "hub"
        state.mkdir(mode=0o700)

        tag = secrets.token_hex(3)
        names = {"instructor": f"cwi{tag}", "alice": f"cws{tag}a", "bob": f"cws{tag}b"}
        names["carol"] = f"cws{tag}c"
        for name in names.values():
            users.append(_hub.add_user(name, base / "home" / name))
        user = dict(zip(names, users, strict=True))
        seen["names"] = names
        clock.lap("users")

        env_dir, how = _hub.course_environment(base / "env")
        seen["environment"] = how
        probe = _hub.as_user(
            user["alice"],
            [str(env_dir / "bin" / "python"), "-c", "import helpers, nbgrader, jupyterhub, torch"],
        )
        assert probe.returncode == 0, (
            f"a student cannot run the course environment:\n{probe.stderr}"
        )
        clock.lap("course environment")

        # the instructor's clone of the course (the part of it the term uses)
        course = user["instructor"].home / "course"
        shutil.copytree(
            ROOT / "tools", course / "tools", ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copytree(
            ROOT / "helpers", course / "helpers", ignore=shutil.ignore_patterns("__pycache__")
        )
        (course / "nbgrader").mkdir()
        shutil.copy(ROOT / "nbgrader" / "nbgrader_config.py", course / "nbgrader")
        (course / "notebooks").mkdir()
        shutil.copy(ROOT / "notebooks" / NOTEBOOK, course / "notebooks")
        ins = user["instructor"]
        subprocess.run(["chown", "-R", f"{ins.uid}:{ins.gid}", str(course)], check=True)

        hub_env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
        proxy_dir = str(Path(shutil.which("configurable-http-proxy")).parent)
        hub_env.update(
            PATH=os.pathsep.join([proxy_dir, hub_env.get("PATH", "/usr/bin:/bin")]),
            COURSE_ENV=str(env_dir),
            COURSE_STUDENTS=",".join(names[s] for s in ("alice", "bob", "carol")),
            COURSE_INSTRUCTORS=names["instructor"],
            COURSE_EXCHANGE=str(exchange),
            COURSE_JUPYTER_CONFIG=str(shared),
            COURSE_INSTRUCTOR_COURSE_DIR="course/nbgrader",  # the formgrader's course
        )
        seen["home modes"] = {u.name: stat.S_IMODE(os.stat(u.home).st_mode) for u in users}
        hub = _hub.Hub(state, hub_env, base / "hub.log")
        hub.start()
        clock.lap("hub up (with its proxy)")
        hub.start_servers(list(names.values()))
        srv = {role: hub.server(names[role]) for role in names}
        clock.lap("four user servers started (hub API)")

        # 1. the instructor releases lesson 4 (coursework.py's release, nbgrader's exchange)
        I = srv["instructor"]
        I.sh(["python", "-m", "tools.coursework", "release", "--lessons", "4"], cwd="~/course")
        I.sh(["nbgrader", "release_assignment", ASSIGNMENT], cwd="~/course/nbgrader")
        root = exchange / COURSE
        seen["modes"] = {
            p: stat.S_IMODE(os.stat(root / p).st_mode) for p in ("", "inbound", "outbound")
        }
        seen["owners"] = {p: os.stat(root / p).st_uid for p in ("", "inbound", "outbound")}
        clock.lap("release (generate + release_assignment)")
        # the formgrader in the instructor's server lists the course (its CourseDirectory.root)
        listed = I.api("/formgrader/api/assignments")
        seen["formgrader"] = sorted(a["name"] for a in listed)

        instructor_nb = nbformat.read(str(course / "notebooks" / NOTEBOOK), as_version=4)
        seen["points"] = [e.points for e in cw.exercises(instructor_nb)]  # the lesson as copied
        path = f"{ASSIGNMENT}/{NOTEBOOK}"

        # 2. each student fetches lesson 4 in their own server
        for role in ("alice", "bob"):
            listed = srv[role].nbgrader_action("fetch", ASSIGNMENT)
            seen[f"{role} fetched"] = [
                a["status"] for a in listed["value"] if a["assignment_id"] == ASSIGNMENT
            ]
        if CHROMIUM.exists():
            panel = Panel(hub, user["carol"], playwright_driver)
            panel.login()
            panel.open_assignments()
            panel.click("released_assignments_list", "Fetch", "fetched_assignments_list")
            panel.screenshot("fetched")
        else:
            srv["carol"].nbgrader_action("fetch", ASSIGNMENT)
        seen["carol fetched"] = [
            a["status"] for a in srv["carol"].assignments() if a["assignment_id"] == ASSIGNMENT
        ]
        released = srv["alice"].read_notebook(path)
        clock.lap("three fetches")

        # 3. answers: alice right (after a first try with exercise 1 wrong), bob one wrong, carol blank
        A, B = srv["alice"], srv["bob"]
        A.save_notebook(path, answered(released, instructor_nb, wrong={0}))
        A.nbgrader_action("submit", ASSIGNMENT)
        alice_right = answered(released, instructor_nb, wrong=set())
        A.save_notebook(path, alice_right)
        A.nbgrader_action("submit", ASSIGNMENT)
        seen["alice cache"] = sorted(
            p.name
            for p in (user["alice"].home / ".local/share/jupyter/nbgrader_cache" / COURSE).iterdir()
        )

        bob_nb = answered(released, instructor_nb, wrong={1})
        B.save_notebook(path, bob_nb)
        # bob's server dies mid-assignment (every process of his killed, as a crash would)
        killed = _hub.pids_of(user["bob"].uid)
        _hub.kill_pids(killed)
        seen["bob killed"] = len(killed)
        # the hub notices the dead server (it polls the spawner on the request) and starts a new
        # one; until the killed process is gone it still answers "already running": ask again
        deadline = time.monotonic() + 60
        while True:
            try:
                hub.start_server(names["bob"])
                break
            except _hub.HubError as error:
                if "already running" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(1)
        hub.wait_ready(names["bob"])
        B = srv["bob"] = hub.server(names["bob"])
        seen["bob after restart"] = _solution_sources(B.read_notebook(path), instructor_nb)
        seen["bob saved"] = _solution_sources(bob_nb, instructor_nb)
        clock.lap("bob's server killed and restarted")
        # bob submits once claiming to be alice (nbgrader honours --student for anyone), then as himself
        rc, out = B.sh(
            ["nbgrader", "submit", ASSIGNMENT, f"--student={names['alice']}"], check=False
        )
        seen["bob forged"] = (rc, out)
        B.nbgrader_action("submit", ASSIGNMENT)
        seen["inbound after bob"] = sorted(p.name for p in (root / "inbound").iterdir())

        # the due date passes: set in the gradebook, now; carol submits after it
        due = datetime.now(UTC)
        I.sh(
            ["nbgrader", "db", "assignment", "add", ASSIGNMENT, f"--duedate={due.isoformat()}"],
            cwd="~/course/nbgrader",
        )
        time.sleep(1)
        if panel is not None:
            panel.open_assignments()
            panel.click("fetched_assignments_list", "Submit", "submitted_assignments_list")
            panel.screenshot("submitted")
        else:
            srv["carol"].nbgrader_action("submit", ASSIGNMENT)
        seen["inbound"] = sorted(p.name for p in (root / "inbound").iterdir())
        clock.lap("answers and submissions")

        # 4. the instructor collects, autogrades (confined), generates and releases feedback
        _, seen["collect log"] = I.sh(["nbgrader", "collect", ASSIGNMENT], cwd="~/course/nbgrader")
        submitted = course / "nbgrader" / "submitted"
        seen["collected"] = {
            role: _solution_sources(
                json.loads((submitted / names[role] / ASSIGNMENT / NOTEBOOK).read_text()),
                instructor_nb,
            )
            for role in ("alice", "bob", "carol")
            if (submitted / names[role] / ASSIGNMENT / NOTEBOOK).exists()
        }
        seen["collected folders"] = sorted(p.name for p in submitted.iterdir())
        seen["expected sources"] = {
            "alice": _solution_sources(alice_right, instructor_nb),
            "bob": _solution_sources(bob_nb, instructor_nb),
            "carol": _solution_sources(released, instructor_nb),
        }
        clock.lap("collect")
        _, seen["autograde out"] = I.sh(
            ["python", "-m", "tools.coursework", "autograde", ASSIGNMENT], cwd="~/course"
        )
        clock.lap("autograde, confined (reference + 3 submissions)")
        seen["gradebook"] = I.py(
            "from nbgrader.api import Gradebook\nimport json, os\n"
            "db = 'sqlite:///' + os.path.expanduser('~/course/nbgrader/gradebook.db')\n"
            "with Gradebook(db, 'transformer-block') as gb:\n"
            f"    got = {{s.id: (gb.find_submission({ASSIGNMENT!r}, s.id).score,"
            f" gb.find_submission({ASSIGNMENT!r}, s.id).max_score,"
            f" gb.find_submission({ASSIGNMENT!r}, s.id).total_seconds_late) for s in gb.students}}\n"
            "print('@@' + json.dumps(got))\n"
        )
        I.sh(["nbgrader", "generate_feedback", ASSIGNMENT], cwd="~/course/nbgrader")
        I.sh(["nbgrader", "release_feedback", ASSIGNMENT], cwd="~/course/nbgrader")
        seen["feedback files"] = sorted(p.name for p in (root / "feedback").iterdir())
        seen["feedback mode"] = stat.S_IMODE(os.stat(root / "feedback").st_mode)
        clock.lap("feedback generated and released")

        # 5. each student fetches their feedback and reads their score
        if panel is not None:
            panel.open_assignments()
            row = panel.page.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT)
            row.first.get_by_role("button", name="Fetch Feedback", exact=True).click()
            panel.page.wait_for_timeout(500)
            panel.log.append("clicked Fetch Feedback in submitted_assignments_list")
        else:
            srv["carol"].nbgrader_action("fetch_feedback", ASSIGNMENT)
        for role in ("alice", "bob"):
            srv[role].nbgrader_action("fetch_feedback", ASSIGNMENT)
        seen["feedback"] = {}
        for role in ("alice", "bob", "carol"):
            s = srv[role]
            deadline = time.monotonic() + 60
            while True:
                listing = s.api(f"/api/contents/{ASSIGNMENT}/feedback?content=1", expect=(200, 404))
                if isinstance(listing, dict) and listing.get("content"):
                    break
                assert time.monotonic() < deadline, f"{role} has no feedback folder"
                time.sleep(1)
            texts = []
            for stamp in listing["content"]:
                html = s.api(
                    f"/api/contents/{stamp['path']}/{Path(NOTEBOOK).stem}.html?content=1&format=text&type=file"
                )
                texts.append(html["content"])
            seen["feedback"][role] = [
                re.findall(r"\(Score: ([\d.]+) / ([\d.]+)\)</h4>", t) for t in texts
            ]
        if panel is not None:
            panel.open_assignments()
            panel.screenshot("feedback")
            seen["panel"] = panel.log
            seen["panel feedback link"] = panel.page.locator(
                "#submitted_assignments_list", has_text="feedback"
            ).count()
        clock.lap("three feedback fetches")

        # 6. nobody sees another's work: tried as bob, in his own server
        alice_home = str(user["alice"].home)
        tries = {
            "list inbound": f"os.listdir({str(root / 'inbound')!r})",
            "list feedback": f"os.listdir({str(root / 'feedback')!r})",
            "list alice's home": f"os.listdir({alice_home!r})",
            "read alice's notebook": f"open({alice_home + '/' + path!r}).read()",
            "read alice's submission cache": f"os.listdir({alice_home + '/.local/share/jupyter/nbgrader_cache'!r})",
            "read the instructor's submitted/": f"os.listdir({str(submitted)!r})",
            "read the gradebook": f"open({str(course / 'nbgrader' / 'gradebook.db')!r}, 'rb').read(1)",
            "write into outbound": f"open({str(root / 'outbound' / ASSIGNMENT / 'x.ipynb')!r}, 'w')",
        }
        # alice's latest submission folder in inbound/: bob cannot list inbound, but a name can
        # be learnt (seen over a shoulder, a shared screen); knowing it must give him nothing
        alice_sub = max(
            (p for p in (root / "inbound").iterdir() if p.stat().st_uid == user["alice"].uid),
            key=lambda p: p.name,
        )
        tries["add a file to alice's submission"] = f"open({str(alice_sub / 'extra.ipynb')!r}, 'w')"
        tries["delete a file of alice's submission"] = (
            f"os.remove({str(alice_sub / 'timestamp.txt')!r})"
        )
        tries["replace alice's notebook"] = (
            f"os.rename({str(alice_sub / NOTEBOOK)!r}, {str(alice_sub / 'x')!r})"
        )
        code = "import os, json\nres = {}\n"
        for what, expr in tries.items():
            code += f"try:\n    {expr}\n    res[{what!r}] = 'allowed'\nexcept PermissionError:\n    res[{what!r}] = 'denied'\n"
        code += "print('@@' + json.dumps(res))\n"
        seen["bob tries"] = B.py(code)
        # bob asks for alice's feedback by name: nbgrader looks it up from bob's own submissions
        before = seen["feedback"]["bob"]
        B.sh(["nbgrader", "fetch_feedback", ASSIGNMENT, f"--student={names['alice']}"], check=False)
        listing = B.api(f"/api/contents/{ASSIGNMENT}/feedback?content=1")
        seen["bob feedback after asking for alice's"] = [
            re.findall(
                r"\(Score: ([\d.]+) / ([\d.]+)\)</h4>",
                B.api(
                    f"/api/contents/{st['path']}/{Path(NOTEBOOK).stem}.html?content=1&format=text&type=file"
                )["content"],
            )
            for st in listing["content"]
        ]
        seen["bob feedback before"] = before
        clock.lap("isolation tries")
        TIMINGS["total"] = round(time.perf_counter() - clock.t0, 1)
        yield seen
    finally:
        t = time.perf_counter()
        if panel is not None:
            panel.close()
        if hub is not None:
            with contextlib.suppress(Exception):
                ARTIFACTS.mkdir(exist_ok=True)
                shutil.copy(hub.log, ARTIFACTS / "classroom_hub.log")
            hub.stop()
        for u in users:
            _hub.remove_user(u)
        shutil.rmtree(base, ignore_errors=True)
        TIMINGS["teardown"] = round(time.perf_counter() - t, 1)
        print("\nclassroom timings (s):", json.dumps(TIMINGS))


# --- what the term showed ---------------------------------------------------------------------


def test_exchange_is_laid_out_as_nbgrader_documents(term):
    """Release: the course folder and outbound readable by all (0755), inbound write-only for
    students (0733 plus setgid: they can add a submission but not list or read the others)."""
    modes = term["modes"]
    assert modes["outbound"] == 0o755 and modes[""] == 0o755, {k: oct(v) for k, v in modes.items()}
    assert modes["inbound"] & 0o777 == 0o733, oct(modes["inbound"])
    # the instructor, not root, made them (the release ran in the instructor's server)
    assert len(set(term["owners"].values())) == 1 and 0 not in term["owners"].values()


def test_homes_made_by_the_guides_useradd_are_private(term):
    assert set(term["home modes"].values()) == {0o700}, term["home modes"]


def test_formgrader_in_the_instructors_server_lists_the_course(term):
    assert ASSIGNMENT in term["formgrader"], term["formgrader"]


def test_each_student_fetched_in_their_own_server(term):
    for role in ("alice", "bob", "carol"):
        assert "fetched" in term[f"{role} fetched"], (role, term[f"{role} fetched"])


def test_a_killed_server_keeps_the_saved_work(term):
    assert term["bob killed"] >= 1  # his single-user server at least
    assert term["bob after restart"] == term["bob saved"]


def test_submit_twice_latest_counts_earlier_kept(term):
    alice = term["names"]["alice"]
    mine = [n for n in term["inbound"] if n.startswith(alice + "+")]
    # alice's two submissions and bob's forged one carry alice's name; all are kept
    assert len(mine) == 3, term["inbound"]
    assert len(term["alice cache"]) == 2, term["alice cache"]  # both in her own cache too
    assert term["collected"]["alice"] == term["expected sources"]["alice"]  # the second one


def test_submit_as_another_is_recorded_as_the_submitter(term):
    names = term["names"]
    rc, out = term["bob forged"]
    assert rc == 0, out  # nbgrader's submit itself accepts --student for anyone ...
    assert f"{names['alice']}+{ASSIGNMENT}+" in " ".join(term["inbound after bob"])
    log = term["collect log"]
    # ... the classroom's collect files it under its owner, bob, and says so
    assert f"claims to be submitted by {names['alice']} but was made by {names['bob']}" in log, log
    assert term["collected"]["alice"] == term["expected sources"]["alice"], "alice's work replaced"
    assert term["collected"]["bob"] == term["expected sources"]["bob"]
    assert sorted(term["collected folders"]) == sorted(names[s] for s in ("alice", "bob", "carol"))


def test_autograde_confined_scores_each_student(term):
    names, book = term["names"], term["gradebook"]
    total, wrong = sum(term["points"]), term["points"][1]
    assert book[names["alice"]][:2] == [total, total], book
    assert book[names["bob"]][:2] == [total - wrong, total], book
    assert book[names["carol"]][:2] == [0, total], book
    assert "NOT GRADED" not in term["autograde out"], term["autograde out"]
    assert term["collected"]["carol"] == term["expected sources"]["carol"]  # blank, as released


def test_late_submission_is_marked_late(term):
    names, book = term["names"], term["gradebook"]
    assert book[names["carol"]][2] > 0, book  # after the due date
    assert book[names["alice"]][2] == 0 and book[names["bob"]][2] == 0, book


def test_each_student_sees_their_own_score(term):
    total, wrong = sum(term["points"]), term["points"][1]
    want = {"alice": total, "bob": total - wrong, "carol": 0}
    for role, score in want.items():
        (found,) = term["feedback"][role]  # one feedback, for their latest submission
        assert [(float(a), float(b)) for a, b in found] == [(score, total)], (role, found)


def test_nobody_reads_another_students_work(term):
    tries = term["bob tries"]
    allowed = {k: v for k, v in tries.items() if v != "denied"}
    assert not allowed, f"bob could: {allowed}"
    # feedback is released under names only its owner can compute (a hash of a secret kept in
    # the submission): nothing in the folder names a student, and the folder cannot be listed
    assert term["feedback mode"] & 0o007 == 0o001, oct(term["feedback mode"])
    assert len(term["feedback files"]) == 3
    assert not any(n in f for f in term["feedback files"] for n in term["names"].values())
    # asking nbgrader for alice's feedback by name gets bob his own, nothing of alice's
    assert term["bob feedback after asking for alice's"] == term["bob feedback before"]


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="the Assignments panel is driven in Debian's Chromium (/usr/bin/chromium, "
    "apt-get install chromium); without it the third student used the REST endpoints",
)
def test_assignments_panel_in_chromium(term):
    steps = "\n".join(term["panel"])
    assert "logged in with the Unix password" in steps
    for label in ("Fetch", "Submit", "Fetch Feedback"):
        assert f"clicked {label} in" in steps, steps
    print(json.dumps(term["timings"]))
