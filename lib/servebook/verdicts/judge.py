"""Verdicts: accepted / rejected / inconclusive / failed, with reasons that name cells and intervals.

A verdict compares all sealed runs of a candidate with all runs of the baseline under the same
plan: each run gives one figure per cell, and each selected cell's change carries an interval over
runs (see `estimates`). A cell whose whole interval lies beyond the limit rejects; one whose
interval straddles the limit makes the verdict inconclusive, with the repeats that would likely
decide it. A verdict is computed from recorded cells only, so it can be recomputed under changed
rules at any time; each computation is appended to the newest run as a new event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..config.metrics import METRIC_WORDS
from ..config.rules import ComparisonRule, VerdictRules
from ..config.study import Study, StudyEntry
from ..estimates import ALPHA, spent_alpha
from ..journal import Journal, RunRecord
from ..journal.manifest import Failure, Manifest
from ..util.errors import InputError
from ..util.render import Block, Renderable, Style, Table
from .comparisons import Comparison, compare_rule, describe, select_cells, settle
from .evidence import all_disturbed, baseline_evidence, run_cells, undisturbed
from .left_out import LeftOutCell, disturbed_cells, left_out_reasons, left_out_runs
from .outliers import mark_outliers, outliers_of
from .output import read_output
from .problems import run_problems
from .recorded import ChosenBaseline, recorded_baseline
from .scaling import ScalingComparison, scaling_comparisons
from .side_effects import line, side_effects
from .verdict import Outcome, Verdict


def judge_runs(runs: list[tuple[Manifest | None, pd.DataFrame | None]], baseline_runs: list[pd.DataFrame],
               rules: VerdictRules, *, is_baseline: bool, peers: dict[str, list[pd.DataFrame]] | None = None,
               alpha: float = ALPHA, look: str = "", baseline_lost: list[str] | None = None,
               scale: tuple[int, int] | None = None, baseline_disturbed: list[pd.DataFrame] | None = None) -> Verdict:
    """A candidate's verdict from all of its runs (manifest and cells each) against the baseline's cells;
    `peers`: the study's other candidates' valid runs, whose between-run noise the comparison pools;
    `scale`: the candidate's replicas and the baseline's, for the scaling rules;
    `baseline_lost`: why baseline runs were left out as damaged (a baseline whose evidence was lost leaves a sound
    candidate undecided, not rejected: running the baseline again decides it);
    `baseline_disturbed`: the baseline's cells left out as disturbed (`undisturbed`), for the same reason.

    Cells disturbed by other processes on the host are left out of the statistics, and said so (`left_out_cells`)."""
    if not runs or all(manifest is None for manifest, _ in runs):
        return Verdict("failed", ["incomplete: the run was never sealed"])
    failed = [m for m, _ in runs if m is not None and m.status != "completed"]
    completed = [(m, cells) for m, cells in runs if m is not None and m.status == "completed"]
    if not completed:
        return Verdict("failed", [(failed[0].failure or Failure()).text])
    reasons = [f"{len(failed)} of {len(runs)} runs failed: {(failed[0].failure or Failure()).text}"] if failed else []
    recorded = [(m, cells) for m, cells in completed if cells is not None and not cells.empty]
    if len(recorded) < len(completed):
        return Verdict("rejected", reasons + ["no cells were recorded"])
    notes: list[LeftOutCell] = []
    kept: list[tuple[Manifest, pd.DataFrame]] = []
    lost: list[pd.DataFrame] = []
    for manifest, cells in recorded:
        cells, disturbed = undisturbed(cells)
        notes += disturbed_cells(manifest.run_id or "", disturbed)
        kept.append((manifest, cells))
        lost.append(disturbed)
        reasons += run_problems(manifest, cells, rules, several=len(completed) > 1)
    if not reasons and all(cells.empty for _, cells in kept):
        return Verdict("inconclusive", [all_disturbed(lost)], left_out_cells=notes)
    if is_baseline:
        outcome: Outcome = "rejected" if reasons else "accepted"
        return Verdict(outcome, reasons or ["baseline of the study"], left_out_cells=notes)
    if not baseline_runs and baseline_lost and not reasons:
        return Verdict("inconclusive", ["no valid baseline run to compare against: run the baseline again"]
                       + baseline_lost, left_out_cells=notes)
    if not baseline_runs:
        return Verdict("rejected", reasons + ["no valid baseline run to compare against"] + (baseline_lost or []),
                       left_out_cells=notes)
    verdict = _compare(kept, baseline_runs, rules, reasons, peers=peers, alpha=alpha, look=look, scale=scale,
                       disturbed={"candidate": lost, "baseline": baseline_disturbed or []})
    verdict.left_out_cells = notes
    verdict.side_effects = side_effects([cells for _, cells in kept], baseline_runs, rules, peers, alpha)
    return verdict


def _sort_decision(c: Comparison, tested: int, failing: list[str], straddling: list[str],
                   not_by_runs: list[str]) -> None:
    """Add one settled comparison's reason to the list its decision belongs to: it rejects, more runs may decide
    it (`straddling`), or more runs will not (`not_by_runs`); a passing one adds nothing here."""
    if c.decision == "insufficient":  # more requests per cell decide it, not more runs
        not_by_runs.append(f"inconclusive: {c.text()}; a verdict never rests on it: measure more requests per cell")
    elif c.decision == "straddle":
        straddling.append(f"inconclusive: {c.text()}{_hint(c, tested)}")
    elif c.decision == "host":
        not_by_runs.append(f"inconclusive: {c.text()}; more runs on these machines will not decide it, "
                           "each machine's figure is the answer for its kind of host")
    elif c.decision == "missing" and c.runs and c.baseline_runs:
        straddling.append(f"inconclusive: {METRIC_WORDS[c.metric]}, {c.where}: no comparison, as runs are judged "
                          "within machines and no run of the baseline or another candidate shares a machine "
                          "with this candidate's (or a figure was not positive)")
    elif not c.ok:
        failing.append(c.text())


def _passing(rules: VerdictRules, comparisons: list[Comparison]) -> list[str]:
    """Each rule (and guard) every one of whose comparisons passed, and each scaling comparison that passed."""
    passing = []
    for guard, rule in _judged(rules):
        mine = [c for c in comparisons if c.metric == rule.metric and c.limit_pct == rule.max_regression_pct
                and c.guard == guard]
        if mine and all(c.ok for c in mine):
            passing.append(f"{'guard ' if guard else ''}{METRIC_WORDS[rule.metric]}: {describe(rule, mine)}")
    return passing + [c.text() for c in comparisons if isinstance(c, ScalingComparison) and c.ok]


def _compare(completed: list[tuple[Manifest, pd.DataFrame]], baseline_runs: list[pd.DataFrame], rules: VerdictRules,
             reasons: list[str], peers: dict[str, list[pd.DataFrame]] | None = None, alpha: float = ALPHA,
             look: str = "", scale: tuple[int, int] | None = None,
             disturbed: dict[str, list[pd.DataFrame]] | None = None) -> Verdict:
    """accepted: every judged cell non-inferior at one-sided `alpha` (an intersection-union test: no multiplicity
    penalty); rejected: some cell beyond the limit, with Holm's familywise control across the cells; else
    inconclusive. A cell the rule selects whose every run on one side was disturbed (`disturbed`: side -> the cells
    left out) is not compared, and leaves the verdict undecided: never accepted without it, never rejected for it."""
    runs = [cells for _, cells in completed]
    comparisons: list[Comparison] = []
    failing: list[str] = []
    straddling: list[str] = []
    passing: list[str] = []
    not_by_runs: list[str] = []
    settled = bool(reasons)
    for guard, rule in _judged(rules):
        found = compare_rule(runs, baseline_runs, rule, alpha, peers)
        for c in found:  # a guard only rejects or leaves undecided: its gains are no gains
            c.guard, c.better = guard, c.better and not guard
        comparisons.extend(found)
        unmeasured = _lost_cells(rule, {c.cell_id for c in found}, disturbed or {})
        straddling += [f"inconclusive: {METRIC_WORDS[rule.metric]}, {cell}: every {side} run of this cell was "
                       f"disturbed by other load on the host, so it was not compared: run the {side} again"
                       for cell, side in unmeasured]
        if not found and not unmeasured:
            failing.append(describe(rule, found))
            settled = True
    comparisons.extend(scaling_comparisons(runs, baseline_runs, rules.scaling, scale, alpha, peers))
    tested = settle(comparisons, alpha)
    for c in comparisons:
        _sort_decision(c, len(tested), failing, straddling, not_by_runs)
    passing += _passing(rules, comparisons)
    # A gain is named whatever the outcome: a drafter rejected at four requests may still be far faster at one.
    gains = [f"better beyond the noise: {c.text()}" for c in comparisons if c.better]
    method = _method(comparisons, alpha, look)
    if reasons or failing:
        return Verdict("rejected", reasons + failing + not_by_runs + straddling
                       + [f"within limits: {t}" for t in passing] + gains,
                       comparisons, settled, method)
    if straddling or not_by_runs:
        return Verdict("inconclusive", not_by_runs + straddling + [f"within limits: {t}" for t in passing] + gains,
                       comparisons, method=method, host_dependent=not straddling)
    return Verdict("accepted", (passing or ["valid, and no comparison rules to apply"]) + gains, comparisons,
                   method=method)


def _judged(rules: VerdictRules) -> list[tuple[bool, ComparisonRule]]:
    """(is a guard, the rule) for every rule and then every guard: both are compared alike."""
    return [(False, rule) for rule in rules.rules] + [(True, rule) for rule in rules.guards]


def _lost_cells(rule: ComparisonRule, compared: set[str], disturbed: dict[str, list[pd.DataFrame]]) -> list[tuple[str, str]]:
    """(cell id, side) for each cell of the rule that was left out as disturbed on a side and so never compared."""
    out: dict[str, str] = {}
    for side, frames in disturbed.items():
        for frame in frames:
            for cell in select_cells(frame, rule)["cell_id"] if not frame.empty else []:
                if cell not in compared:
                    out.setdefault(str(cell), side)
    return sorted(out.items())


def _hint(c: Comparison, cells: int) -> str:
    """Why an undecided cell is undecided, and what would decide it."""
    decide = (f"; about {c.repeats_to_decide} runs per side would likely decide it"
              if c.repeats_to_decide and c.repeats_to_decide <= 50 else "")
    if c.beyond_alone:
        own = c.change_low_pct if c.lower_is_better else c.change_high_pct
        side = "lower" if c.lower_is_better else "upper"
        level = (100 - c.confidence_pct) / 2
        return (f"; beyond the limit at this cell alone ({side} bound {own:+.1f}% at one-sided {level:.2g}%), not yet "
                f"with all {cells} cells tested together (Holm){decide}")
    return decide or "; the change sits so near the limit that no affordable number of runs decides it"


def _method(comparisons: list[Comparison], alpha: float, look: str) -> str | None:
    """What decided it, for the reader: the test, its level, and where the variance came from."""
    with_bounds = [c for c in comparisons if c.change_low_pct is not None]
    if not with_bounds:
        return None
    spent = f"{100 * alpha:.2g}%" + (f" ({look})" if look else "")
    return (f"each cell non-inferior at one-sided {spent}, all {len(comparisons)} required to accept; "
            f"rejection controlled across cells (Holm); in each interval the bound that accepts is at one-sided "
            f"{spent}, the bound that rejects at Holm's level (the error over the cells not rejected); "
            f"{with_bounds[0].method}")


def judge_run(manifest: Manifest | None, cells: pd.DataFrame | None, baseline_cells: pd.DataFrame | None,
              rules: VerdictRules, *, is_baseline: bool) -> Verdict:
    """One run against one baseline run (no interval: the reasons say so)."""
    baseline = [] if baseline_cells is None or baseline_cells.empty else [baseline_cells]
    return judge_runs([(manifest, cells)], baseline, rules, is_baseline=is_baseline)

def study_runs(study: Study, journal: Journal) -> list[tuple[StudyEntry, RunRecord | None]]:
    """The newest sealed run of every study candidate under the study's plan (None if never run)."""
    plan_id = study.plan.id
    return [(entry, journal.find(entry.candidate.id, plan_id)) for entry in study.expand()]

@dataclass
class Judged:
    """One study candidate, its runs (newest last) and its verdict (None if never run)."""

    entry: StudyEntry
    records: list[RunRecord]
    verdict: Verdict | None
    #: the candidate's damaged and archived runs, left out of the verdict and named in it
    left_out: list[RunRecord] = field(default_factory=list)
    #: whether the journal holds this verdict as its newest event (what the site and `journal ls` show)
    recorded: bool = True
    #: the candidate's runs left out as disturbed outliers (verdicts.outliers), by id
    outlier_runs: list[str] = field(default_factory=list)
    #: the event judge() made of the verdict, recorded or not: what every output reads (present/outputs)
    event: dict | None = None

    @property
    def record(self) -> RunRecord | None:
        return self.records[-1] if self.records else None


#: how a verdict's row is marked wherever verdicts are shown
VERDICT_STYLE: dict[str, Style] = {"accepted": "accepted", "rejected": "warn", "failed": "invalid"}


class Judgement(list, Renderable):
    """What `judge` returns: the study's candidates as judged (a list of Judged), shown as one table of verdicts
    with every reason, in a terminal, a notebook and the site alike; `baseline`: the study candidate the others are
    compared with, labelled "baseline" as every output labels it, never "accepted" (verdicts.ranking.outcome_label)."""

    def __init__(self, items: list[Judged] | None = None, baseline: str | None = None) -> None:
        super().__init__(items or [])
        self.baseline = baseline

    def blocks(self) -> list[Block]:
        table = Table(["candidate", "runs", "verdict", "reasons"], title="verdicts")
        for item in self:
            if item.record is None or item.verdict is None:
                table.add([item.entry.name, "-", "not run", "\n".join(left_out_reasons(item.left_out))], "dim")
                continue
            outcome = item.verdict.outcome
            shown = "baseline" if outcome == "accepted" and item.entry.name == self.baseline else outcome
            worse = line(item.verdict.side_effects)
            said = item.verdict.lines() + ([f"worse beyond the noise where no rule looks: {worse}"] if worse else [])
            table.add([item.entry.name, len(item.records), shown, "\n".join(said)], VERDICT_STYLE.get(outcome, ""))
        return [table]

def _look(study: Study, records: list[RunRecord]) -> tuple[float, str]:
    """The error this verdict may spend. A fixed design (no verdict.max_runs) spends ALPHA once; a sequential
    one (runs added until decided, up to max_runs) spends a share of it at each look, so that looking after
    every added run does not inflate the error."""
    max_runs = study.verdict.max_runs
    if not max_runs or max_runs <= study.repeats:
        return ALPHA, ""
    looks = max_runs - study.repeats + 1
    done = sum(1 for r in records if r.status == "completed")
    look = min(max(done - study.repeats + 1, 1), looks)
    return spent_alpha(look, looks, first_runs=study.repeats), f"look {look} of {looks}, group-sequential"


def _recorded_baseline(study: Study, journal: Journal, runs: dict[str, list[RunRecord]]) -> ChosenBaseline | None:
    """The recorded runs a study names as its baseline, on the machine its newest run measured on (None: the
    study runs its own baseline, or nothing has run yet)."""
    spec = study.verdict.baseline_from
    completed = sorted((r for records in runs.values() for r in records if r.status == "completed" and r.manifest),
                       key=lambda r: r.identity.started_at or "")
    if spec is None or not completed:
        return None
    machine = completed[-1].manifest.environment.host_identity if completed[-1].manifest else ""
    own = {r.run_id for records in runs.values() for r in records}
    return recorded_baseline(journal, spec, study.plan.id, machine, own)


def _scale(entry: StudyEntry, entries: list[StudyEntry], rules: VerdictRules) -> tuple[int, int] | None:
    """The candidate's replicas and the study baseline's, where scaling rules judge them."""
    baseline = next((e for e in entries if e.name == rules.baseline_entry), None)
    if not rules.scaling or baseline is None:
        return None
    return entry.candidate.launch.replicas, baseline.candidate.launch.replicas


def _cells(records: list[RunRecord]) -> list[pd.DataFrame | None]:
    """Each run's cells with the samples behind every percentile (runs sealed before they were counted get them from
    their requests, measure.figures.tails): no verdict rests on a tail too thin to say it, no side effect unmarked."""
    return run_cells(records, counted=True)


def judge(study: Study, journal: Journal, *, append: bool = True) -> Judgement:
    """Judge every candidate's recorded runs under the study's current rules; append an event to the
    candidate's newest run where the verdict changed. A journal that does not exist is an error, not a study
    whose candidates were never run."""
    journal.require()
    rules = study.verdict
    entries = study.expand()
    if rules.baseline_entry is not None and not any(entry.name == rules.baseline for entry in entries):
        raise InputError(f"verdict.baseline: no candidate named {rules.baseline!r} in study {study.name} "
                         f"(names: {', '.join(e.name for e in entries)})")
    found = {e.name: journal.find_all(e.candidate.id, study.plan.id, ("completed", "failed", "damaged", "degraded"),
                                      archived=True) for e in entries}
    runs = {name: [r for r in records if r.status != "damaged" and not r.archived] for name, records in found.items()}
    left_out = {name: [r for r in records if r.status == "damaged" or r.archived] for name, records in found.items()}
    recorded = _recorded_baseline(study, journal, runs)
    baseline_lost = [] if recorded else left_out_reasons(left_out.get(rules.baseline, []))
    baseline_records = recorded.records if recorded else runs[rules.baseline]
    cells_by_name = {name: _cells(records) for name, records in runs.items()}  # each read once
    outliers = mark_outliers(cells_by_name, {name: [r.run_id for r in records] for name, records in runs.items()},
                             rules)
    baseline_frames = _cells(baseline_records) if recorded else cells_by_name[rules.baseline]
    if recorded:
        # Recorded runs were not interleaved with these: rounds mean nothing across them, only the machine does.
        for frame in [f for frames in [*cells_by_name.values(), baseline_frames] for f in frames if f is not None]:
            frame.attrs["block"] = (frame.attrs["host"],)
    evidence = {name: baseline_evidence(cells) for name, cells in cells_by_name.items()}
    baseline_cells = baseline_evidence(baseline_frames)
    baseline_disturbed = [undisturbed(cells)[1] for cells in baseline_frames if cells is not None and not cells.empty]
    out = []
    for index, entry in enumerate(entries):
        records = runs[entry.name]
        if not records:
            out.append(Judged(entry, [], None, left_out[entry.name]))
            continue
        peers = {name: frames for name, frames in evidence.items() if name not in (entry.name, rules.baseline_entry)}
        alpha, look = _look(study, records)
        is_baseline = entry.name == rules.baseline_entry
        judged = [(r.manifest, c) for r, c in zip(records, cells_by_name[entry.name], strict=True)]
        verdict = judge_runs(judged, baseline_cells, rules, is_baseline=is_baseline, peers=peers, alpha=alpha,
                             look=look, baseline_lost=baseline_lost, scale=_scale(entry, entries, rules),
                             baseline_disturbed=baseline_disturbed)
        verdict.reasons += left_out_reasons(left_out[entry.name])
        kept, dropped = outliers_of(outliers, entry.name)
        verdict.reasons += kept
        if recorded and rules.baseline_from:
            verdict.reasons.append(recorded.describe(rules.baseline_from))
        verdict.evidence, verdict.caveats, said = read_output(
            verdict.comparisons, cells_by_name[entry.name], drafter=entry.candidate.knobs.drafter.kind != "none",
            against=None if is_baseline else baseline_records, records=records)
        verdict.reasons += said
        event = verdict.to_event(study=study.name, candidate=entry.name, candidate_id=entry.candidate.id,
                                 question=study.description, note=entry.note,
                                 rules_hash=rules.hash, rules=rules.model_dump(mode="json"),
                                 run_ids=[r.run_id for r in records], entry_index=index,  # the study's order
                                 baseline_run_id=baseline_records[-1].run_id if baseline_records else None,
                                 baseline_run_ids=[r.run_id for r in baseline_records],
                                 **({"outlier_runs": dropped} if dropped else {}), **left_out_runs(left_out[entry.name]))
        out.append(Judged(entry, records, verdict, left_out[entry.name], recorded=_recorded(records, event, append),
                          outlier_runs=dropped, event=event))
    return Judgement(out, rules.baseline_entry)


def _recorded(records: list[RunRecord], event: dict, append: bool) -> bool:
    """Appends the event to the newest run where the verdict changed (`append`); whether the journal then holds it."""
    latest = records[-1].latest_verdict
    unchanged = latest is not None and all(
        latest.get(k) == event.get(k) for k in ("outcome", "reasons", "method", "rules_hash", "run_ids",
                                               "baseline_run_ids", "side_effects", "left_out_cells"))
    if append and not unchanged:
        records[-1].append_verdict(event)
    return append or unchanged
