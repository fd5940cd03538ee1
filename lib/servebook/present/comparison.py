"""Runs side by side: the verdicts, the knobs that differ, and the figures per cell."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..journal.store import Journal, RunRecord
from ..util.render import Block, Renderable, Table, Text
from ..verdicts.left_out import LeftOut
from .figures import as_figure, cells_frame, forest_spec, run_figures
from .tables import VERDICT_MODEL, estimate_tables, side_by_side
from .views import noise_blocks


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


def unjudged_reasons(status: str, problem: str | None, failure: str | None) -> list[str]:
    """Why a run has no verdict of its own to show: incomplete, interrupted, unreadable (`problem`), failed (the
    failure's text), or not judged yet. One wording for a run read from the journal and one the site cached."""
    if status == "incomplete":
        return ["incomplete: never sealed"]
    if status == "interrupted":
        return ["interrupted by the user: no evidence for a verdict"]
    if problem:
        return [problem]
    if failure:
        return [failure]
    return ["not judged"]


def failure_reasons(record: RunRecord) -> list[str]:
    failure = record.manifest.failure if record.manifest is not None else None
    return unjudged_reasons(record.status, record.problem, None if failure is None else failure.text)


@dataclass
class RunComparison(Renderable):
    """Runs side by side. With repeats (several runs of one candidate) the figures are means over runs with
    intervals, and `comparisons` (typed, from the verdicts) draw the forest plot."""

    runs: list[RunRecord]
    comparisons: list[dict] = field(default_factory=list)
    noise: list = field(default_factory=list)  # of verdicts.NoiseFloor
    #: (cell id, metric) -> verdicts.DeltaFloor of the first run's configuration: given, runs of distinct candidates
    #: show each one's change from the first, greyed within the noise floor
    floors: dict | None = None

    @classmethod
    def against_first(cls, journal: Journal, runs: list[RunRecord]) -> "RunComparison":
        """The runs side by side, each one's change from the first run given (the reference)."""
        from .deltas import reference_floors

        return cls(runs, floors=reference_floors(journal, runs[0]) if len(runs) > 1 else None)

    @property
    def repeated(self) -> bool:
        names = [run.candidate_label for run in self.runs]
        return len(set(names)) < len(names)

    @property
    def labels(self) -> list[str]:
        if self.repeated:  # repeats share their candidate's label: the tables show means over them
            return [run.candidate_label for run in self.runs]
        seen: dict[str, int] = {}
        out = []
        for run in self.runs:
            label = run.candidate_label
            seen[label] = seen.get(label, 0) + 1
            out.append(label if seen[label] == 1 else f"{label} ({run.run_id})")
        return out

    def verdicts(self) -> Table:
        table = Table(["candidate", "run", "status", "verdict", "reasons"], title="Verdicts")
        newest = {label: run for label, run in zip(self.labels, self.runs, strict=True)}
        for label, run in newest.items():
            verdict = run.latest_verdict or {}
            left_out = LeftOut.of(verdict.get("left_out_cells")).text()
            reasons = (verdict.get("reasons") or failure_reasons(run)) + ([left_out] if left_out else [])
            outcome = verdict.get("outcome", "-")
            table.add([label, run.run_id, run.status, outcome, "; ".join(reasons)],
                      "accepted" if outcome == "accepted" else "invalid" if outcome == "failed" else "")
        return table

    def cells(self) -> pd.DataFrame:
        cells = cells_frame(self.runs)
        if cells.empty:
            return cells
        label_of = dict(zip((r.run_id for r in self.runs), self.labels, strict=True))
        return cells.assign(label=cells["run_id"].map(label_of))

    def config_diff(self) -> pd.DataFrame:
        return config_diff({label: run.identity.candidate for label, run in zip(self.labels, self.runs, strict=True)})

    def tables(self) -> list[Block]:
        diff = Table.from_frame(self.config_diff(), title="Knobs that differ", index="knob")
        figures = (estimate_tables(self.cells().assign(candidate=lambda f: f["label"])) if self.repeated
                   else side_by_side(self.cells(), self.labels, self.floors))
        noise = noise_blocks(self.noise)
        return [self.verdicts(), *noise, diff] + figures

    def blocks(self) -> list[Block]:
        # figures over runs sit beside verdicts here: say once how the verdict compares, as the study page does
        model = [Text(VERDICT_MODEL, "dim")] if self.repeated and self.comparisons else []
        if self.floors is not None and not self.repeated:
            from .deltas import FLOOR_LEGEND

            floors = "" if self.floors else " (its configuration has no noise floor here: nothing is greyed)"
            model.append(Text(f"Changes from {self.labels[0]}, the first run given{floors}. Dim, marked ~: "
                              f"{FLOOR_LEGEND}", "dim"))
        return [Text(f"{len(self.runs)} runs compared", "heading"), *self.tables(), *model]

    def figures(self) -> list:
        forest = [as_figure(forest_spec(self.comparisons))] if self.comparisons else []
        return forest + run_figures(self.runs)
