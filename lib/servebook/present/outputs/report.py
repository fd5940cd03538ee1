"""A study's verdicts as one typed, frozen record: what every verdict output writes (present/outputs).

It is made from verdict events, the shape the journal records a verdict in: those judge() has just made (the CLI,
`report_of_judged`) or those the journal holds (the site, `present/site/study_downloads.py`). One source, one
reading of it: the CI file and the site's download of a study are the same bytes once the journal holds the verdicts
the CLI judged (`servebook judge --record`, a sweep).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...config.study import Study
from ...verdicts import GateResult, Judged, NoiseFloor, deciding
from ...verdicts.comparisons import Comparison
from ...verdicts.labels import outcome_counts, outcome_label
from ...verdicts.left_out import LeftOut, left_out_cell_from, left_out_reasons, left_out_runs
from ...verdicts.output import Caveat, caveat_from
from ...verdicts.ranking import Answer, Entrant, answer, comparison_from
from ...verdicts.side_effects import SideEffect, side_effect_from
from ...verdicts.verdict import Verdict

#: no gate (`--fail-on` not given): what a study's verdicts carry where nothing was asked to fail (the site)
NO_GATE = GateResult(frozenset(), {})
#: the outcomes a verdict event records (a candidate never run is "missing", which no event says)
_JUDGED = ("accepted", "rejected", "inconclusive", "failed")


@dataclass(frozen=True)
class LeftOutRun:
    """A damaged or archived run left out of a verdict, typed: a job reads the code, not the reason's words."""

    run_id: str
    status: str
    code: str | None = None
    file: str | None = None


@dataclass(frozen=True)
class CandidateVerdict:
    """One candidate's verdict as every output writes it. `undecided` and `settled` are None where the candidate
    was never run, or its verdict was recorded before events kept them."""

    name: str
    outcome: str  # accepted, rejected, inconclusive, failed, or missing (never run)
    is_baseline: bool = False
    candidate_id: str | None = None
    run_ids: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    method: str | None = None
    undecided: bool | None = None
    settled: bool | None = None
    left_out_runs: tuple[LeftOutRun, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    evidence: dict[str, Any] | None = None
    caveats: tuple[Caveat, ...] = ()
    side_effects: tuple[SideEffect, ...] = ()
    left_out_cells: LeftOut = LeftOut()
    note: str | None = None

    @property
    def label(self) -> str:
        """The outcome as every output labels it: the baseline's acceptance is "baseline" (verdicts.labels)."""
        return outcome_label(self.outcome, self.is_baseline)

    @property
    def deciding(self) -> Comparison | None:
        """The cell a reader should see first (verdicts.gate.deciding); None where none was compared."""
        if self.outcome not in _JUDGED:
            return None
        return deciding(Verdict(self.outcome, [], list(self.comparisons)))  # type: ignore[arg-type]

    def lines(self) -> list[str]:
        """Everything a reader is told: the reasons, the cells left out as one count and, last, the method."""
        left_out = self.left_out_cells.text()
        return list(self.reasons) + ([left_out] if left_out else []) + (
            [f"method: {self.method}"] if self.method else [])

    def entrant(self) -> Entrant:
        """As the study's answer ranks it (verdicts.ranking)."""
        return Entrant(self.name, self.outcome, list(self.comparisons), list(self.reasons), list(self.run_ids),
                       self.is_baseline, self.note, self.method, list(self.caveats), self.evidence,
                       list(self.side_effects), list(self.left_out_cells.cells))


@dataclass(frozen=True)
class VerdictReport:
    """A study's verdicts: its identity, each candidate's verdict in the study's order, and the gate's result."""

    study: str
    baseline: str
    candidates: tuple[CandidateVerdict, ...]
    plan_id: str | None = None
    rules_hash: str | None = None
    question: str | None = None
    gate: GateResult = NO_GATE
    #: the baseline is recorded runs of the journal (verdict.baseline_from), not one of the study's candidates
    baseline_recorded: bool = False
    #: the baseline's noise floor per judged cell, where the caller measured it for a format that writes it (the CLI)
    noise: tuple[NoiseFloor, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """outcome -> candidates with it, the baseline counted apart: the tally every output gives."""
        return outcome_counts((c.outcome, c.is_baseline) for c in self.candidates)

    def answer(self) -> Answer:
        """The study's answer (verdicts.ranking): the same as `servebook report` and the study page draw."""
        entrants = [c.entrant() for c in self.candidates]
        if self.baseline_recorded:
            entrants.insert(0, Entrant(self.baseline, "accepted", [], ["recorded runs of the journal"],
                                       is_baseline=True))
        return answer(self.study, self.question, self.baseline, entrants)


def _left_out_run(data: dict[str, Any]) -> LeftOutRun:
    """From an event's dict (keys a later servebook adds are dropped)."""
    return LeftOutRun(**{k: v for k, v in data.items() if k in LeftOutRun.__dataclass_fields__})


def candidate_of(name: str, event: dict[str, Any] | None, *, is_baseline: bool, unjudged: str = "missing",
                 **given: Any) -> CandidateVerdict:
    """A candidate's verdict from its verdict event (as journal.events reads it back); without one, `unjudged` (its
    outcome) and `given` (the fields known without a verdict: candidate_id, run_ids, reasons, left_out_runs)."""
    if event is None:
        given["left_out_runs"] = tuple(map(_left_out_run, given.get("left_out_runs", ())))
        return CandidateVerdict(name, unjudged, is_baseline, **given)
    return CandidateVerdict(
        name, str(event.get("outcome") or unjudged), is_baseline, event.get("candidate_id"),
        tuple(event.get("run_ids") or ()), tuple(event.get("reasons") or ()), event.get("method"),
        event.get("undecided"), event.get("settled"),
        tuple(map(_left_out_run, event.get("left_out_runs") or ())),
        # events written before intervals existed carry comparisons without a decision: no cell to show
        tuple(comparison_from(c) for c in event.get("comparisons") or () if "decision" in c),
        event.get("evidence"), tuple(caveat_from(c) for c in event.get("caveats") or ()),
        tuple(side_effect_from(e) for e in event.get("side_effects") or ()),
        LeftOut(tuple(left_out_cell_from(c) for c in event.get("left_out_cells") or ())), event.get("note"))


def as_recorded(event: dict[str, Any]) -> dict[str, Any]:
    """The event as the journal holds it once written (journal.writer: JSON, anything else as its text), so that
    what judge() has just made and what the site reads back are read alike."""
    return json.loads(json.dumps(event, default=str))


def report_of_judged(study: Study, judged: list[Judged], result: GateResult = NO_GATE,
                     noise: tuple[NoiseFloor, ...] = ()) -> VerdictReport:
    """The report of a study as judge() judged it, with the gate's result and, where measured, the noise floor."""
    rules = study.verdict
    candidates = []
    for item in judged:
        event = item.event
        if event is None and item.verdict is not None:  # a Judged made by hand, not by judge()
            event = item.verdict.to_event(candidate_id=item.entry.candidate.id, note=item.entry.note,
                                          run_ids=[r.run_id for r in item.records], **left_out_runs(item.left_out))
        candidates.append(candidate_of(
            item.entry.name, None if event is None else as_recorded(event),
            is_baseline=item.entry.name == rules.baseline_entry, candidate_id=item.entry.candidate.id,
            reasons=tuple(left_out_reasons(item.left_out)), note=item.entry.note, **left_out_runs(item.left_out)))
    return VerdictReport(study.name, rules.baseline, tuple(candidates), study.plan.id, rules.hash, study.description,
                         result, baseline_recorded=rules.baseline_entry is None and rules.baseline_from is not None,
                         noise=noise)
