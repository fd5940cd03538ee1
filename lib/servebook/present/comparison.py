"""Runs side by side: the verdicts, the knobs that differ, and the figures per cell."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..journal.store import RunRecord
from ..util.render import Block, Renderable, Table, Text
from .figures import cells_frame, run_figures
from .tables import side_by_side


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): json.dumps(data) if isinstance(data, list) else data}


def config_diff(candidates: dict[str, dict]) -> pd.DataFrame:
    """Only the candidate fields whose values differ between the given candidates."""
    flat = {name: _flatten({k: v for k, v in c.items() if k != "name"}) for name, c in candidates.items()}
    keys = sorted({k for f in flat.values() for k in f})
    rows = {}
    for key in keys:
        values = [f.get(key) for f in flat.values()]
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1:
            rows[key] = ["-" if v is None else v for v in values]
    return pd.DataFrame(rows, index=list(flat)).T if rows else pd.DataFrame(index=[], columns=list(flat))


def diff_table(candidates: dict[str, dict]) -> Table:
    return Table.from_frame(config_diff(candidates), title="Knobs that differ", index="knob")


def failure_reasons(record: RunRecord) -> list[str]:
    """Why a run has no verdict of its own to show: incomplete, failed, or not judged yet."""
    if record.status == "incomplete":
        return ["incomplete: never sealed"]
    if record.problem:
        return [record.problem]
    if record.manifest is not None and record.manifest.failure is not None:
        return [record.manifest.failure.text]
    return ["not judged"]


@dataclass
class RunComparison(Renderable):
    runs: list[RunRecord]

    @property
    def labels(self) -> list[str]:
        seen: dict[str, int] = {}
        out = []
        for run in self.runs:
            label = run.candidate_label
            seen[label] = seen.get(label, 0) + 1
            out.append(label if seen[label] == 1 else f"{label} ({run.run_id})")
        return out

    def verdicts(self) -> Table:
        table = Table(["candidate", "run", "status", "verdict", "reasons"], title="Verdicts")
        for label, run in zip(self.labels, self.runs):
            verdict = run.latest_verdict or {}
            reasons = verdict.get("reasons") or failure_reasons(run)
            outcome = verdict.get("outcome", "-")
            table.add([label, run.run_id, run.status, outcome, "; ".join(reasons)],
                      {"accepted": "accepted", "failed": "invalid"}.get(outcome, ""))
        return table

    def config_diff(self) -> pd.DataFrame:
        return config_diff({label: run.identity.candidate for label, run in zip(self.labels, self.runs)})

    def cells(self) -> pd.DataFrame:
        cells = cells_frame(self.runs)
        if cells.empty:
            return cells
        label_of = dict(zip((r.run_id for r in self.runs), self.labels))
        return cells.assign(label=cells["run_id"].map(label_of))

    def tables(self) -> list[Table]:
        diff = Table.from_frame(self.config_diff(), title="Knobs that differ", index="knob")
        return [self.verdicts(), diff] + side_by_side(self.cells(), self.labels)

    def blocks(self) -> list[Block]:
        return [Text(f"{len(self.runs)} runs compared", "heading"), *self.tables()]

    def figures(self) -> list:
        return run_figures(self.runs)
