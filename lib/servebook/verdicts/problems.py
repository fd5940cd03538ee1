"""What rejects a run whatever its figures: invalid cells, failed gates, unreconciled counters, a capacity that
held at no probed rate. More runs of the candidate cannot change these; only running it again without them can."""

from __future__ import annotations

import pandas as pd

from ..config.metrics import measured_by
from ..config.rules import VerdictRules
from ..journal.manifest import Manifest
from ..measure.kinds.capacity.search import figure as capacity_figure
from ..util.frames import frame_records


def run_problems(manifest: Manifest, cells: pd.DataFrame, rules: VerdictRules, several: bool) -> list[str]:
    """What rejects a run whatever its figures: invalid cells, a busy host, failed gates, unreconciled cells."""
    prefix = f"run {manifest.run_id}: " if several else ""
    reasons: list[str] = []
    if rules.require_valid:
        for row in cells[~cells["valid"].astype(bool)].itertuples():
            reasons.append(f"{prefix}{row.cell_id} invalid: {row.invalid_reasons}")
    for gate, score in (manifest.summary.gates if manifest.summary else {}).items():
        if not score.ok:
            reasons.append(f"{prefix}gate {gate} {score.passed}/{score.cases}: {score.first_failure}")
    if rules.require_reconciled:
        for row in cells[cells["reconciliation"] == "not_available"].itertuples():
            reasons.append(f"{prefix}{row.cell_id}: counters not available, so not reconciled")
    capacity = measured_by("capacity_rps")
    if any(rule.kind == capacity for rule in rules.rules):
        # A capacity nobody measured (the objectives held at no probed rate) is a finding about the run, the
        # baseline's as much as a candidate's: it is no figure to compare, and leaving it out would accept a
        # baseline that holds no load and reject only the candidates measured against it.
        for found in frame_records(cells[cells["kind"] == capacity]):
            if capacity_figure(found, "capacity_rps") is None:
                reasons.append(f"{prefix}capacity: the objectives held at no probed rate "
                               f"({int(capacity_figure(found, 'capacity_probes') or 0)} probes)")
    return reasons
