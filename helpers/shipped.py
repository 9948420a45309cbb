"""Results that ship with the course: an experiment too long for a live lesson, run by a tool.

A lesson must run top to bottom in about 20 seconds. When the evidence for a claim needs more
compute than that (several seeds, a sweep, a long run), the experiment runs in a tool and the
lesson reads its results (CONTRIBUTING.md, "Shipped results"):

1. ``tools/NAME.py`` runs the experiment and writes ``helpers/data/NAME.json`` with
   :func:`write_results`: the settings it ran with, the results, the seconds it took (wall and
   CPU), the torch version, all checked against the experiment's ``schema`` before writing.
2. The lesson (and :mod:`helpers` code) reads it with :func:`load_results`, which checks the file
   against the same schema, so a stale or hand-edited file fails loudly, naming the field.
   The lesson keeps a small live run that shows the same effect.
3. A ``slow``-marked test reruns the tool at reduced size (fewer seeds, fewer rows, the same
   settings otherwise) and checks that each rerun value agrees with the shipped values of the
   same quantity within their seed spread (:func:`agrees_within_spread`).

A schema is a nested value: a type (``int``, ``float``, ``str``, ``bool``) stands for a value of
that type (an ``int`` is accepted where ``float`` is asked for); ``[s]`` for a list whose items
all match ``s``; ``{"key": s, ...}`` for a dict with exactly those keys; ``{str: s}`` for a dict
from any string keys to values matching ``s``; ``None`` for JSON ``null``; a tuple ``(s1, s2)``
for a value matching one of them.
"""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "DATA",
    "ShippedResults",
    "check_schema",
    "write_results",
    "load_results",
    "timed",
    "agrees_within_spread",
    "experiment_command",
]

#: Where shipped results live: ``helpers/data`` (package data, installed with the course).
DATA = Path(__file__).resolve().parent / "data"
FORMAT = 1  # the envelope's version: bump it when the envelope (not an experiment) changes


@dataclass(frozen=True)
class ShippedResults:
    """What :func:`load_results` read: the experiment's ``name``, the ``tool`` that wrote it, the
    ``settings`` it ran with, its ``results``, the ``seconds`` and ``cpu_seconds`` it took and
    the ``torch`` version it ran on."""

    name: str
    tool: str
    settings: dict
    results: dict
    seconds: float
    cpu_seconds: float
    torch: str


def _where(path: str) -> str:
    return path or "the top level"


def check_schema(value, schema, path: str = "") -> None:
    """Raise a ``ValueError`` naming the first place where ``value`` does not match ``schema``
    (see the module docstring for the schema's form); return None when it matches."""
    if isinstance(schema, tuple):
        errors = []
        for option in schema:
            try:
                check_schema(value, option, path)
                return
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(f"{_where(path)} matches none of its allowed forms: {'; '.join(errors)}")
    if schema is None:
        if value is not None:
            raise ValueError(f"{_where(path)} must be null, got {value!r}")
        return
    if schema is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{_where(path)} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{_where(path)} must be a finite number, got {value!r}")
        return
    if schema is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{_where(path)} must be a whole number, got {value!r}")
        return
    if schema in (str, bool):
        if not isinstance(value, schema):
            raise ValueError(f"{_where(path)} must be a {schema.__name__}, got {value!r}")
        return
    if isinstance(schema, list):
        if len(schema) != 1:
            raise TypeError(f"a list schema holds one item schema, got {schema!r} at {path}")
        if not isinstance(value, list):
            raise ValueError(f"{_where(path)} must be a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            check_schema(item, schema[0], f"{path}[{i}]")
        return
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{_where(path)} must be a dict, got {type(value).__name__}")
        if set(schema) == {str}:
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(f"{_where(path)} must have string keys, got {key!r}")
                check_schema(item, schema[str], f"{path}.{key}" if path else key)
            return
        missing, extra = sorted(set(schema) - set(value)), sorted(set(value) - set(schema))
        if missing or extra:
            raise ValueError(
                f"{_where(path)} must have exactly the keys {sorted(schema)}; "
                f"missing {missing}, unexpected {extra}"
            )
        for key, item_schema in schema.items():
            check_schema(value[key], item_schema, f"{path}.{key}" if path else key)
        return
    raise TypeError(f"not a schema: {schema!r} at {_where(path)}")


def _name(name) -> str:
    if not isinstance(name, str) or not name or not name.replace("_", "").isalnum():
        raise ValueError(
            f"name must be a file stem of letters, digits and underscores (helpers/data/NAME.json), "
            f"got {name!r}"
        )
    return name


def _schema(settings_schema, results_schema) -> dict:
    return {
        "format": int,
        "name": str,
        "tool": str,
        "settings": settings_schema,
        "results": results_schema,
        "seconds": float,
        "cpu_seconds": float,
        "torch": str,
    }


def timed(run: Callable, *args, **kwargs) -> tuple[object, float, float]:
    """``run(*args, **kwargs)`` and the wall and CPU seconds it took (for :func:`write_results`)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = run(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def write_results(
    name: str,
    *,
    tool: str,
    settings: dict,
    results: dict,
    settings_schema,
    results_schema,
    seconds: float,
    cpu_seconds: float,
    folder: Path | None = None,
) -> Path:
    """Write ``folder/NAME.json`` (default folder: :data:`DATA`) after checking ``settings`` and
    ``results`` against their schemas. ``tool`` is the writing tool's path inside the repository
    (``"tools/NAME.py"``). Returns the path written."""
    name = _name(name)
    if not isinstance(tool, str) or not tool.startswith("tools/") or not tool.endswith(".py"):
        raise ValueError(f"tool must be the writing tool's path, tools/NAME.py; got {tool!r}")
    record = {
        "format": FORMAT,
        "name": name,
        "tool": tool,
        "settings": settings,
        "results": results,
        "seconds": float(seconds),
        "cpu_seconds": float(cpu_seconds),
        "torch": torch.__version__.split("+")[0],
    }
    check_schema(record, _schema(settings_schema, results_schema))
    path = (DATA if folder is None else Path(folder)) / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_results(
    name: str, settings_schema, results_schema, folder: Path | None = None
) -> ShippedResults:
    """Read ``folder/NAME.json`` (default: :data:`DATA`, the shipped data) and check it against
    the schemas; a missing file says which tool writes it."""
    name = _name(name)
    path = (DATA if folder is None else Path(folder)) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no shipped results {name!r} at helpers/data/{name}.json: run the tool that writes "
            f"them (tools/{name}.py or the one named in CONTRIBUTING.md)"
        )
    record = json.loads(path.read_text(encoding="utf-8"))
    try:
        check_schema(record, _schema(settings_schema, results_schema))
    except ValueError as e:
        raise ValueError(f"helpers/data/{name}.json does not match its schema: {e}") from None
    if record["format"] != FORMAT or record["name"] != name:
        raise ValueError(
            f"helpers/data/{name}.json has format {record['format']} and name "
            f"{record['name']!r}; expected format {FORMAT} and name {name!r}"
        )
    return ShippedResults(**{k: v for k, v in record.items() if k != "format"})


def agrees_within_spread(
    fresh: float, shipped: Sequence[float], *, minimum_spread: float = 0.0
) -> tuple[bool, str]:
    """Does a value measured again (a reduced rerun: one seed, or fewer rows) agree with the
    shipped values of the same quantity over seeds?

        spread = max(max(shipped) - min(shipped), minimum_spread)
        agrees  <=>  min(shipped) - spread <= fresh <= max(shipped) + spread

    ``minimum_spread`` keeps one shipped value (or identical ones) from asking for exact
    equality: set it to the precision the experiment reports (a regression guard, say so where
    it is used). Returns ``(agrees, sentence)``; the sentence gives the numbers either way.
    """
    values = [float(v) for v in shipped]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"shipped must hold one or more finite numbers, got {list(shipped)!r}")
    if isinstance(fresh, bool) or not isinstance(fresh, numbers.Real) or not math.isfinite(fresh):
        raise ValueError(f"fresh must be a finite number, got {fresh!r}")
    if not minimum_spread >= 0:
        raise ValueError(f"minimum_spread must be >= 0, got {minimum_spread!r}")
    lo, hi = min(values), max(values)
    spread = max(hi - lo, minimum_spread)
    ok = lo - spread <= fresh <= hi + spread
    sentence = (
        f"measured again {fresh:.6g}; shipped {lo:.6g} .. {hi:.6g} over {len(values)} value(s), "
        f"spread {spread:.3g}: {'agrees' if ok else 'outside'} [{lo - spread:.6g}, {hi + spread:.6g}]"
    )
    return ok, sentence


#: A tool's options that only say where its outputs go or its inputs come from.
OUTPUT_OPTIONS = frozenset(
    {
        "--raw",
        "--from-raw",
        "--aa-from-raw",
        "--followup-from-raw",
        "--doc",
        "--data-dir",
        "--figure",
    }
)


def experiment_command(tool: str, argv: Sequence[str]) -> str:
    """The command that ran a shipped experiment, for its page: ``python TOOL ARGS`` without the
    options of ``OUTPUT_OPTIONS`` (each with its value) and ``--no-doc``, so that no path of the
    machine that ran it ends up in the page (used by tools/side_by_side.py, tools/warmup_sweep.py)."""
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in OUTPUT_OPTIONS:
            skip = True
        elif a != "--no-doc":
            kept.append(a)
    return " ".join(["python", tool, *kept])
