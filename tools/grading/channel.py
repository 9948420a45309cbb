"""The grader's side of the recorder's channel: what the kernel is told, what it wrote back.

A run of the grading kernel gets a folder private to the grader (mode 0700, never inside the
sandbox, never a folder nbgrader writes) holding ``startup.json`` (the key, the seeds, the hidden
tests' sources, mode 0600), and a Unix socket the grader listens on (:class:`Receiver`, in a
second private folder with a short path: a socket's path is limited to 108 bytes). ``confine.py``
connects to it before the sandbox starts and gives the kernel the connected socket, to which the
sealed recorder of ``helpers.grading`` writes its signed lines.

Why a socket, and why the grader cuts it into requests. The key, the seeds and the hidden tests'
sources live in the student's process, so the grader must not depend on anything the student's
code does *after* a case was recorded. What the recorder writes to a socket has left the
student's process: it cannot be read back, rewritten or truncated from the kernel (a file could
be, by any code that found its descriptor and the key, e.g. through the garbage collector in a
cell added after the last check, or in a hook that runs inside the hidden tests' own request). A
reader thread here takes everything that arrives; after each request the grader sends
(:func:`execute.run`), :meth:`Receiver.mark` takes what arrived during that request, in order,
and labels it: a hidden test, or any other cell. :meth:`Receiver.records` then accepts a line only
if it carries the key's signature and the next sequence number, keeps a case only if it arrived
during a hidden-test request, and reports every case that arrived anywhere else (a cell the
student added, a hook, the kernel's shutdown) as ignored. A flag (what the recorder saw the
notebook's code reach for) counts wherever it arrived: once written it cannot be taken back, and
it voids the cases recorded after it (:mod:`verdicts`).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import select
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

#: The largest channel read (a notebook that writes more gets what fits, and a problem).
MAX_BYTES = 64 * 1024 * 1024


@dataclass
class Run:
    """One execution's private folder and key."""

    folder: Path
    key: bytes
    #: a second private folder (0700) with a short path, for the channel's socket
    sockets: Path | None = None

    @property
    def startup(self) -> Path:
        return self.folder / "startup.json"

    @property
    def records(self) -> Path:
        """The channel's socket (``confine.py`` connects to it)."""
        return (self.sockets or self.folder) / "records"

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.sockets is not None:
            shutil.rmtree(self.sockets, ignore_errors=True)


def new_run(base: Path | None = None) -> Run:
    """A fresh private folder (0700) and a fresh 32-byte key."""
    if base is not None:
        Path(base).mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = Path(tempfile.mkdtemp(prefix="grading-run-", dir=base))
    os.chmod(folder, 0o700)
    sockets = Path(tempfile.mkdtemp(prefix="grading-"))  # mode 0700 (mkdtemp), a short path
    return Run(folder, secrets.token_bytes(32), sockets)


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


#: How a stretch of the channel is labelled: what the grader had asked the kernel to run.
HIDDEN = "hidden tests"


class Receiver:
    """The grader's end of the channel (see the module docstring): listens on ``run.records``
    until ``confine.py`` has connected, then a reader thread takes everything the kernel writes
    (at most :data:`MAX_BYTES`; more is read and dropped, so the kernel never blocks on it)."""

    def __init__(self, run: Run):
        self.run = run
        self.key = run.key
        self.accepted = False
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(run.records))
        os.chmod(run.records, 0o600)
        self.listener.listen(1)
        self.listener.setblocking(False)
        self.conn: socket.socket | None = None
        self.data = bytearray()
        self.dropped = 0
        self.closed = False
        self.marked = 0
        self.segments: list[tuple[str, str, int, int]] = []  # (kind, label, start, end)
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._pump, name="grading-channel", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        if self.conn is not None or self.listener is None:
            return
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setblocking(False)
        self.conn, self.accepted = conn, True
        self.listener.close()  # one connection: confine.py's
        self.listener = None
        os.unlink(self.run.records)

    def _drain(self) -> None:
        """Everything readable now (the lock held)."""
        self._accept()
        while self.conn is not None and not self.closed:
            try:
                chunk = self.conn.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                return
            room = MAX_BYTES + 1 - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def _pump(self) -> None:
        while True:
            with self.lock:
                if self.closed or self.run is None:
                    return
                waiting = self.conn if self.conn is not None else self.listener
            try:
                select.select([waiting], [], [], 0.2)
            except (OSError, ValueError):
                pass  # closed meanwhile
            with self.lock:
                if self.run is None:
                    return
                self._drain()

    def mark(self, kind: str, label: str = "") -> None:
        """What arrived since the last mark belongs to the request that has just completed
        (``kind`` :data:`HIDDEN` for a check cell's hidden tests; the kernel wrote it before it
        replied, so it has all arrived)."""
        with self.lock:
            self._drain()
            end = min(len(self.data), MAX_BYTES)
            self.segments.append((kind, label, self.marked, end))
            self.marked = end

    def records(self) -> Records:
        """Stop reading (the kernel has exited) and check what arrived (the module docstring)."""
        self.mark("after the notebook", "the kernel's shutdown")
        self.close()
        return parse(bytes(self.data), self.segments, self.key, self.dropped, self.accepted)

    def close(self) -> None:
        with self.lock:
            for s in (self.conn, self.listener):
                if s is not None:
                    s.close()
            self.run, self.conn, self.listener = None, None, None
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=5)


def parse(
    data: bytes,
    segments: list[tuple[str, str, int, int]],
    key: bytes,
    dropped: int = 0,
    connected: bool = True,
) -> Records:
    """The signed entries of a channel's stream ``data`` cut into ``segments`` (each ``(kind,
    label, start, end)``, :meth:`Receiver.mark`): cases only from hidden-test segments."""
    out = Records()
    if not connected and not data:
        out.problems.append("the grading kernel never connected to the record channel")
        return out
    if len(data) > MAX_BYTES or dropped:
        out.problems.append(
            f"the record channel carried more than {MAX_BYTES} bytes; read no further"
        )
        data = data[:MAX_BYTES]
    expected = 0
    ignored: dict[str, int] = {}
    offset = 0
    for line in data.split(b"\n"):
        start, offset = offset, offset + len(line) + 1
        if not line:
            continue
        entry = _verified(line, key, expected)
        if entry is None:
            out.problems.append(
                f"a line the grader's recorder did not write was found at position {expected}"
            )
            out.broken_at = expected
            break
        expected += 1
        kind, label = next(((k, lab) for k, lab, a, b in segments if a <= start < b), ("", ""))
        if entry["kind"] == "case" and kind != HIDDEN:
            where = label or kind or "no request"
            ignored[where] = ignored.get(where, 0) + 1
            continue
        out.entries.append(entry)
    for where, n in ignored.items():
        out.problems.append(
            f"{n} case record(s) arrived outside the hidden tests ({where}) and were ignored"
        )
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
