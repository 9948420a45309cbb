"""nbgrader's collect, with the submitter's identity taken from the file system, not the name.

nbgrader 0.9.6's default exchange trusts the name a submission carries. ``nbgrader submit
--student=NAME`` writes ``inbound/NAME+ASSIGNMENT+TIMESTAMP+RANDOM`` for whoever runs it
(``ExchangeSubmit.init_dest`` uses ``CourseDirectory.student_id`` when one is given, the OS user
name only otherwise), and ``ExchangeCollect.copy_files`` then files it under NAME: its
``check_owner`` (``CollectApp.check_owner``, on by default) only logs "claims to be submitted by
... cheating attempt?" and collects it anyway, so a forged later submission becomes NAME's latest
and replaces the real student's work (``collect --update`` too).

On JupyterHub with local Unix users (LocalProcessSpawner) each user's server runs as that user,
so the owner of a submission folder in ``inbound/`` is the hub user who made it, and a student
cannot make a folder owned by someone else. ``OwnerCollect`` records every submission under its
owner, whatever name it carries, and logs the mismatch; a submission that is not a real folder (a
symlink could lend it another user's ownership) or whose owner has no account is not collected.
Enable it in the instructor's nbgrader configuration (classroom/nbgrader_config.py does):

    c.ExchangeFactory.collect = "owner_exchange.OwnerCollect"

The submission's time is taken from the file system too. A student owns their folder in
``inbound/`` and can rewrite its ``timestamp.txt`` (and the time in its name) at will; what they
cannot set is the inode change time (ctime) of the folder and of the files in it: only the kernel
writes it, to the current time, on every change (``touch``, ``chmod``, a rewrite, a rename), so
a later change can only move it later. ``OwnerCollect`` takes the latest ctime of the submission
(:func:`trusted_time`) before copying it (a copy gets new ctimes), uses it to choose the latest
submission, writes it as the collected ``timestamp.txt`` (nbgrader's autograde reads that for the
late policy) and keeps a record of both times in ``.grading/times/ASSIGNMENT/STUDENT.json``, on
the instructor's side (0700). The student's own time is kept when it is within
``time_tolerance_seconds`` before the trusted one (nbgrader's submit stamps the time before it
copies the files); otherwise the trusted time wins, and the log says so.

This relies on Unix ownership: on Zero to JupyterHub every pod runs as the same uid (jovyan), so
ownership names nobody; see docs/INSTRUCTORS.md for what to use there.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import stat
from collections import defaultdict
from datetime import UTC, datetime

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import check_mode, parse_utc
from traitlets import Float

#: How nbgrader writes a submission's time in ``timestamp.txt`` (read back by ``parse_utc``).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


def trusted_time(path: str) -> datetime:
    """The latest inode change time (ctime, UTC) of ``path`` and of everything under it, links
    not followed: a time the submitter cannot set earlier (classroom/owner_exchange.py)."""
    latest = os.lstat(path).st_ctime
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            latest = max(latest, os.lstat(os.path.join(folder, name)).st_ctime)
    return datetime.fromtimestamp(latest, UTC).replace(tzinfo=None)


def claimed_time(path: str) -> datetime | None:
    """The time a submission's own ``timestamp.txt`` claims (UTC), or None if absent/unreadable."""
    stamp = os.path.join(path, "timestamp.txt")
    try:
        info = os.lstat(stamp)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1000:
            return None
        with open(stamp, encoding="utf-8") as f:
            return parse_utc(f.read().strip())
    except (OSError, ValueError, OverflowError):
        return None


def notebook_digests(folder: str) -> dict[str, str]:
    """{file name: sha256} of the notebooks directly in ``folder`` (links not followed)."""
    import hashlib

    found = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.endswith(".ipynb") and stat.S_ISREG(os.lstat(path).st_mode):
            with open(path, "rb") as f:
                found[name] = hashlib.sha256(f.read()).hexdigest()
    return found


class OwnerCollect(ExchangeCollect):
    """Collect each submission under the Unix user who owns its folder in ``inbound/``, with the
    time the file system gives it (see the module docstring)."""

    time_tolerance_seconds = Float(
        60.0,
        help="How much earlier than the submission's inode change time its own timestamp.txt may "
        "be and still be used (nbgrader's submit stamps the time, then copies the files).",
    ).tag(config=True)

    def _path_to_record(self, path):
        filename = os.path.split(path)[1]
        parts = filename.rsplit("+", 3)
        if len(parts) < 3:
            self.fail(f"Invalid filename: {filename}")
        claimed = parts[0]
        info = os.lstat(path)  # not os.stat: a symlink must not lend its target's owner
        if not stat.S_ISDIR(info.st_mode):
            self.log.error("%s is not a folder (a symlink?): not collected", path)
            return None
        try:
            owner = pwd.getpwuid(info.st_uid).pw_name
        except KeyError:
            self.log.error("%s belongs to uid %d, no account: not collected", path, info.st_uid)
            return None
        if owner != claimed:
            self.log.warning(
                "%s claims to be submitted by %s but was made by %s: recorded as %s's",
                filename,
                claimed,
                owner,
                owner,
            )
        trusted = trusted_time(path)
        stated = claimed_time(path)
        tolerance = self.time_tolerance_seconds
        # the file system's clock is coarse (a few ms): a stated time up to 1 s after it agrees
        if stated is not None and -1 <= (trusted - stated).total_seconds() <= tolerance:
            used, source = stated, "timestamp.txt (agrees with the file system)"
        else:
            used, source = trusted, "the file system's change time"
            self.log.warning(
                "%s: its timestamp.txt says %s, the file system %s: the file system's time is used",
                filename,
                stated if stated is not None else "nothing",
                trusted,
            )
        return {
            "username": owner,
            "filename": filename,
            "timestamp": used,
            "time": {
                "used": used.strftime(TIME_FORMAT),
                "source": source,
                "file_system": trusted.strftime(TIME_FORMAT),
                "timestamp_txt": stated.strftime(TIME_FORMAT) if stated else None,
                "folder_name": parts[2],
            },
        }

    def do_copy(self, src, dest, log=None):
        """nbgrader's copy, then the collected ``timestamp.txt`` is the time chosen at listing
        (never the student's file as it stands), recorded on the instructor's side too."""
        super().do_copy(src, dest, log)
        record = self._records_by_path.get(os.path.abspath(src))
        if record is None:
            return
        stamp = os.path.join(dest, "timestamp.txt")
        if os.path.lexists(stamp):
            os.unlink(stamp)
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(record["time"]["used"])
        folder = os.path.join(self.coursedir.root, ".grading")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        times = os.path.join(folder, "times", self.coursedir.assignment_id)
        os.makedirs(times, mode=0o700, exist_ok=True)
        path = os.path.join(times, record["username"] + ".json")
        data = {
            **record["time"],
            "collected_from": record["filename"],
            "how": "exchange",
            "notebooks": notebook_digests(dest),  # which collected files this time is for
        }
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(path + ".tmp", path)

    def init_src(self):
        """As nbgrader's, but the records are grouped by owner, and --student filters owners."""
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        # every submission of the assignment, whatever name it carries
        pattern = os.path.join(self.inbound_path, f"*+{self.coursedir.assignment_id}+*")
        records = [r for r in map(self._path_to_record, glob.glob(pattern)) if r is not None]
        wanted = self.coursedir.student_id
        if wanted and wanted != "*":
            records = [r for r in records if r["username"] in set(wanted.split(","))]
        by_owner = defaultdict(list)
        for record in records:
            by_owner[record["username"]].append(record)

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self._records_by_path = {
            os.path.abspath(os.path.join(self.inbound_path, r["filename"])): r for r in records
        }
        self.src_records = []
        for group in by_owner.values():
            latest_first = self._sort_by_timestamp(group)
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in latest_first if r["timestamp"] <= self.duedate]
                latest_first = on_time or latest_first
            self.src_records.append(latest_first[0])


class OwnerSubmit(ExchangeSubmit):
    """nbgrader's submit, with the submission's folder writable by its owner alone (0755).

    nbgrader 0.9.6's ``ExchangeSubmit.copy_files`` makes each new ``inbound/`` folder 0777 ("so the
    instructor can delete later"): a classmate who learns its name can add files to it, or delete
    and replace the student's own, and, since ``OwnerCollect`` dates a submission by the latest
    change under its folder, make it look late. Here the folder is 0755 once written: the
    instructor still reads and collects it (``OwnerCollect``), nobody but its owner (and root)
    changes it. Enable it for every user (classroom/nbgrader_config.py does):

        c.ExchangeFactory.submit = "owner_exchange.OwnerSubmit"
    """

    def copy_files(self):
        super().copy_files()
        # the folder nbgrader just wrote (students cannot list inbound/: it is 0733)
        path = os.path.join(self.inbound_path, self.assignment_filename)
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():  # never a link or another's
            os.chmod(path, 0o755)
