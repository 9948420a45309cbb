"""Which cells a graded run executes: every cell an exercise needs, none of the course's
demonstrations that no exercise needs (issue "Grading a class of three hundred").

A cell of a submission is one of the **course's cells** when its source is exactly that of the
release cell it lines up with (the cells are aligned by content with ``difflib``, not by a tag or
an id the student could edit). The grader always runs every exercise cell (solution and check),
every cell the student added or changed, and every course cell that one of those needs, in the
notebook's order; the other course cells (training runs, sweeps, figures) are skipped.

The rule is meant to be safe rather than sharp: a course cell is skipped only when nothing it
could touch is anything a needed cell reads. From each cell's source alone (``ast``, ``symtable``;
a function's own local variables are not the globals of those names):

* **What a needed cell observes**: every global name it reads, when it runs or in its functions;
  ``del x`` and ``x += ...`` read x (they fail or change it if x is unbound or another object),
  and a function that declares ``global x`` counts among the cells that bind x.
* **What a course cell could touch**: every global name it mentions (reads, binds, changes, passes
  on: any mention may change the object in place), its functions' and classes' too, and, closed
  over the cells that bind those names, everything those cells mention (an object may carry code
  or share parts with what built it: ``p = P(); p.go()``, ``row = data[0]``). A bare call
  ``f(...)`` of a function or class touches what its code mentions, not the name ``f``.
* A course cell before the last needed cell is needed when it could touch what a needed cell
  observes; what it reads is then observed too, to a fixpoint.
* Names bound only by imports (modules, imported functions) are left out of both, and instead a
  cell **always runs** that assigns or deletes an attribute or item of one (``math.pi = 3``,
  ``plt.rcParams[...] = ...``, ``sys.modules[...] = ...``), mentions a setter of global state
  (``set_default_dtype``, ``set_grad_enabled``, ``filterwarnings``, ``setattr``, ``environ``,
  ``reload`` ..., however it is spelled or called), may write a file (``open``, ``save``,
  ``dump``, ``write_text`` ...), holds an IPython magic or shell escape, declares ``global`` or
  ``nonlocal``, or does not parse.

Nothing is skipped at all when a cell that runs reaches the namespace as a whole (``globals()``,
``exec``, ``In``/``Out``/``_``, ``get_ipython``, ...); a course cell that does always runs and may
bind any name. A name a needed cell reads that no cell binds makes every cell that may bind names
the parser cannot see (``from x import *``, ``exec``) needed. Not tracked, by design: the random
state (the hidden tests seed their own generators; a test of every lesson checks that the verdicts
are the same with and without skipping), and what the course's own helpers change inside
themselves when a skipped cell calls them, beyond the objects passed to them.
tests/test_grading_plan.py runs small notebooks whole and planned and compares what the exercise
sees.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .cellfacts import _BUILTINS, CellFacts, _facts_or_worst, facts, python_source

__all__ = ["CellFacts", "Plan", "course_cells", "facts", "plan", "python_source"]


@dataclass
class Plan:
    """The cells a graded run executes (indices into ``nb.cells``) and those it skips."""

    run: set[int]
    skipped: list[int]
    note: str = ""
    why: dict[int, str] = field(default_factory=dict)  # needed course cell -> first reason


def course_cells(nb, release) -> dict[int, int]:
    """{submission cell index: release cell index} for cells whose source is the release's."""
    mine = [(c.cell_type, c.source) for c in nb.cells]
    theirs = [(c.cell_type, c.source) for c in release.cells]
    matcher = difflib.SequenceMatcher(None, mine, theirs, autojunk=False)
    matched = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            matched[block.a + k] = block.b + k
    return matched


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def plan(nb, release, enabled: bool = True) -> Plan:
    """Which code cells of ``nb`` (a submission, or the instructor's source) to execute, given
    the student ``release`` of the same lesson (see the module docstring)."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if not enabled:
        return Plan(set(code), [], "skipping is off")
    matched = course_cells(nb, release)
    info = {i: _facts_or_worst(nb.cells[i].source) for i in code}
    binders: dict[str, list[int]] = {}
    for i in code:
        for name in info[i].binds:
            binders.setdefault(name, []).append(i)
    # names bound by imports only: modules and what was imported from them
    imported = {n for n, js in binders.items() if all(n in info[j].imports for j in js)}
    unbound_builtins = _BUILTINS - set(binders)
    ignored = imported | unbound_builtins
    # names for an imported module or a part of one (``m = math``, ``env = os.environ``)
    modules = set(imported) | {"builtins", "sys"}
    # names whose use may have an effect: ``sa = setattr``, a function that sets global state
    effect_names: set[str] = set()
    grew = True
    while grew:
        size = len(modules) + len(effect_names)
        for i in code:
            f = info[i]
            modules |= {n for n, root in f.aliases.items() if root in modules}
            effect_names |= f.effect_aliases
            if f.later_effects or f.later & effect_names:
                effect_names |= f.defs
            effect_names |= {n for n, root in f.aliases.items() if root in effect_names}
        grew = len(modules) + len(effect_names) > size
    always: dict[int, str] = {}
    for i in code:
        cell, twin = nb.cells[i], release.cells[matched[i]] if i in matched else None
        facts_i = info[i]
        into_imported = sorted(facts_i.store_roots & modules)
        uses_effect = sorted((facts_i.now | facts_i.later) & effect_names - facts_i.defs)
        if _nbgrader(cell).get("solution") or _nbgrader(cell).get("grade"):
            always[i] = "an exercise cell"
        elif twin is not None and (_nbgrader(twin).get("solution") or _nbgrader(twin).get("grade")):
            always[i] = "an exercise cell"
        elif twin is None:
            always[i] = "added or changed by the student"
        elif facts_i.effects:
            always[i] = facts_i.effects[0]
        elif into_imported:
            always[i] = f"assigns into {into_imported[0]!r}, an imported module or name"
        elif uses_effect:
            always[i] = f"uses {uses_effect[0]!r}, which may change global state"
        elif facts_i.dynamic:
            always[i] = "reaches the namespace as a whole"
    if any(info[i].dynamic for i in always):
        return Plan(set(code), [], "a cell that always runs reads the namespace as a whole")
    star = [i for i in code if info[i].star or info[i].dynamic]

    def _function_only(name: str, j: int) -> bool:
        """Cell j binds ``name`` by a plain def: what it carries is its body's code (a class
        also carries what its bases and body mention at once)."""
        return name in info[j].plain_defs and name not in info[j].classes

    def binding(name: str, before: int | None) -> list[int]:
        """The cells whose binding of ``name`` a cell at ``before`` may see: back to the last
        unconditional one before it; every one for code run later (``before`` None)."""
        cells = binders.get(name, [])
        if before is None:
            return cells
        seen = []
        for j in reversed([j for j in cells if j < before]):
            seen.append(j)
            if name in info[j].binds_always:
                break
        return seen

    def carried(name: str, before: int | None) -> list[tuple]:
        """(name, when) for what the cells that bound ``name`` (as a cell at ``before`` sees it)
        mention: their functions' code (run later), and, unless it is a plain def there, all that
        the binding cell mentions (at its time)."""
        found = []
        for j in binding(name, before):
            found += [(other, None) for other in info[j].later - ignored]
            if not _function_only(name, j):
                found += [(other, j) for other in info[j].now - ignored]
        return found

    # functions and classes (bound by def or class only): called or passed on, they are not
    # taken as changed themselves (their attributes), only as running their code
    functions = {n for n, js in binders.items() if all(n in info[j].plain_defs for j in js)}
    # numbers, strings and tuples of them: a mention cannot change one, only a binding
    values = {n for n, js in binders.items() if all(n in info[j].values for j in js)}
    reach_cache: dict[tuple, frozenset] = {}

    def reach(name: str, before: int | None) -> frozenset:
        """Every name an object or code reached from ``name`` (as a cell at ``before`` sees it)
        may touch, itself included: what the cells that bound it mention (its functions' code;
        unless it is a def or class there, all that the binding mentions), and so on."""
        if (name, before) not in reach_cache:
            found, seen, todo = set(), set(), [(name, before)]
            while todo:
                pair = todo.pop()
                if pair in seen:
                    continue
                seen.add(pair)
                if pair[0] in values:
                    continue  # mentioned, not changed (a binding is what changes it)
                found.add(pair[0])
                todo += carried(*pair)
            reach_cache[(name, before)] = frozenset(found)
        return reach_cache[(name, before)]

    def touches_of(i: int) -> set[str]:
        f = info[i]
        code_only = (f.called | f.bare) & functions
        found: set[str] = set(f.binds)  # what it binds (an import, a def or class too)
        for name in (f.now - code_only - values) - ignored:
            found |= reach(name, i)
        for name in f.later - ignored:
            found |= reach(name, None)
        for name in code_only - ignored:  # its code's mentions, not the name
            for pair in carried(name, i):
                found |= reach(*pair)
        return found

    touches = {i: touches_of(i) for i in code}

    needed = dict(always)
    observed: dict[str, int] = {}  # name -> the first needed cell found reading it
    todo = list(always)
    while todo:
        newly = []
        for n in todo:
            for name in (info[n].reads | info[n].reads_later) - unbound_builtins:
                observed.setdefault(name, n)
                if not binders.get(name):
                    for i in star:
                        if i not in needed:
                            needed[i] = f"may bind {name!r} (cell {n} reads it)"
                            newly.append(i)
        last = max(needed)
        for i in code:
            if i in needed or i > last:
                continue
            hit = sorted(touches[i] & set(observed))
            if hit:
                needed[i] = f"may touch {hit[0]!r}, which cell {observed[hit[0]]} reads"
                newly.append(i)
        todo = newly
    run = set(needed)
    skipped = [i for i in code if i not in run]
    return Plan(run, skipped, "", needed)
