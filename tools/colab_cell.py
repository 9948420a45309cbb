"""The first cell of every lesson for Colab, Kaggle or any Jupyter without the course installed.

    python tools/colab_cell.py                       # inserts or updates it in notebooks/*.ipynb
    python tools/colab_cell.py --check               # exit 1 if a notebook lacks it or differs
    python tools/colab_cell.py --tag v0.2.0 PATH...  # another release tag, other notebooks

The cell (:func:`cell_source`) does nothing, and prints nothing, where ``helpers`` can be imported
(a clone, Binder, the course's JupyterHub, ``pip install`` of the course), so the lessons' stored
outputs stay as they are. Where it is missing, it installs the course with ``%pip install
--no-deps`` from the repository at the course's release tag (``git+https://github.com/OWNER/
NAME@TAG``), so that the torch, numpy and matplotlib already there (Colab's, Kaggle's) are left
alone; then only those of the course's dependencies that are missing (on Colab and Kaggle:
anywidget), without version pins; and says what it did. The environment variable
``COURSE_PIP_SOURCE`` replaces the source (a wheel file, a fork; tests/test_colab_cell.py points
it at a local wheel).

The cell is tagged ``course-setup``: this tool finds it by that tag (so a second run changes
nothing), ``helpers.course.estimated_minutes`` does not count it, and the reading site
(tools/build_site.py) leaves it out of the pages. nbgrader's release keeps it as it is (no
nbgrader metadata): students get it. Inserted into an executed notebook, it takes execution
count 1 and every later count moves up by one, which is what a fresh run gives (it prints
nothing where ``helpers`` is installed); re-running the notebook (tools/run_notebooks.py) is
still the check.

Before students use the links, the tag must exist on GitHub (``git tag v0.1.0 && git push
--tags``): the default tag is ``v`` + the version in pyproject.toml.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
#: the repository the README's Binder and Colab links use (tests/test_colab_cell.py checks)
REPOSITORY = "transformer-block-course/course"
TAG = "course-setup"
ENV = "COURSE_PIP_SOURCE"
#: the course's run-time dependencies (pyproject.toml), as import names
DEPENDENCIES = ("torch", "numpy", "matplotlib", "ipywidgets", "anywidget")


def default_tag() -> str:
    """``v`` + the project's version in pyproject.toml (the course's release tag)."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return f"v{version}"


def cell_source(repository: str = REPOSITORY, tag: str | None = None) -> str:
    """The setup cell's code: the course from ``repository`` at ``tag`` where it is missing."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repository):
        raise ValueError(f"repository must be OWNER/NAME on GitHub, got {repository!r}")
    tag = default_tag() if tag is None else tag
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", tag):
        raise ValueError(f"tag must be a git tag such as v0.1.0, got {tag!r}")
    source = f"git+https://github.com/{repository}@{tag}"
    deps = ", ".join(f'"{m}"' for m in DEPENDENCIES)
    return f'''# Colab, Kaggle or any Jupyter without the course: this installs the course's `helpers`
# package (torch, numpy and matplotlib already there are left as they are). Where `helpers`
# is installed already (a clone, Binder, your own pip install) it does nothing.
import importlib.util

if importlib.util.find_spec("helpers") is None:
    import importlib.metadata
    import os

    _source = os.environ.get(
        "{ENV}", "{source}"
    )
    _missing = [
        m
        for m in ({deps})
        if importlib.util.find_spec(m) is None
    ]
    %pip install --quiet --no-deps {{_source}}
    if _missing:
        %pip install --quiet {{" ".join(_missing)}}
    importlib.invalidate_caches()
    _absent = [m for m in ("helpers", *_missing) if importlib.util.find_spec(m) is None]
    if _absent:  # %pip reports a failure but does not raise
        raise RuntimeError(f"pip did not install {{_absent}}: see its messages above")
    _kept = [
        f"{{m}} {{importlib.metadata.version(m)}}"
        for m in ("torch", "numpy", "matplotlib")
        if m not in _missing
    ]
    print(f"Installed the course's helpers from {{_source}} (pip --no-deps).")
    print("Also installed:", ", ".join(_missing) if _missing else "nothing else")
    print("Left as they were:", ", ".join(_kept) if _kept else "none was installed")'''


def setup_cell(repository: str = REPOSITORY, tag: str | None = None):
    """The cell itself (an nbformat code cell, unexecuted, tagged ``course-setup``)."""
    return nbformat.v4.new_code_cell(cell_source(repository, tag), metadata={"tags": [TAG]})


def is_setup_cell(cell) -> bool:
    return TAG in cell.get("metadata", {}).get("tags", [])


def apply(nb, repository: str = REPOSITORY, tag: str | None = None) -> bool:
    """Insert the setup cell in ``nb`` (an nbformat notebook, changed in place), right after the
    lesson's title cell (first if there is none), or update the one there. Returns whether anything
    changed."""
    new = setup_cell(repository, tag)
    present = [c for c in nb.cells if is_setup_cell(c)]
    if len(present) > 1:
        raise ValueError(f"{len(present)} cells are tagged {TAG!r}; a notebook has one")
    if present:
        cell = present[0]
        was = nb.cells.index(cell)
        nb.cells.remove(cell)
        place = position(nb)
        changed = cell.source != new.source or was != place
        cell.source = new.source
        nb.cells.insert(place, cell)
        return changed
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and code[0].get("execution_count") == 1:  # an executed notebook: counts move up
        for c in code:
            if c.get("execution_count") is not None:
                c.execution_count += 1
            for out in c.get("outputs", []):
                if out.get("execution_count") is not None:
                    out["execution_count"] += 1
        new.execution_count = 1
    nb.cells.insert(position(nb), new)
    return True


def position(nb) -> int:
    """Where the setup cell goes in ``nb`` (without it): after the lesson's title cell (a markdown
    cell that starts with a level-1 heading), so that a student sees the lesson's name first."""
    first = nb.cells[0] if nb.cells else None
    is_title = (
        first is not None
        and first.cell_type == "markdown"
        and first.source.lstrip().startswith("# ")
    )
    return 1 if is_title else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: notebooks/)")
    parser.add_argument("--repository", default=REPOSITORY, help="OWNER/NAME on GitHub")
    parser.add_argument("--tag", default=None, help="release tag (default: v + pyproject's)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    paths = args.paths or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    stale = []
    for path in paths:
        nb = nbformat.read(str(path), as_version=4)
        if apply(nb, args.repository, args.tag):
            stale.append(path)
            if not args.check:
                nbformat.write(nb, str(path))
    verb = "would change" if args.check else "changed"
    print(
        f"{verb} {len(stale)} of {len(paths)} notebooks" + "".join(f"\n  {p.name}" for p in stale)
    )
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
