"""Outlier runs: a run whose cells sit far from its siblings' as a whole, judged against the study's own spread.

A host can slow a whole launch without crossing any per-cell limit (on the 2-core machine a baseline run read
142-154 tok/s at one request against its sibling's 262-269, its foreign CPU 0.39-0.47 cores under the then fixed
limit of 0.5; issue 55). Such a run widens every interval and moves every change it takes part in.

The rule, stated once:
- Per judged cell, each run's distance from its siblings is `log(value) - median(log(siblings' values))`, among
  the runs of its candidate on its machine, where there are at least MIN_RUNS of them (with two runs nothing tells
  which of them is off).
- The scale of those distances is the study's own, pooled over every candidate's runs of that cell: their median
  absolute distance (a robust spread that one odd run does not inflate), as a modified z-score
  (0.6745 x distance / median absolute distance; Iglewicz and Hoaglin's cut 3.5).
- A run is an outlier where the median of its cells' z-scores is beyond OUTLIER_Z: the whole run sits apart, not
  one cell (one odd cell is a cell's business, its interval carries it). Only the farthest run of a candidate on a
  machine can be one: with three runs, one far off pulls its siblings' distances (from a median it takes part in)
  to half its own, which would name them too.
- An outlier whose disturbance figures stand out from its siblings' (other processes' CPU, the hypervisor's steal,
  the CPU probe's time) is left out of every statistic, as a disturbed cell is, with those figures in the reason. One
  without any sign of disturbance is kept and named: a candidate whose launches vary is the candidate's own finding.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..config.rules import VerdictRules
from ..measure.validity import InvalidReason
from .comparisons import blocked_figures
from .evidence import undisturbed
from .machines import machine_of

#: Iglewicz and Hoaglin's cut for the modified z-score
OUTLIER_Z = 3.5
#: a candidate's runs on one machine needed before one of them can be told apart from the rest
MIN_RUNS = 3
#: distances pooled for a cell's scale before it is trusted
MIN_DISTANCES = 6
#: a spread below this (log scale, about 0.5%) is taken as this: identical figures make no run an outlier by 0.1%
MIN_SCALE = 0.005
#: what makes a run's disturbance figures stand out from its siblings' medians
_FOREIGN_MORE = 0.1  # cores
_STEAL_MORE = 0.05  # cores
_PROBE_SLOWER = 1.15  # times


@dataclass
class OutlierRun:
    """One run found apart from its siblings: how far, and what its disturbance figures were beside theirs."""

    name: str
    position: int
    run_id: str
    z: float
    change_pct: float
    cells: int
    signs: list[str] = field(default_factory=list)

    @property
    def disturbed(self) -> bool:
        return bool(self.signs)

    def detail(self) -> str:
        side = "below" if self.change_pct < 0 else "above"
        return (f"run {self.run_id} sits {abs(self.change_pct):.0f}% {side} its siblings (median over {self.cells} "
                f"cells; robust z {self.z:+.1f}, beyond {OUTLIER_Z:g})")

    def text(self) -> str:
        if self.disturbed:
            return f"{self.detail()}, disturbed: {'; '.join(self.signs)}: left out"
        return (f"{self.detail()}, with no sign of disturbance (foreign CPU, steal and CPU probe like its siblings'): "
                "kept, as launches of this candidate may differ this much")


def _frames(frames: list[pd.DataFrame | None]) -> list[pd.DataFrame | None]:
    """Each run's valid, undisturbed cells (what the verdict would use)."""
    out: list[pd.DataFrame | None] = []
    for cells in frames:
        if cells is None or cells.empty:
            out.append(None)
            continue
        kept, _ = undisturbed(cells)
        kept = kept[kept["valid"].astype(bool)]
        kept.attrs = dict(cells.attrs)
        out.append(kept)
    return out


def _distances(values: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """(run position, log distance from the median of the others) for each run."""
    logs = [(i, math.log(v)) for i, v in values if v > 0 and math.isfinite(v)]
    return [(i, x - statistics.median(y for j, y in logs if j != i)) for i, x in logs]


#: (candidate, run position) -> one (z-score, log distance) per judged cell; and the machine each run ran on
Scores = dict[tuple[str, int], list[tuple[float, float]]]
Machines = dict[tuple[str, int], str]


def _rule_distances(frames: dict[str, list[pd.DataFrame | None]], rule: Any,
                    machines: Machines) -> dict[str, list[tuple[str, int, float]]]:
    """cell id -> (candidate, run position, log distance from the median of its siblings on its machine) of every
    run measured at least MIN_RUNS times there, under one rule's cells."""
    per_cell: dict[str, list[tuple[str, int, float]]] = {}
    for name, runs in frames.items():
        by_machine: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for position, cells in enumerate(runs):
            if cells is None:
                continue
            for cell_id, blocked in blocked_figures([cells], rule).items():
                for block, value in blocked:
                    machines[(name, position)] = machine_of(block)
                    by_machine.setdefault((cell_id, machine_of(block)), []).append((position, value))
        for (cell_id, _), values in by_machine.items():
            if len(values) >= MIN_RUNS:
                per_cell.setdefault(cell_id, []).extend((name, i, d) for i, d in _distances(values))
    return per_cell


def _scores(frames: dict[str, list[pd.DataFrame | None]], rules: VerdictRules) -> tuple[Scores, Machines]:
    """Each run's modified z-score at every judged cell: its distance over the cell's median absolute distance."""
    scores: Scores = {}
    machines: Machines = {}
    for rule in [*rules.rules, *rules.guards]:
        for distances in _rule_distances(frames, rule, machines).values():
            if len(distances) < MIN_DISTANCES:
                continue
            mad = max(statistics.median(abs(d) for _, _, d in distances), MIN_SCALE)
            for name, position, d in distances:
                scores.setdefault((name, position), []).append((0.6745 * d / mad, d))
    return scores, machines


def outlier_runs(cells_by_name: dict[str, list[pd.DataFrame | None]], run_ids: dict[str, list[str]],
                 rules: VerdictRules) -> list[OutlierRun]:
    """The study's outlier runs under the rule above, candidate by candidate (`run_ids` aligned with the frames):
    of each candidate's runs on one machine, the farthest by its median z-score, where that passes OUTLIER_Z."""
    scores, machines = _scores({name: _frames(found) for name, found in cells_by_name.items()}, rules)
    farthest: dict[tuple[str, str], tuple[float, int, list[tuple[float, float]]]] = {}
    for (name, position), found in sorted(scores.items()):
        z = statistics.median(s for s, _ in found)
        group = (name, machines[(name, position)])
        if group not in farthest or abs(z) > abs(farthest[group][0]):
            farthest[group] = (z, position, found)
    out = []
    for (name, _), (z, position, found) in sorted(farthest.items()):
        if abs(z) > OUTLIER_Z:
            change = 100.0 * (math.exp(statistics.median(d for _, d in found)) - 1.0)
            out.append(OutlierRun(name, position, run_ids[name][position], z, change, len(found),
                                  _signs(cells_by_name[name], position)))
    return out


def _max(cells: pd.DataFrame | None, column: str) -> float | None:
    if cells is None or column not in cells.columns:
        return None
    values = pd.to_numeric(cells[column], errors="coerce").dropna()
    return float(values.max()) if len(values) else None


def _median(cells: pd.DataFrame | None, column: str) -> float | None:
    if cells is None or column not in cells.columns:
        return None
    values = pd.to_numeric(cells[column], errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def _signs(runs: list[pd.DataFrame | None], position: int) -> list[str]:
    """The run's disturbance figures that stand out from its siblings' (empty: none does)."""
    mine, others = runs[position], [c for i, c in enumerate(runs) if i != position and c is not None]
    signs = []

    def siblings(read, column: str) -> float | None:
        found = [v for v in (read(c, column) for c in others) if v is not None]
        return statistics.median(found) if found else None

    foreign, theirs = _max(mine, "foreign_cpu_cores"), siblings(_max, "foreign_cpu_cores")
    if foreign is not None and theirs is not None and foreign > theirs + _FOREIGN_MORE:
        signs.append(f"other processes used up to {foreign:.2f} CPU cores (siblings {theirs:.2f})")
    steal, theirs = _max(mine, "cpu_steal_cores"), siblings(_max, "cpu_steal_cores")
    if steal is not None and theirs is not None and steal > theirs + _STEAL_MORE:
        signs.append(f"the hypervisor took up to {steal:.2f} cores (siblings {theirs:.2f})")
    probe, theirs = _median(mine, "cpu_probe_ms"), siblings(_median, "cpu_probe_ms")
    if probe is not None and theirs and probe > theirs * _PROBE_SLOWER:
        signs.append(f"the CPU probe took {probe:.2f} ms (siblings {theirs:.2f})")
    return signs


def leave_out(cells: pd.DataFrame, outlier: OutlierRun) -> pd.DataFrame:
    """The run's cells with every valid one marked `outlier_run`, a disturbance: the verdict leaves them out."""
    marked = cells.copy()
    marked.attrs = dict(cells.attrs)
    fault = InvalidReason.of("outlier_run", detail=outlier.text())
    valid = marked["valid"].astype(bool)
    marked.loc[valid, "invalid_codes"] = fault.code
    marked.loc[valid, "invalid_reasons"] = fault.text
    marked.loc[valid, "valid"] = False
    return marked


def mark_outliers(cells_by_name: dict[str, list[pd.DataFrame | None]], run_ids: dict[str, list[str]],
                  rules: VerdictRules) -> list[OutlierRun]:
    """The study's outlier runs; a disturbed one's cells are marked in place, so that every statistic of the study
    (the candidate's, its peers', the baseline's) leaves them out alike."""
    found = outlier_runs(cells_by_name, run_ids, rules)
    for outlier in found:
        cells = cells_by_name[outlier.name][outlier.position]
        if outlier.disturbed and cells is not None:
            cells_by_name[outlier.name][outlier.position] = leave_out(cells, outlier)
    return found


def outliers_of(found: list[OutlierRun], name: str) -> tuple[list[str], list[str]]:
    """A candidate's outliers: the reasons naming those kept, and the ids of those left out."""
    mine = [o for o in found if o.name == name]
    return [f"outlier kept: {o.text()}" for o in mine if not o.disturbed], [o.run_id for o in mine if o.disturbed]
