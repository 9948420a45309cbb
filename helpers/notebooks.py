"""The lesson notebooks (4 to 10) for a student who installed the course with pip.

    python -m helpers.notebooks DIR           # the student versions of every lesson, into DIR
    python -m helpers.notebooks DIR --full    # the full versions (from a clone of the repository)

A student version is what ``nbgrader generate_assignment`` gives students (the course's release,
``tools/coursework.py release``): in every cell the lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` become the course's stub (``# YOUR CODE HERE`` / ``raise
NotImplementedError()``, indented as the marker), a solution cell without markers becomes the stub
as a whole (a written answer becomes ``YOUR ANSWER HERE``), the lines between ``### BEGIN HIDDEN
TESTS`` and ``### END HIDDEN TESTS`` are removed, and every output is cleared.

Where the notebooks come from: the committed ``notebooks/`` folder of the repository is the one
source. A wheel built from the project (``pip wheel .``; ``setup.py``) holds the *student*
versions only, written from that folder at build time into ``helpers/lessons/``, so a wheel handed
to students holds no solution and no hidden test. The full versions are therefore available only
from a clone of the repository (an editable install finds ``notebooks/`` beside ``helpers/``) or
from a folder given with ``--source``.

This module uses the standard library only (``setup.py`` loads it by its path at build time).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

__all__ = ["student_version", "lesson_sources", "write_lessons", "main"]

#: the stub nbgrader puts in place of a code solution (nbgrader/nbgrader_config.py,
#: ``ClearSolutions.code_stub``) and of a written one (nbgrader's default ``text_stub``)
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
TEXT_STUB = "YOUR ANSWER HERE"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"

PACKAGE = Path(__file__).resolve().parent
#: the student versions inside an installed wheel (written by setup.py's build step)
SHIPPED = PACKAGE / "lessons"
#: the committed notebooks of a clone (or an editable install) of the repository
CLONE = PACKAGE.parent / "notebooks"
PATTERN = "[0-9]*.ipynb"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _replace_solutions(source: str, stub: str) -> tuple[str, bool]:
    out, inside, replaced = [], False, False
    for line in source.split("\n"):
        if BEGIN_SOLUTION in line:
            if inside:
                raise ValueError(f"nested {BEGIN_SOLUTION!r} in a cell:\n{source}")
            inside = replaced = True
            indent = re.match(r"\s*", line).group(0)
            out += [indent + s for s in stub.split("\n")]
        elif END_SOLUTION in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN_SOLUTION!r} without {END_SOLUTION!r} in a cell:\n{source}")
    return "\n".join(out), replaced


def _remove_hidden_tests(source: str) -> str:
    out, inside = [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            if inside:
                raise ValueError(f"nested {BEGIN_HIDDEN!r} in a cell:\n{source}")
            inside = True
        elif END_HIDDEN in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN_HIDDEN!r} without {END_HIDDEN!r} in a cell:\n{source}")
    return "\n".join(out)


def student_version(notebook: dict) -> dict:
    """Lessons 4-10. The student version of an instructor's notebook (nbformat 4, as a dict): a
    new dict, solutions replaced by the stub and hidden tests removed as nbgrader's
    ``ClearSolutions`` and ``ClearHiddenTests`` do, every output and execution count cleared
    (and the saved state of the explorers, which belongs to those outputs)."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise TypeError(
            f"notebook must be a notebook as a dict (json.load of an .ipynb file), got "
            f"{type(notebook).__name__}"
        )
    nb = copy.deepcopy(notebook)
    nb.get("metadata", {}).pop("widgets", None)  # the instructor's explorers' saved state
    for cell in nb["cells"]:
        kind = cell.get("cell_type")
        stub = CODE_STUB if kind == "code" else TEXT_STUB
        source, replaced = _replace_solutions(_source(cell), stub)
        solution = bool((cell.get("metadata", {}).get("nbgrader") or {}).get("solution"))
        if solution and not replaced:
            source = stub
        cell["source"] = _remove_hidden_tests(source)
        if kind == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def lesson_sources(full: bool = False, source: str | Path | None = None) -> list[Path]:
    """Lessons 4-10. The notebook files ``write_lessons`` reads: those of ``source`` if given,
    else the student versions shipped in the installed package, else the clone's ``notebooks/``.
    ``full=True`` refuses the shipped ones (they hold no solutions)."""
    if source is not None:
        folder = Path(source)
        if not folder.is_dir():
            raise ValueError(f"source must be a folder of lesson notebooks, got {str(source)!r}")
    elif CLONE.is_dir() and any(CLONE.glob(PATTERN)):
        folder = CLONE
    elif full:
        raise ValueError(
            "full=True: the installed package ships the student versions only (a wheel given to "
            "students holds no solutions); run from a clone of the course's repository, or pass "
            "source=, the folder of the full notebooks"
        )
    else:
        folder = SHIPPED
    paths = sorted(folder.glob(PATTERN))
    if not paths:
        raise ValueError(f"no lesson notebooks ({PATTERN}) in {folder}")
    return paths


def write_lessons(
    directory: str | Path, full: bool = False, source: str | Path | None = None
) -> list[Path]:
    """Lessons 4-10. Write every lesson notebook into ``directory`` (created if missing): the
    student versions, or with ``full=True`` the full ones (solutions, hidden tests and stored
    outputs, as committed). Refuses to overwrite a notebook already there (a student's work).
    Returns the paths written."""
    if not isinstance(full, bool):
        raise TypeError(f"full must be True or False, got {full!r}")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"directory must be a folder, got the file {str(directory)!r}")
    paths = lesson_sources(full, source)
    existing = [p.name for p in paths if (directory / p.name).exists()]
    if existing:
        raise FileExistsError(
            f"{directory} already holds {', '.join(existing)}: nothing was written (move them "
            "away first, so that no work is overwritten)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if not full and path.parent != SHIPPED:
            nb = student_version(nb)
        target = directory / path.name
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.notebooks DIR [--full] [--source FOLDER]`` (lessons 4-10)."""
    parser = argparse.ArgumentParser(
        prog="python -m helpers.notebooks", description="Write the course's lesson notebooks."
    )
    parser.add_argument("directory", help="the folder to write the lessons into")
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full versions (solutions included): from a clone of the repository only",
    )
    parser.add_argument("--source", help="a folder of the instructor's notebooks to read instead")
    args = parser.parse_args(argv)
    try:
        written = write_lessons(args.directory, full=args.full, source=args.source)
    except (ValueError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    kind = "full" if args.full else "student"
    print(f"wrote the {kind} versions of {len(written)} lessons into {args.directory}:")
    for path in written:
        print(f"  {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
