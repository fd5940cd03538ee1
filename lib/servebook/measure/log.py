"""Everything a measurement has produced so far, as the raw rows the journal stores."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..config.metrics import measured_by
from ..engines.counters import Scrape
from .cells import CellSpec, CellSummary
from .equivalence import compare_outputs
from .gates import GateResult, gate_summary
from .transport.client import RequestRecord
from .warmup import WarmupTrace


def _figures(cells: list[CellSummary], metric: Literal["aggregate_tok_s", "prefill_tok_s"]) -> dict[str, float | None]:
    """Per cell of the kind that measures `metric`, its figure."""
    return {c["cell_id"]: c[metric] for c in cells if c["kind"] == measured_by(metric)}


@dataclass
class CellOutcome:
    spec: CellSpec
    records: list[RequestRecord]
    before: Scrape
    after: Scrape
    summary: CellSummary


@dataclass
class MeasurementLog:
    """Survives an engine death mid-plan, so the raw rows of what was measured are kept."""

    outcomes: list[CellOutcome] = field(default_factory=list)
    partial_records: list[RequestRecord] = field(default_factory=list)
    gate_results: list[GateResult] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    #: the engine's load gauges sampled during each cell (measure.observers.gauges): gauges.parquet
    gauges: list[dict[str, Any]] = field(default_factory=list)
    #: the equivalence requests' greedy outputs
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: plan.warmup_until_steady: each burst's rate and whether the engine became steady
    warmup: WarmupTrace | None = None
    #: rows computed from other cells, not measured themselves (a capacity search's result)
    derived: list[CellSummary] = field(default_factory=list)
    #: per cell, the reasons of the attempts measured again because only the host disturbed them
    remeasured: dict[str, list[str]] = field(default_factory=dict)

    def forget_samples(self, cell_id: str) -> None:
        """Drop what was sampled during an attempt at a cell that is measured again."""
        self.telemetry = [row for row in self.telemetry if row.get("cell_id") != cell_id]
        self.gauges = [row for row in self.gauges if row.get("cell_id") != cell_id]

    def _records(self) -> list[RequestRecord]:
        return [r for o in self.outcomes for r in o.records] + self.partial_records

    def request_rows(self) -> list[dict[str, Any]]:
        return [r.row() for r in self._records()]

    def chunk_rows(self) -> list[dict[str, Any]]:
        rows = []
        for record in self._records():
            previous = record.t_first
            tokens = record.chunk_tokens or [None] * len(record.chunk_times)
            phases = record.chunk_phases or [None] * len(record.chunk_times)
            for i, (t, n, phase) in enumerate(zip(record.chunk_times, tokens, phases, strict=True)):
                gap = None if i == 0 or previous is None else t - previous
                rows.append({"request_id": record.request_id, "cell_id": record.cell_id, "index": i,
                             "t": t, "gap_s": gap, "tokens": n, "phase": phase})
                previous = t
        return rows

    def scrape_rows(self) -> list[dict[str, Any]]:
        rows = []
        for o in self.outcomes:
            for phase, s in (("before", o.before), ("after", o.after)):
                for sample in s.samples:
                    rows.append({"cell_id": o.spec.cell_id, "phase": phase, "t": s.t, "name": sample.name,
                                 "labels": json.dumps(dict(sample.labels)), "value": sample.value})
        return rows

    def cell_rows(self) -> list[CellSummary]:
        return [o.summary for o in self.outcomes] + self.derived

    def summary(self) -> dict[str, Any]:
        """What the run's manifest sums up of this measurement (the fields of journal.manifest.Summary)."""
        cell_rows = self.cell_rows()
        valid = [c for c in cell_rows if c["valid"]]
        return {
            "cells": len(cell_rows), "valid_cells": len(valid),
            "invalid_cells": {c["cell_id"]: c["invalid_reasons"] for c in cell_rows if not c["valid"]},
            "invalid_codes": {c["cell_id"]: c["invalid_codes"].split(",") for c in cell_rows if not c["valid"]},
            "reconciled_cells": sum(1 for c in cell_rows if c["reconciliation"] == "ok"),
            "decode_aggregate_tok_s": _figures(valid, "aggregate_tok_s"),
            "prefill_tok_s": _figures(valid, "prefill_tok_s"),
            "gates": gate_summary(self.gate_results),
            "batch_invariance": compare_outputs(self.outputs, self.outputs, "solo", "concurrent") if self.outputs
            else None,
            "warmup_tok_s": [round(rate, 1) for rate in self.warmup.rates] if self.warmup else [],
            "warmup_steady": self.warmup.steady if self.warmup else None,
            "remeasured": self.remeasured,
        }
