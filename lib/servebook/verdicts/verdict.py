"""A candidate's verdict as a record: its outcome, the reasons that name cells and intervals, the typed comparisons
behind it and what it left out; and the event the journal keeps of it (Verdict.to_event), which every output reads
back (present/outputs)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from .comparisons import Comparison
from .left_out import LeftOut, LeftOutCell
from .output import Caveat
from .side_effects import SideEffect

Outcome = Literal["accepted", "rejected", "inconclusive", "failed"]


@dataclass
class Verdict:
    outcome: Outcome
    reasons: list[str]
    comparisons: list[Comparison] = field(default_factory=list)
    #: rejected for something more runs cannot change (a failed gate or load, an invalid cell, a rule with no cells)
    settled: bool = False
    #: what decided it, for the reader: the test, its level and where the variance came from (None: no interval)
    method: str | None = None
    #: inconclusive only because a cell passes on one machine and fails on another (verdicts.machines), or because a
    #: judged percentile rests on too few samples (measure.figures.tails): more runs on these machines will not decide it
    host_dependent: bool = False
    #: gains that may not hold on real output (verdicts.realism): each with its code and the cell's realism
    caveats: list[Caveat] = field(default_factory=list)
    #: the candidate's drafter evidence and output realism over its runs (verdicts.realism.output_evidence)
    evidence: dict | None = None
    #: changes beyond the noise in figures no rule judges, worse first (verdicts.side_effects)
    side_effects: list[SideEffect] = field(default_factory=list)
    #: cells left out of the statistics as disturbed, said as one count (verdicts.left_out)
    left_out_cells: list[LeftOutCell] = field(default_factory=list)

    @property
    def undecided(self) -> bool:
        """Whether more runs could change the outcome: an interval straddles a limit, or a comparison rests on
        one run per side, and nothing else (a failed load, an invalid cell, a failed gate) already decided it."""
        if self.outcome == "inconclusive":
            return not self.host_dependent
        if self.outcome == "failed" or self.settled or any(c.decision == "fail" for c in self.comparisons):
            return False
        return any(c.decision == "single" for c in self.comparisons)

    def lines(self) -> list[str]:
        """The reasons, the cells left out as one count and, last, the method: everything a reader is told."""
        left_out = LeftOut.of(self.left_out_cells).text()
        return self.reasons + ([left_out] if left_out else []) + ([f"method: {self.method}"] if self.method else [])

    def to_event(self, **context) -> dict:
        """The journal's record of it, every output's source (present/outputs): `undecided` and `settled` are kept
        as fields, as a reader of the record cannot work them out again (events before 2026-12-07 lack them)."""
        return {"outcome": self.outcome, "reasons": self.reasons, "method": self.method,
                "undecided": self.undecided, "settled": self.settled,
                "comparisons": [c.to_dict() for c in self.comparisons],
                **({"caveats": [asdict(c) for c in self.caveats]} if self.caveats else {}),
                **({"evidence": self.evidence} if self.evidence else {}),
                **({"side_effects": [e.to_dict() for e in self.side_effects]} if self.side_effects else {}),
                **({"left_out_cells": [c.to_dict() for c in self.left_out_cells]} if self.left_out_cells else {}),
                **context}
