"""The audit's report: one verdict per check of the sheet's checklist, readable as text and HTML.

A :class:`CheckResult` holds a check's status ("passed", "failed" or "undecided"), one sentence of
finding, the observations behind it (``evidence``) and the modules the check took for what
(``took``: the embedding, the blocks, the sublayers, the norms, the feed-forward, the output), so
that a reader sees a misidentification at a glance. :class:`AuditReport` gathers the five.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

__all__ = ["CHECKS", "STATUSES", "CheckResult", "AuditReport"]

#: The checklist at the end of the sheet, one line per check.
CHECKS = {
    "K1": "Positional encoding is added to the token embeddings before the first block.",
    "K2": "Every sublayer is wrapped in a residual connection; layer norm placement is deliberate.",
    "K3": "The feed-forward block expands then contracts (d_model -> d_ff -> d_model), same weights at every position.",
    "K4": "Every block takes and returns d_model, and has its own weights.",
    "K5": "If weights are tied, the output projection is the embedding matrix itself.",
}
STATUSES = ("passed", "failed", "undecided")
_MARK = {"passed": "✓", "failed": "✗", "undecided": "?"}
_COLOR = {"passed": "#1a7f37", "failed": "#cf222e", "undecided": "#9a6700"}


@dataclass
class CheckResult:
    """Lesson 10. The verdict on one check: ``status`` is "passed", "failed" or "undecided";
    ``finding`` one sentence; ``evidence`` the observations behind it (modules, shapes, numbers);
    ``took`` which modules the check took for what (role -> module names); ``mechanisms`` (K1
    only) what each attention sublayer that sees order by itself was observed to do (sublayer
    name -> :class:`~helpers.checklist.mechanism.Mechanism`: its ``kind``, ``window``, the ALiBi
    ``slopes`` it measured, ...)."""

    check: str
    status: str
    finding: str
    evidence: list[str] = field(default_factory=list)
    took: dict[str, str] = field(default_factory=dict)
    mechanisms: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def took_text(self) -> str:
        return "; ".join(f"{role} = {names}" for role, names in self.took.items())

    def __str__(self) -> str:
        lines = [f"{_MARK[self.status]} {self.check} {self.status}: {self.finding}"]
        if self.took:
            lines.append(f"    took: {self.took_text()}")
        lines += [f"    - {e}" for e in self.evidence]
        return "\n".join(lines)


class AuditReport:
    """Lesson 10. The result of :func:`helpers.audit`: one :class:`CheckResult` per check K1-K5.

    ``report.passed`` is True when all five passed; ``report.status("K3")``, ``report["K3"]``,
    ``report.failed`` (ids of failed checks), ``report.undecided``; ``report.found`` says what the
    audit found in the model (embedding, blocks, d_model, norm placement, output projection), and
    each result's ``took`` which modules that check took for what.
    Displays as an HTML table in a notebook and as text with ``print``.
    """

    def __init__(self, results: dict[str, CheckResult], found: dict[str, str], title: str = ""):
        self.results = results
        self.found = found
        self.title = title

    def status(self, check_id: str) -> str:
        return self[check_id].status

    def __getitem__(self, check_id: str) -> CheckResult:
        if check_id not in self.results:
            raise KeyError(f"check must be one of {', '.join(self.results)}; got {check_id!r}")
        return self.results[check_id]

    def __iter__(self):
        return iter(self.results.values())

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results.values())

    @property
    def failed(self) -> list[str]:
        return [k for k, r in self.results.items() if r.status == "failed"]

    @property
    def undecided(self) -> list[str]:
        return [k for k, r in self.results.items() if r.status == "undecided"]

    def summary(self) -> str:
        counts = {s: sum(r.status == s for r in self) for s in STATUSES}
        return ", ".join(f"{n} {s}" for s, n in counts.items() if n)

    def __repr__(self) -> str:
        return f"<AuditReport {self.title or 'model'}: {self.summary()}>"

    def __str__(self) -> str:
        head = f"Audit of {self.title}" if self.title else "Audit"
        lines = [f"{head}: {self.summary()}"]
        lines += [f"  {k}: {v}" for k, v in self.found.items()]
        lines += [str(r) for r in self]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        found = "; ".join(f"<b>{e(k)}</b>: <code>{e(v)}</code>" for k, v in self.found.items())
        rows = []
        for r in self:
            took = f"<br><small><i>took</i>: {e(r.took_text())}</small>" if r.took else ""
            ev = "".join(f"<li>{e(x)}</li>" for x in r.evidence)
            rows.append(
                f"<tr><td style='text-align:left;vertical-align:top'><b>{e(r.check)}</b></td>"
                f"<td style='text-align:left;vertical-align:top;white-space:nowrap;color:{_COLOR[r.status]}'>"
                f"<b>{_MARK[r.status]} {e(r.status)}</b></td>"
                f"<td style='text-align:left;vertical-align:top'>{e(r.finding)}{took}"
                f"<ul style='margin:0;font-size:90%'>{ev}</ul></td></tr>"
            )
        head = e(f"Audit of {self.title}" if self.title else "Audit")
        return (
            f"<div><p><b>{head}</b>: {e(self.summary())}<br><small>{found}</small></p>"
            "<table><thead><tr><th style='text-align:left'>check</th>"
            "<th style='text-align:left'>verdict</th>"
            "<th style='text-align:left'>finding and evidence</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
