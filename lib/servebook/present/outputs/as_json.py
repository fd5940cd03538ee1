"""JSON: every candidate's verdict with its typed fields, the runs behind it and the gate's result."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from .registry import VerdictOutput, register_output
from .report import CandidateVerdict, VerdictReport


def candidate_data(c: CandidateVerdict) -> dict[str, Any]:
    cell = c.deciding
    return {
        "name": c.name, "candidate_id": c.candidate_id, "outcome": c.outcome,
        # as the other outputs say it: the baseline's acceptance is "baseline", never counted as accepted
        "label": c.label, "undecided": c.undecided, "settled": c.settled, "run_ids": list(c.run_ids),
        "reasons": list(c.reasons), "method": c.method,
        # damaged and archived runs left out of the verdict, typed: a job reads the code, not the reason's words
        "left_out": [asdict(r) for r in c.left_out_runs],
        "deciding_cell": None if cell is None else {**cell.to_dict(), "text": cell.text()},
        "comparisons": [comparison.to_dict() for comparison in c.comparisons],
        # what its gains were earned on: drafter evidence and output realism, and the gains they cast doubt on
        "evidence": c.evidence, "caveats": [asdict(caveat) for caveat in c.caveats],
        # changes beyond the noise where no rule looks, worse first (verdicts.side_effects); only where some are
        **({"side_effects": [e.to_dict() for e in c.side_effects]} if c.side_effects else {}),
        # cells left out as disturbed, each with its run and codes, and the one line every output says of them
        **({"left_out_cells": [cell.to_dict() for cell in c.left_out_cells.cells],
            "left_out_line": c.left_out_cells.text()} if c.left_out_cells else {}),
    }


def data(report: VerdictReport) -> dict[str, Any]:
    """The report as JSON-ready data."""
    gate = report.gate
    return {"study": report.study, "plan_id": report.plan_id, "rules_hash": report.rules_hash,
            "baseline": report.baseline, "counts": report.counts,
            "gate": {"fail_on": sorted(gate.fail_on), "exit_code": gate.exit_code, "passed": gate.passed,
                     "failing": gate.failing},
            "candidates": [candidate_data(c) for c in report.candidates]}


def write(report: VerdictReport, site_url: str | None = None) -> str:
    return json.dumps(data(report), indent=2, default=str) + "\n"


register_output(VerdictOutput("json", write, 10, download="verdicts.json", title="JSON"))
