"""Re-execute lesson notebooks in place, top to bottom, each on a fresh kernel.

    python tools/run_notebooks.py                 # every notebooks/*.ipynb
    python tools/run_notebooks.py notebooks/04_positional_encoding.ipynb

This is how notebooks are committed: executed, so that nbval can compare every stored output
with what the code produces today. Cells tagged ``raises-exception`` may raise; any other error
stops with the cell's number. Timing metadata is not recorded, so re-running an unchanged
notebook changes only what really changed (figures, widget ids).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def run(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        store_widget_state=True,
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nb.metadata.pop("widgets", None) if not nb.metadata.get("widgets") else None
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    for path in paths:
        seconds = run(path)
        print(f"{path.name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
