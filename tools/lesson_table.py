"""The table of lessons an instructor assigns from: each notebook's part (core or "Going
further"), estimated minutes (``helpers.course.estimated_minutes``), exercises and points.

    python tools/lesson_table.py            # prints the Markdown table
    python tools/lesson_table.py --write    # writes it into docs/INSTRUCTORS.md between its markers

Points are nbgrader's: the ``points`` of every graded cell of the instructor's notebook, split
into those the autograder gives (check cells) and those an instructor gives by hand (written
answers: graded cells that are also solution cells). ``tests/test_lesson_table.py`` fails when the
guide's table differs from what this prints, so the guide follows the notebooks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from helpers.course import NOTEBOOKS, estimated_minutes  # noqa: E402

GUIDE = ROOT / "docs" / "INSTRUCTORS.md"
README = ROOT / "README.md"
#: where the course is published: the README's Binder and Colab links (tools/build_site.py's
#: default --repository, tools/colab_cell.py's REPOSITORY)
REPOSITORY = "transformer-block-course/course"
BEGIN = "<!-- lesson table: tools/lesson_table.py --write -->"
END = "<!-- end of lesson table -->"


def points(notebook: dict) -> tuple[float, float]:
    """(autograded, graded by hand) points of an nbgrader instructor notebook."""
    auto = manual = 0.0
    for cell in notebook["cells"]:
        grader = cell.get("metadata", {}).get("nbgrader", {})
        if not grader.get("grade"):
            continue
        value = float(grader.get("points", 0) or 0)
        if grader.get("solution") or cell["cell_type"] == "markdown":
            manual += value  # a written answer: nbgrader leaves it to the instructor
        else:
            auto += value
    return auto, manual


def _number(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def rows() -> list[dict]:
    out = []
    for entry in NOTEBOOKS:
        path = ROOT / "notebooks" / entry.notebook
        nb = json.loads(path.read_text())
        minutes = estimated_minutes(nb)
        auto, manual = points(nb)
        out.append(
            {
                "key": entry.key,
                "assignment": entry.assignment,
                "part": "going further" if entry.further else "core",
                "notebook": entry.notebook,
                "minutes": minutes["total"],
                "exercises": minutes["n_exercises"],
                "auto": auto,
                "manual": manual,
                "claims": ", ".join(entry.claims),
            }
        )
    return out


def table() -> str:
    lines = [
        "| lesson | assignment | part | notebook | estimated minutes | exercises | points (autograded + by hand) | claims |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows():
        pts = _number(r["auto"]) + (f" + {_number(r['manual'])}" if r["manual"] else "")
        lines.append(
            f"| {r['key']} | `{r['assignment']}` | {r['part']} | `{r['notebook']}` | "
            f"{round(r['minutes'])} | {r['exercises']} | {pts} | {r['claims']} |"
        )
    return "\n".join(lines)


def colab_url(notebook: str, repository: str = REPOSITORY, branch: str = "main") -> str:
    """The "Open in Colab" address of a lesson notebook (Colab opens it from GitHub)."""
    return (
        f"https://colab.research.google.com/github/{repository}/blob/{branch}/notebooks/{notebook}"
    )


def readme_link_problems(text: str) -> list[str]:
    """What is wrong with the README's lesson table: every notebook of the course needs a row with
    its Binder and its Colab link, both to ``REPOSITORY``. Empty: nothing."""
    problems = []
    rows = [line for line in text.splitlines() if line.startswith("| ") and "notebooks/" in line]
    for entry in NOTEBOOKS:
        row = [r for r in rows if f"](notebooks/{entry.notebook})" in r]
        if len(row) != 1:
            problems.append(f"{entry.notebook}: {len(row)} rows in the README's lesson table")
            continue
        binder = f"https://mybinder.org/v2/gh/{REPOSITORY}/main?urlpath=lab/tree/notebooks/{entry.notebook}"
        for name, url in (("Binder", binder), ("Colab", colab_url(entry.notebook))):
            if f"]({url})" not in row[0]:
                problems.append(f"{entry.notebook}: no {name} link {url}")
    return problems


def guide_table(text: str) -> str:
    """The table between the guide's markers (``ValueError`` if they are missing)."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"docs/INSTRUCTORS.md has no lesson table markers ({BEGIN!r} … {END!r})")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the table into the guide")
    args = parser.parse_args(argv)
    if not args.write:
        print(table())
        return 0
    text = GUIDE.read_text()
    guide_table(text)  # the markers are there
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    GUIDE.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
