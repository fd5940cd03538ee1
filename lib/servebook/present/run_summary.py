"""A run in one screen: what `servebook run --url` prints when it is done.

A `vllm bench serve` user reads throughput and the TTFT, TPOT, ITL and end-to-end percentiles first; then a
qualification says whether the engine's own counters agreed with the client's and which of the candidate's
claims the server confirmed. The full report (`servebook journal show RUN`) keeps every table; this keeps one
row per cell and one line per check, so the answer fits a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..journal.store import RunRecord
from ..measure.figures.tails import CONFIDENCE, insufficient_tail
from ..measure.kinds import traits_of
from ..util.render import Block, Renderable, Style, Table, Text
from .load_tables import _ms
from .tables import fmt, number
from .views import RunReport

#: (column, cell field) in the order `vllm bench serve` prints them, all in milliseconds
LATENCY_COLUMNS = (("TTFT p50", "ttft_p50_ms"), ("TTFT p99", "ttft_p99_ms"), ("TPOT p50", "tpot_p50_ms"),
                   ("TPOT p99", "tpot_p99_ms"), ("ITL p99", "itl_p99_ms"), ("E2E p50", "e2e_p50_ms"))


@dataclass
class RunSummary(Renderable):
    """One row per measured cell, the counters' agreement and the server's claims; a failed run's cause."""

    run: RunRecord
    journal_flag: str = ""  # `--journal J` where the run's journal is not the default, for the next command

    def blocks(self) -> list[Block]:
        run = self.run
        report = RunReport(run)
        cells = [c for c in report.cells() if not traits_of(c.get("kind")).derived]
        if not cells:  # a failed load or a run that measured nothing: its cause is the whole summary
            return report.blocks() + [self._onward()]
        blocks: list[Block] = [Text(f"run {run.run_id}  {run.candidate_label}  status: {run.status}", "heading")]
        if run.manifest and run.manifest.failure is not None:
            blocks.append(Text(run.manifest.failure.text, "warn"))
        table = Table(["Cell", "Requests", "Output tok/s", *(c for c, _ in LATENCY_COLUMNS)],
                      title="Throughput and latency (ms), per cell")
        thin = []
        for cell in cells:
            shown = []
            for _, field in LATENCY_COLUMNS:
                tail = insufficient_tail(cell, field)
                thin += [tail] if tail else []
                # one mark per figure and one line under the table: "insufficient (n=8)" in every p99 of a quick
                # plan would widen the table past a terminal
                shown.append(_ms(cell.get(field)) + ("*" if tail and cell.get(field) is not None else ""))
            table.add([cell["cell_id"], int(number(cell.get("requests")) or 0), fmt(cell.get("output_tok_s"), ".1f"),
                       *shown], "" if cell.get("valid") else "invalid")
        blocks.append(table)
        if thin:
            worst = min(thin, key=lambda t: t.n / t.needed)
            blocks.append(Text(f"* from fewer samples than the percentile needs at {100 * CONFIDENCE:g}% confidence "
                               f"(the thinnest: {worst.reason()}): indicative, never judged; a plan with more "
                               "requests per cell (--plan) decides tails", "dim"))
        blocks += [Text(line, style) for line, style in _checks(cells)]
        claims = _claims(run)
        if claims:
            blocks.append(Text(claims))
        blocks.append(self._onward())
        return blocks

    def _onward(self) -> Text:
        return Text(f"every table: servebook journal show {self.run.run_id}{self.journal_flag}", "dim")


def _checks(cells: list[dict]) -> list[tuple[str, Style]]:
    """Invalid cells with their reasons, then the counters' agreement: one line each."""
    lines: list[tuple[str, Style]] = [(f"{c['cell_id']}: INVALID, {c.get('invalid_reasons')}", "invalid")
                                      for c in cells if not c.get("valid")]
    states: dict[str, list[str]] = {}
    for cell in cells:
        states.setdefault(str(cell.get("reconciliation")), []).append(cell["cell_id"])
    counted = ", ".join(f"{len(ids)} {state}" for state, ids in sorted(states.items()))
    lines.append((f"engine counters against the client's: {counted}", "" if set(states) == {"ok"} else "warn"))
    # one cell that is not ok says why in the engine's terms; the others say the same or the full report does
    first = next((c for c in cells if c.get("reconciliation") != "ok" and c.get("reconciliation_message")), None)
    if first is not None:
        lines.append((f"  {first['cell_id']}: {first['reconciliation_message']}", "dim"))
    return lines


def _claims(run: RunRecord) -> str:
    """'claims: verified model, knobs.drafter; not verified knobs.kv_dtype' (contradicted ones refuse an attach)."""
    verification = run.manifest.engine.verification if run.manifest else None
    if verification is None or not verification.claims:
        return ""
    by_status: dict[str, list[str]] = {}
    for name, claim in verification.claims.items():
        by_status.setdefault(claim.status.replace("_", " "), []).append(name)
    return "claims against the server's own report: " + "; ".join(
        f"{status} {', '.join(names)}" for status, names in sorted(by_status.items(), key=lambda kv: kv[0] != "verified"))


def run_summary(record: RunRecord, journal_flag: str = "") -> RunSummary:
    return RunSummary(record, journal_flag)
