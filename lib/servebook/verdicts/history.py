"""A configuration over time, and any two slices of a journal compared.

`history`: every run of one candidate under one plan on one machine, in time order, per judged cell; the engine
version, image and driver marked where they change, and the steps the series took (estimates.changes), each
with the runs before and after and the change with its interval.

`compare_slices`: candidate A against B, engine version X against Y, this week against last, with the verdicts'
statistics: one model per cell, runs as the unit, machines as blocks (a machine only one side ran on leaves).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..config.rules import ComparisonRule
from ..config.slices import JournalSlice
from ..estimates import ALPHA, fit_contrasts
from ..estimates.changes import Step, find_steps
from ..journal import Journal, RunRecord
from ..util.errors import InputError
from ..util.frames import frame_records
from .comparisons import Comparison, blocked_figures, comparison_of, select_cells, settle
from .evidence import undisturbed


def default_rules(limit_pct: float = 5.0) -> list[ComparisonRule]:
    """What a history or a comparison follows when no study names its rules: every decode and prefill cell, and
    the capacity where a run searched one (runs without it add nothing)."""
    return [ComparisonRule(metric="aggregate_tok_s", max_regression_pct=limit_pct),
            ComparisonRule(metric="prefill_tok_s", max_regression_pct=limit_pct),
            ComparisonRule(metric="capacity_rps", max_regression_pct=limit_pct)]
MARKED = ("engine_version", "image_digest", "driver", "candidate_id")


@dataclass
class Point:
    run_id: str
    started_at: str
    value: float
    marks: dict[str, str | None]


@dataclass
class CellSeries:
    metric: str
    cell_id: str
    points: list[Point]
    steps: list[Step] = field(default_factory=list)

    def changes_of_setup(self) -> list[tuple[int, str]]:
        """(index of the first run after, what changed) wherever the engine, image, driver or configuration did."""
        out = []
        for i in range(1, len(self.points)):
            before, after = self.points[i - 1].marks, self.points[i].marks
            changed = [f"{k.replace('_', ' ')} {before.get(k) or '-'} -> {after.get(k) or '-'}"
                       for k in MARKED if before.get(k) != after.get(k)]
            if changed:
                out.append((i, "; ".join(changed)))
        return out


@dataclass
class History:
    candidate: str
    machine: str
    plan_id: str
    series: list[CellSeries]
    runs: int
    #: runs of the candidate left out: machine -> runs elsewhere, and runs under other plans
    other_machines: dict[str, int] = field(default_factory=dict)
    other_plans: int = 0
    #: the study whose runs these are (None: runs made outside any study)
    study: str | None = None


def _marks(row: dict) -> dict[str, str | None]:
    return {k: (None if pd.isna(row.get(k)) else str(row.get(k))) for k in MARKED}


def _valid(record: RunRecord) -> pd.DataFrame | None:
    cells = record.table("cells")
    if cells is None or cells.empty:
        return None
    kept, _ = undisturbed(cells)
    kept = kept[kept["valid"].astype(bool)]
    kept.attrs["block"] = (record.manifest.environment.host_identity if record.manifest else "",)
    return kept


def history(journal: Journal, candidate: str, *, rules: list[ComparisonRule] | None = None,
            machine: str | None = None, plan_id: str | None = None, study: str | None = None,
            index: pd.DataFrame | None = None, cells: pd.DataFrame | None = None) -> History:
    """The runs of `candidate` (its name or an id prefix) on one machine (default: where it ran last) under one
    plan (default: its newest run's), with the steps of each judged cell's series. `index` and `cells` (every
    recorded cell of the candidate's runs, with a `run_id` column) may come from a caller that holds them
    already (the site, from its cache); otherwise they are read from the journal."""
    wanted = JournalSlice(candidate=candidate, study=study)
    index = journal.index() if index is None else index
    every = wanted.select(index)
    if every.empty:
        raise InputError(f"history: no completed run of {candidate!r}" + (f" in study {study}" if study else "")
                         + f" in {journal.location}" + wanted.unknown_names(index))
    one_identity(every if plan_id is None else every[every["plan_id"] == plan_id], candidate, "history",
                 "--study NAME or --plan PLAN")
    plan = plan_id or str(every.iloc[-1]["plan_id"])
    same_plan = every[every["plan_id"] == plan]
    if same_plan.empty:
        raise InputError(f"history: no completed run of {candidate!r} under plan {plan}")
    where = str(same_plan.iloc[-1]["machine"]) if machine is None else \
        next((m for m in same_plan["machine"].dropna().unique() if machine in m), machine)
    rows = same_plan[same_plan["machine"] == where]
    elsewhere = same_plan[same_plan["machine"] != where]["machine"].fillna("unknown").value_counts().to_dict()
    if cells is None:
        cells = _cells_of(journal, list(rows["run_id"]))
    series = _series(rows, _valid_cells(cells), rules or default_rules())
    for line in series:
        line.steps = find_steps([p.value for p in line.points])
    return History(candidate, where, plan, series, len(rows), {str(k): int(v) for k, v in elsewhere.items()},
                   len(every) - len(same_plan), _study_of(rows))


def _study_of(rows: pd.DataFrame) -> str | None:
    studies = rows["study"].dropna().unique()
    return str(studies[0]) if len(studies) == 1 else None


def one_identity(rows: pd.DataFrame, candidate: str, what: str, fix: str) -> None:
    """Refuse a name that several configurations share. A name is a study entry's ("baseline" is in every study), so
    it names one configuration only under one plan: the cells measured (a release gate's baseline, measured as its
    qualification's was, continues that history). Taking the newest run's plan instead made `history baseline`
    change meaning with whichever study ran last; an id prefix must likewise name one id under one plan."""
    keys: dict[tuple[str, str], list[int]] = {}
    for position, (p, c, i) in enumerate(zip(rows["plan_id"], rows["candidate"], rows["candidate_id"], strict=True)):
        keys.setdefault((str(p or ""), c if c == candidate else str(i)), []).append(position)
    if len(keys) <= 1:
        return
    found = []
    for (plan, name), positions in sorted(keys.items()):
        runs = rows.iloc[positions]
        studies = ", ".join(sorted({str(s) for s in runs["study"].dropna()})) or "no study"
        ids = ", ".join(sorted({str(i)[:8] for i in runs["candidate_id"].dropna()}))
        label = name if name == candidate else f"candidate {name[:12]} ({', '.join(sorted(set(runs['candidate'])))})"
        found.append(f"{label} under plan {plan} (study {studies}; candidate {ids}; {len(runs)} runs)")
    raise InputError(f"{what}: {candidate!r} names {len(found)} configurations: {'; '.join(found)}. Say which: "
                     f"{fix}, or a longer candidate id prefix")


def _cells_of(journal: Journal, run_ids: list[str]) -> pd.DataFrame:
    frames = [table.assign(run_id=run_id) for run_id in run_ids
              if (table := journal.run(run_id).table("cells")) is not None and not table.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", "valid"])


def _valid_cells(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return cells
    kept, _ = undisturbed(cells.reset_index(drop=True))
    return kept[kept["valid"].astype(bool)]


def _series(rows: pd.DataFrame, cells: pd.DataFrame, rules: list[ComparisonRule]) -> list[CellSeries]:
    """Each (metric, cell) series over the runs in `rows`' order, its points in the order of run, rule and cell.
    Selected in one frame for every run: a frame per run was most of a history of a hundred runs."""
    order = {run_id: i for i, run_id in enumerate(rows["run_id"])}
    cells = cells[cells["run_id"].isin(order)] if not cells.empty else cells
    picked = []
    for r, rule in enumerate(rules):
        if rule.metric not in cells.columns:
            continue
        chosen = select_cells(cells, rule)
        values = pd.to_numeric(chosen[rule.metric], errors="coerce")
        chosen = chosen[values.notna() & (values > 0)]
        picked.append(pd.DataFrame({"run": chosen["run_id"].map(order), "rule": r, "row": chosen.index,
                                    "metric": rule.metric, "cell_id": chosen["cell_id"].astype(str),
                                    "value": values[chosen.index].astype(float)}))
    if not picked:
        return []
    points = pd.concat(picked).sort_values(["run", "rule", "row"], kind="stable")
    facts = {row["run_id"]: (row["started_at"] or "", _marks(row)) for row in frame_records(rows)}
    run_ids = list(order)
    series: dict[tuple[str, str], CellSeries] = {}
    for run, metric, cell_id, value in zip(points["run"], points["metric"], points["cell_id"], points["value"], strict=True):
        run_id = run_ids[run]
        started_at, marks = facts[run_id]
        series.setdefault((metric, cell_id), CellSeries(metric, cell_id, [])).points.append(
            Point(run_id, started_at, float(value), marks))
    return list(series.values())


@dataclass
class SliceComparison:
    a: JournalSlice
    b: JournalSlice
    runs_a: list[str]
    runs_b: list[str]
    plan_id: str
    comparisons: list[Comparison]


def compare_slices(journal: Journal, a: JournalSlice, b: JournalSlice,
                   rules: list[ComparisonRule] | None = None, alpha: float = ALPHA) -> SliceComparison:
    """B against A per cell (B's change, A being the reference), with one-sided bounds at `alpha` each."""
    index = journal.index()
    rows_a, rows_b = a.select(index), b.select(index)
    for name, rows, spec in (("A", rows_a, a), ("B", rows_b, b)):
        if rows.empty:
            raise InputError(f"compare: slice {name} ({spec.describe()}) holds no completed run"
                             + spec.unknown_names(index))
        if spec.candidate and not spec.plan_id:
            one_identity(rows, spec.candidate, f"compare: slice {name}",
                         f"add study=NAME or plan_id=PLAN to --{name.lower()}")
    plans = set(rows_a["plan_id"]) | set(rows_b["plan_id"])
    if len(plans) > 1:
        raise InputError(f"compare: the slices span plans {', '.join(sorted(plans))}, whose cells differ; add "
                         "plan_id=... to both")
    runs_a = [f for f in (_valid(journal.run(r)) for r in rows_a["run_id"]) if f is not None]
    runs_b = [f for f in (_valid(journal.run(r)) for r in rows_b["run_id"]) if f is not None]
    out: list[Comparison] = []
    for rule in rules or default_rules():
        mine, theirs = blocked_figures(runs_b, rule), blocked_figures(runs_a, rule)
        described = {row["cell_id"]: row for cells in runs_b for row in frame_records(select_cells(cells, rule))}
        for cell_id, values in mine.items():
            if cell_id not in theirs:
                continue
            contrast = fit_contrasts({"B": values, "A": theirs[cell_id]}, "A").get("B")
            row = {str(k): v for k, v in described[cell_id].items()}
            out.append(comparison_of(rule, row, values, theirs[cell_id], contrast, alpha))
    if not out:  # nothing to judge is said and refused, as a slice holding no run is, never an empty table
        metrics = ", ".join(sorted({str(rule.metric) for rule in rules or default_rules()}))
        raise InputError(f"compare: no cell of the rules ({metrics}) was measured validly in both slices "
                         f"({len(runs_a)} and {len(runs_b)} runs); check the rules' metrics and cells against "
                         "`servebook journal show RUN`")
    settle(out, alpha)  # a cell beyond its limit across the cells (Holm) is a regression, not undecided
    return SliceComparison(a, b, list(rows_a["run_id"]), list(rows_b["run_id"]), plans.pop(), out)
