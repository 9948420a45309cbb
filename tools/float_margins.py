"""How far each printed float of the stored notebook outputs is from a rounding boundary.

    python tools/float_margins.py                       # every notebooks/*.ipynb
    python tools/float_margins.py notebooks/05_residuals_and_layer_norm.ipynb --all

Each notebook is executed once on a fresh kernel (not written back) with ``HELPERS_FLOAT_LOG``
set, so that every :func:`helpers.printing.fmt` call records the exact value it printed and the
precision it was computed in. For each printed number the report gives

    margin = (distance from the value to the nearest rounding boundary) / (|value| * bound)

where ``bound`` is the relative error bound of its precision (``helpers.printing.ERROR_BOUNDS``).
A margin >= 1 means the number prints the same on any machine whose result stays within the
bound; a margin < 1 is a number that another CPU, kernel path or thread count may print
differently (print fewer digits, or compute it in float64). It also lists every float-looking
number in the stored outputs that did not come from ``fmt`` and is not a literal of the cell's or
the helpers' source: its precision is unknown, so the rule (CONTRIBUTING.md) does not allow it.
The test suite runs :func:`analyse` on the log of its second, portable-kernel run of each notebook
(tests/test_portable_outputs.py). Exits 1 when anything is reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent

from helpers.printing import rounding_margin  # noqa: E402

#: A float as a notebook prints it: 0.2678, -1.3416, 2.11e+08, 4.732e-04 (not 2.13.0 or 2,099,712).
FLOAT = re.compile(r"(?<![\w.])-?(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])")

#: An image embedded in an HTML output (helpers/figures.py): base64, where "3e5" is no number.
_DATA_URI = re.compile(r"data:image/[\w.+-]+;base64,[A-Za-z0-9+/=]+")

#: The smallest margin accepted (in units of the precision's error bound).
MIN_MARGIN = 1.0


@dataclass
class Printed:
    cell: int  # index of the cell in the notebook
    printed: str
    value: float
    precision: str
    bound: float

    @property
    def margin(self) -> float:
        distance = rounding_margin(self.value, self.printed)
        if self.bound == 0:
            return math.inf if distance > 0 else 0.0
        return distance / self.bound


@dataclass
class Report:
    notebook: str
    printed: list[Printed] = field(default_factory=list)
    unaccounted: list[tuple[int, str]] = field(default_factory=list)  # (cell index, text)

    @property
    def too_close(self) -> list[Printed]:
        return [p for p in self.printed if p.margin < MIN_MARGIN]

    @property
    def ok(self) -> bool:
        return not self.too_close and not self.unaccounted

    @property
    def smallest(self) -> Printed | None:
        return min(self.printed, key=lambda p: p.margin, default=None)

    def lines(self, show_all: bool = False) -> list[str]:
        out = [f"{self.notebook}: {len(self.printed)} printed floats from fmt"]
        rows = sorted(self.printed, key=lambda p: p.margin)
        for p in rows if show_all else self.too_close:
            flag = "TOO CLOSE" if p.margin < MIN_MARGIN else "ok"
            out.append(
                f"  cell {p.cell:3d}  {p.printed:>12}  {p.precision:8}  margin {p.margin:10.3g}  {flag}"
            )
        if self.smallest is not None:
            s = self.smallest
            out.append(
                f"  smallest margin {s.margin:.3g} (cell {s.cell}, {s.printed}, {s.precision})"
            )
        for cell, text in self.unaccounted:
            out.append(f"  cell {cell:3d}  {text:>12}  printed without fmt: precision unknown")
        return out


def _output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
        else:
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue  # a live widget: not compared by nbval
            for mime in ("text/plain", "text/html", "text/markdown"):
                if mime in data:
                    text = data[mime]
                    text = "".join(text) if isinstance(text, list) else text
                    # a described figure's PNG inside its HTML is bytes, not printed numbers
                    parts.append(_DATA_URI.sub("data:", text))
    return "\n".join(parts)


def _helpers_literals() -> set[str]:
    literals: set[str] = set()
    for path in (ROOT / "helpers").rglob("*.py"):
        literals.update(FLOAT.findall(path.read_text(encoding="utf-8")))
    return literals


def _values(tokens) -> set[float]:
    return {float(t) for t in tokens}


def read_log(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def analyse(notebook: Path, log: list[dict]) -> Report:
    """Match the ``fmt`` log of one run of ``notebook`` with its stored outputs."""
    nb = nbformat.read(notebook, as_version=4)
    report = Report(Path(notebook).name)
    by_cell: dict[str, list[dict]] = {}
    for entry in log:
        if entry.get("cell") is not None:
            by_cell.setdefault(entry["cell"], []).append(entry)
    literals = _values(_helpers_literals())
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cell.get("execution_count") is None:
            continue  # stored unexecuted: nbval does not compare it
        text = _output_text(cell)
        if not text:
            continue
        logged = by_cell.get(hashlib.sha1(cell.source.encode("utf-8")).hexdigest(), [])
        accounted = set()
        for entry in logged:
            if entry["printed"] in text:
                accounted.add(entry["printed"])
                report.printed.append(
                    Printed(
                        index,
                        entry["printed"],
                        float(entry["value"]),
                        entry["precision"],
                        float(entry["bound"]),
                    )
                )
        source_literals = _values(FLOAT.findall(cell.source))
        for token in FLOAT.findall(text):
            if token in accounted or float(token) in source_literals or float(token) in literals:
                continue
            report.unaccounted.append((index, token))
    return report


def execute_with_log(notebook: Path, log: Path, timeout: int = 600) -> None:
    """Run ``notebook`` top to bottom on a fresh kernel with ``HELPERS_FLOAT_LOG=log``."""
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    os.environ["HELPERS_FLOAT_LOG"] = str(log)
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(Path(notebook).parent)}},
            allow_errors=True,
        ).execute()
    finally:
        os.environ.pop("HELPERS_FLOAT_LOG", None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument(
        "--all", action="store_true", help="list every printed float, not only those too close"
    )
    parser.add_argument("--log", type=Path, help="analyse this fmt log instead of executing")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    ok = True
    for path in paths:
        if args.log:
            log = read_log(args.log)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                log_path = Path(tmp) / "floats.jsonl"
                execute_with_log(path, log_path)
                log = read_log(log_path)
        report = analyse(path, log)
        print("\n".join(report.lines(args.all)))
        ok = ok and report.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
