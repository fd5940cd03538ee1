"""Plain text for `grep`, `awk` and CI logs: the verdicts' table, one line per candidate (its runs, its verdict as
every output labels it, and everything its reader is told), and the baseline's noise floor where it was measured,
columns two spaces apart, never wrapped: the terminal's tables (present.views.VerdictsView) without their boxes."""

from __future__ import annotations

from ...util.render import Table, to_plain
from ...verdicts.judge import VERDICT_STYLE
from ...verdicts.side_effects import line
from ..views import noise_blocks
from .registry import VerdictOutput, register_output
from .report import VerdictReport


def table(report: VerdictReport) -> Table:
    found = Table(["candidate", "runs", "verdict", "reasons"], title="verdicts")
    for c in report.candidates:
        if c.outcome == "missing":
            found.add([c.name, "-", "not run", "\n".join(c.reasons)], "dim")
            continue
        worse = line(list(c.side_effects))
        said = c.lines() + ([f"worse beyond the noise where no rule looks: {worse}"] if worse else [])
        found.add([c.name, len(c.run_ids), c.label, "\n".join(said)], VERDICT_STYLE.get(c.outcome, ""))
    return found


def write(report: VerdictReport, site_url: str | None = None) -> str:
    return to_plain([table(report), *noise_blocks(list(report.noise))])


register_output(VerdictOutput("plain", write, 50, noise=True))
