"""What the instructor's notebook records for each hidden case: the reference every submission is
judged against, computed once per lesson and kept.

The reference is the instructor's source notebook (``source/lessonNN/``, written by
``coursework.py release``) run exactly as a submission is (:func:`grading.execute.run`: the same
confined kernel, the same seeds, the same cells skipped). It is cached in the course folder's
private ``.grading/reference/`` (mode 0700, never inside a graded folder or the sandbox), under
a key computed from what decides it: the source notebook's bytes, the release, the seeds (so the
instructor's secret), the ``helpers`` package's files and the grading code, and whether
demonstration cells are skipped. A lock file keeps parallel graders from computing it twice.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
from pathlib import Path

import nbformat

from . import execute

HERE = Path(__file__).resolve().parent


class ReferenceError(RuntimeError):
    """The instructor's notebook did not record every hidden case cleanly."""


def _digest_tree(folder: Path, h) -> None:
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())


def key(source: Path, release: Path, seeds: dict, skip: bool) -> str:
    import helpers

    h = hashlib.sha256()
    h.update(Path(source).read_bytes())
    h.update(Path(release).read_bytes())
    h.update(json.dumps(seeds, sort_keys=True).encode())
    h.update(b"skip" if skip else b"all")
    _digest_tree(Path(helpers.__file__).parent, h)
    _digest_tree(HERE, h)
    return h.hexdigest()[:24]


def reference(
    course_root: Path, assignment: str, notebook: str, secret: bytes, skip: bool = True
) -> dict:
    """{exercise: {case: [entry]}} recorded by the instructor's notebook (computed if needed)."""
    course_root = Path(course_root).resolve()
    source = course_root / "source" / assignment / f"{notebook}.ipynb"
    release = course_root / "release" / assignment / f"{notebook}.ipynb"
    if not source.exists() or not release.exists():
        raise ReferenceError(f"no {source} or {release}: run `coursework.py release` first")
    source_nb = nbformat.read(str(source), as_version=4)
    seeds = execute.seeds_for(source_nb, secret)
    folder = execute.grading_folder(course_root) / "reference" / assignment
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{notebook}-{key(source, release, seeds, skip)}.json"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return _load(path)
        outcome = execute.run(
            copy.deepcopy(source_nb),
            source_nb,
            nbformat.read(str(release), as_version=4),
            course_root,
            secret,
            skip=skip,
        )
        problems = list(outcome.problems) + list(outcome.records.problems)
        problems += [f"flagged: {f.get('reason')}" for f in outcome.records.flags]
        cases = {}
        for entry in outcome.records.cases:
            cases.setdefault(entry["exercise"], {}).setdefault(str(entry["case"]), []).append(entry)
            if "value" not in entry or entry.get("problems"):
                problems.append(
                    f"{entry['exercise']} case {entry['case'] + 1}: "
                    + (
                        entry.get("error")
                        and f"raised {entry['error']}"
                        or str(entry.get("problems"))
                    )
                )
        ids = execute.solution_ids(source_nb)
        problems += [f"{x}: no hidden case was recorded" for x in ids if x not in cases]
        if problems:
            raise ReferenceError(
                f"the instructor's notebook {source.name} did not record its hidden cases "
                f"cleanly: {'; '.join(problems[:5])}"
            )
        data = {"cases": cases, "skipped": outcome.skipped, "seconds": round(outcome.seconds, 1)}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
        return _load(path)


def _load(path: Path) -> dict:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {x: {int(k): v for k, v in cases.items()} for x, cases in data["cases"].items()}


def info(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
