"""Runs side by side: the knobs that differ, the figures per cell, and the verdicts."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from rich.console import Group
from rich.table import Table
from rich.text import Text

from .figures import cells_frame, run_figures
from .journal import RunRecord


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


def _label(run: RunRecord) -> str:
    return (run.manifest or {}).get("study_entry") or run.candidate_label


def _fmt(value, spec=".1f") -> str:
    return "-" if value is None or pd.isna(value) else f"{value:{spec}}"


@dataclass
class RunComparison:
    runs: list[RunRecord]

    @property
    def labels(self) -> list[str]:
        seen: dict[str, int] = {}
        out = []
        for run in self.runs:
            label = _label(run)
            seen[label] = seen.get(label, 0) + 1
            out.append(label if seen[label] == 1 else f"{label} ({run.run_id})")
        return out

    def config_diff(self) -> pd.DataFrame:
        return config_diff({label: (run.manifest or {}).get("candidate", {})
                            for label, run in zip(self.labels, self.runs)})

    def verdicts(self) -> pd.DataFrame:
        rows = []
        for label, run in zip(self.labels, self.runs):
            verdict = run.latest_verdict or {}
            failure = (run.manifest or {}).get("failure") or {}
            reasons = verdict.get("reasons") or ([f"{failure.get('cause')}: {failure.get('message')}"] if failure else [])
            rows.append({"candidate": label, "run": run.run_id, "status": run.status,
                         "verdict": verdict.get("outcome", "-"), "reasons": "; ".join(reasons)})
        return pd.DataFrame(rows)

    def cell_table(self, metric: str, kind: str) -> pd.DataFrame:
        cells = cells_frame(self.runs)
        if cells.empty:
            return pd.DataFrame()
        cells = cells[cells["kind"] == kind]
        if cells.empty:
            return pd.DataFrame()
        label_of = dict(zip((r.run_id for r in self.runs), self.labels))
        cells = cells.assign(label=cells["run_id"].map(label_of))
        table = cells.pivot_table(index="cell_id", columns="label", values=metric, aggfunc="first", sort=False)
        return table[[l for l in self.labels if l in table.columns]]

    def tables(self) -> dict[str, pd.DataFrame]:
        out = {"Verdicts": self.verdicts(), "Knobs that differ": self.config_diff()}
        for title, metric, kind in (("Aggregate decode tok/s", "aggregate_tok_s", "decode"),
                                    ("Per-request decode tok/s (median)", "per_request_tok_s", "decode"),
                                    ("TTFT ms (median)", "ttft_s", "decode"),
                                    ("Cold prefill tok/s", "prefill_tok_s", "prefill")):
            table = self.cell_table(metric, kind)
            if not table.empty:
                if metric == "ttft_s":
                    table = table * 1000
                spec = ".1f" if metric == "aggregate_tok_s" else ".0f"
                out[title] = table.map(lambda v, spec=spec: _fmt(v, spec))
        return out

    def figures(self) -> list:
        return run_figures(self.runs)

    def _repr_html_(self) -> str:
        parts = [f"<h4>{len(self.runs)} runs compared</h4>"]
        for title, frame in self.tables().items():
            parts.append(f"<h5>{html.escape(title)}</h5>")
            parts.append(frame.to_html(escape=True, index=title not in ("Verdicts",)))
        return "\n".join(parts)

    def __rich__(self):
        parts: list = []
        for title, frame in self.tables().items():
            table = Table(title=title, title_justify="left")
            with_index = title != "Verdicts"
            if with_index:
                table.add_column("")
            for column in frame.columns:
                table.add_column(str(column))
            for index, row in frame.iterrows():
                cells = [str(v) for v in row.values]
                table.add_row(*([str(index)] if with_index else []), *cells)
            parts.append(table)
        return Group(*parts) if parts else Text("no runs")
