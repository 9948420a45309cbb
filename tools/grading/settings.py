"""The course's grading settings, in one place: ``course_settings.py`` in the course folder,
which its ``nbgrader_config.py`` reads (private: git-ignored; ``course_settings.example.py`` is
the tracked example to copy).

    c.CourseGrading.secret_file = "~/.config/transformer-block-course/hidden-cases.key"
    c.CourseGrading.skip_demonstrations = True
    c.CourseGrading.due = {"lesson04": "2027-03-01 17:00:00 UTC"}
    c.CourseGrading.late = {"*": {"percent_per_day": 10, "cap_percent": 50, "grace_minutes": 15}}
    c.CourseGrading.extensions = {"alice": {"lesson04": {"days": 2}}}

Read by the course's nbgrader preprocessors (so ``nbgrader autograde``, the formgrader's button
included, grades the same way) and by ``tools/coursework.py``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from traitlets import Bool, Dict, Unicode
from traitlets.config import Configurable

import helpers.grading as recorder

#: Where the secret is looked for when ``secret_file`` is not set (and no
#: ``COURSE_GRADING_SECRET_FILE`` names one): the instructor's own configuration folder.
DEFAULT_SECRET = Path("~/.config/transformer-block-course/hidden-cases.key")


class CourseGrading(Configurable):
    """What the course adds to nbgrader's settings (see docs/INSTRUCTORS.md)."""

    secret_file = Unicode(
        "",
        help="A file holding the instructor's secret, from which the hidden cases' inputs are "
        "drawn (kept outside the repository, mode 0600; `coursework.py secret` writes one). "
        "Empty: COURSE_GRADING_SECRET_FILE, then ~/.config/transformer-block-course/"
        "hidden-cases.key; with none of them, the public default (continuous integration).",
    ).tag(config=True)
    skip_demonstrations = Bool(
        True,
        help="Skip the course's demonstration cells no exercise needs (tools/grading/plan.py). "
        "On by default: for every lesson, the instructor's records and every verdict of the "
        "coursework tests' wrong and blank submissions are the same with and without skipping "
        "(tests/test_coursework.py). False runs every cell.",
    ).tag(config=True)
    due = Dict(
        {},
        help='Due dates by assignment, e.g. {"lesson04": "2027-03-01 17:00:00 UTC"}; written to '
        "the gradebook before grading, over nbgrader's own due date (which is used when the "
        "assignment is absent here; a due date removed from here is removed from the gradebook).",
    ).tag(config=True)
    late = Dict(
        {},
        help='The late-submission policy by assignment ("*" for every one): percent_per_day '
        "(of the points earned, per started day), cap_percent (the largest penalty), "
        "grace_minutes; or zero: true (a late submission earns nothing).",
    ).tag(config=True)
    extensions = Dict(
        {},
        help='Extensions by student and assignment: {"alice": {"lesson04": {"days": 2}}} '
        '(or {"hours": 12}), added to the due date for that student; the gradebook holds '
        "exactly these (one removed here is removed there at the next autograde).",
    ).tag(config=True)


def secret(settings: CourseGrading) -> tuple[bytes, str]:
    """The instructor's secret and where it came from (``"public default"`` if none is set)."""
    named = settings.secret_file or os.environ.get("COURSE_GRADING_SECRET_FILE", "")
    path = Path(named).expanduser() if named else DEFAULT_SECRET.expanduser()
    if not path.exists():
        if named:
            raise SystemExit(f"grading: the secret file {path} does not exist")
        return recorder.PUBLIC_SECRET, "public default"
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SystemExit(
            f"grading: the secret file {path} can be read by others (mode {oct(mode & 0o777)}); "
            f"`chmod 600 {path}`"
        )
    data = path.read_bytes().strip()
    if len(data) < 16:
        raise SystemExit(f"grading: the secret in {path} is too short (at least 16 bytes)")
    return data, str(path)


def write_secret(path: Path = DEFAULT_SECRET) -> Path:
    """A new random secret (64 hex digits) in ``path``, mode 0600; refuses to overwrite."""
    import secrets

    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path
