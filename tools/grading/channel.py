"""The grader's side of the recorder's channel: what the kernel is told, what it wrote back.

A run of the grading kernel gets a folder private to the grader (mode 0700, never inside the
sandbox, never a folder nbgrader writes): ``startup.json`` (the key, the seeds, the hidden tests'
sources, mode 0600) and ``records`` (created by ``confine.py``, append-only, written by the sealed
recorder of ``helpers.grading``). After the kernel has exited, :func:`read` opens ``records``
without following a symlink, checks that it is a regular file with one link, of at most
:data:`MAX_BYTES`, and accepts a line only if it carries the key's signature and the next
sequence number. Everything else is reported, never trusted.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: The largest channel read (a notebook that writes more gets what fits, and a problem).
MAX_BYTES = 64 * 1024 * 1024


@dataclass
class Run:
    """One execution's private folder and key."""

    folder: Path
    key: bytes

    @property
    def startup(self) -> Path:
        return self.folder / "startup.json"

    @property
    def records(self) -> Path:
        return self.folder / "records"

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def new_run(base: Path | None = None) -> Run:
    """A fresh private folder (0700) and a fresh 32-byte key."""
    if base is not None:
        Path(base).mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = Path(tempfile.mkdtemp(prefix="grading-run-", dir=base))
    os.chmod(folder, 0o700)
    return Run(folder, secrets.token_bytes(32))


def write_startup(run: Run, public: bool, seeds: dict, hidden: list[str]) -> None:
    """What the sealed recorder is told (``helpers.grading._seal``): its key, whether there is
    an instructor's secret (else the notebook's own defaults), the seeds derived from it, the
    hidden tests' sources."""
    data = json.dumps(
        {"key": run.key.hex(), "public": public, "seeds": {} if public else seeds, "hidden": hidden}
    )
    fd = os.open(run.startup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data)


@dataclass
class Records:
    """What the channel held: accepted entries in order, and what was wrong with it."""

    entries: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: the sequence number from which nothing is trusted (a line the recorder did not write)
    broken_at: int | None = None

    @property
    def cases(self) -> list[dict]:
        return [e for e in self.entries if e.get("kind") == "case"]

    @property
    def flags(self) -> list[dict]:
        return [e for e in self.entries if e.get("kind") == "flag"]


def read(run: Run) -> Records:
    """The signed entries of a run's channel (see the module docstring)."""
    out = Records()
    try:
        fd = os.open(run.records, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        out.problems.append("the grading kernel wrote no record channel (it did not start?)")
        return out
    except OSError as e:
        out.problems.append(f"the record channel could not be opened safely ({e.strerror})")
        return out
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            out.problems.append("the record channel is not a plain file with one link")
            return out
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        out.problems.append(
            f"the record channel holds more than {MAX_BYTES} bytes; read no further"
        )
        data = data[:MAX_BYTES]
    expected = 0
    for line in data.split(b"\n"):
        if not line:
            continue
        entry = _verified(line, run.key, expected)
        if entry is None:
            out.problems.append(
                f"a line the grader's recorder did not write was found at position {expected}"
            )
            out.broken_at = expected
            break
        out.entries.append(entry)
        expected += 1
    return out


def _verified(line: bytes, key: bytes, seq: int) -> dict | None:
    try:
        mac, body = line.split(b" ", 1)
        good = hmac.digest(key, body, "sha256").hex().encode()
        if not hmac.compare_digest(mac, good):
            return None
        entry = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(entry, dict) or entry.get("seq") != seq:
        return None
    if entry.get("kind") not in ("case", "flag"):
        return None
    return entry
