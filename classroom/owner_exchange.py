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

This relies on Unix ownership: on Zero to JupyterHub every pod runs as the same uid (jovyan), so
ownership names nobody; see docs/INSTRUCTORS.md for what to use there.
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
from collections import defaultdict

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import check_mode, parse_utc


class OwnerCollect(ExchangeCollect):
    """Collect each submission under the Unix user who owns its folder in ``inbound/``."""

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
        return {"username": owner, "filename": filename, "timestamp": parse_utc(parts[2])}

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
        self.src_records = []
        for group in by_owner.values():
            latest_first = self._sort_by_timestamp(group)
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in latest_first if r["timestamp"] <= self.duedate]
                latest_first = on_time or latest_first
            self.src_records.append(latest_first[0])
