"""Verdicts: accepted / rejected / inconclusive / failed, with reasons that name cells and intervals.

A verdict compares all sealed runs of a candidate with all runs of the baseline under the same
plan: each run gives one figure per cell, and each selected cell's change carries an interval over
runs (see `estimates`). A cell whose whole interval lies beyond the limit rejects; one whose
interval straddles the limit makes the verdict inconclusive, with the repeats that would likely
decide it. A verdict is computed from recorded cells only, so it can be recomputed under changed
rules at any time; each computation is appended to the newest run as a new event.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

import pandas as pd

from .config.rules import LOWER_IS_BETTER, METRIC_WORDS, ComparisonRule, VerdictRules
from .config.study import Study, StudyEntry
from .estimates import CONFIDENCE, Change, Decision, Estimate, change, decide, repeats_to_decide, runs_needed_for
from .journal import Journal, RunRecord
from .journal.manifest import Failure, Manifest
from .measure.equivalence import compare_outputs
from .measure.equivalence import describe as describe_equivalence
from .measure.validity import codes_of, only_disturbed
from .util.errors import InputError

Outcome = Literal["accepted", "rejected", "inconclusive", "failed"]


@dataclass
class Comparison:
    """One selected cell of one rule: both sides' means over runs, the change and its interval."""

    metric: str
    cell_id: str
    category: str | None
    concurrency: int | None
    prompt_tokens: int | None
    value: float | None
    baseline: float | None
    runs: int
    baseline_runs: int
    change_pct: float | None
    change_low_pct: float | None
    change_high_pct: float | None
    limit_pct: float
    decision: Decision
    ok: bool
    repeats_to_decide: int | None = None
    confidence_pct: float = 100 * CONFIDENCE

    @property
    def where(self) -> str:
        if self.prompt_tokens is not None and self.concurrency is None:
            return f"at {self.prompt_tokens} tokens"
        n = self.concurrency
        return f"{self.category} at {n} request{'s' if n != 1 else ''}"

    def text(self) -> str:
        """'aggregate decode, prose at 4 requests: -34.0% [-41.2, -27.1] (limit -7%)'."""
        sign = "+" if self.metric in LOWER_IS_BETTER else "-"
        if self.change_pct is None:
            figure = "no figure on one side"
        else:
            interval = (f" [{self.change_low_pct:+.1f}, {self.change_high_pct:+.1f}]"
                        if self.change_low_pct is not None else f" ({self.runs} vs {self.baseline_runs} runs: "
                                                                    "no interval)")
            figure = f"{self.change_pct:+.1f}%{interval}"
        return f"{METRIC_WORDS[self.metric]}, {self.where}: {figure} (limit {sign}{self.limit_pct:g}%)"


@dataclass
class Verdict:
    outcome: Outcome
    reasons: list[str]
    comparisons: list[Comparison] = field(default_factory=list)
    #: rejected for something more runs cannot change (a failed gate or load, an invalid cell, a rule with no cells)
    settled: bool = False

    @property
    def undecided(self) -> bool:
        """Whether more runs could change the outcome: an interval straddles a limit, or a comparison rests on
        one run per side, and nothing else (a failed load, an invalid cell, a failed gate) already decided it."""
        if self.outcome == "inconclusive":
            return True
        if self.outcome == "failed" or self.settled or any(c.decision == "fail" for c in self.comparisons):
            return False
        return any(c.decision == "single" for c in self.comparisons)

    def to_event(self, **context) -> dict:
        return {"outcome": self.outcome, "reasons": self.reasons,
                "comparisons": [asdict(c) for c in self.comparisons], **context}


def _select(cells: pd.DataFrame, rule: ComparisonRule) -> pd.DataFrame:
    chosen = cells[cells["kind"] == rule.kind]
    if rule.concurrency:
        chosen = chosen[chosen["concurrency"].isin(rule.concurrency)]
    if rule.category:
        chosen = chosen[chosen["category"] == rule.category]
    if rule.prompt_tokens:
        chosen = chosen[chosen["target_prompt_tokens"].isin(rule.prompt_tokens)]
    return chosen


def _figures(runs: list[pd.DataFrame], rule: ComparisonRule) -> dict[str, list[float]]:
    """cell id -> the rule's figure in each run that has it."""
    out: dict[str, list[float]] = {}
    for cells in runs:
        for row in _select(cells, rule).to_dict("records"):
            value = row.get(rule.metric)
            if value is not None and not pd.isna(value):
                out.setdefault(row["cell_id"], []).append(float(value))
    return out


def compare_rule(runs: list[pd.DataFrame], baseline_runs: list[pd.DataFrame],
                 rule: ComparisonRule, confidence: float = CONFIDENCE) -> list[Comparison]:
    """Every cell the rule selects, in the candidate's cell order, compared over runs at `confidence`."""
    if isinstance(runs, pd.DataFrame):
        runs = [runs]
    if isinstance(baseline_runs, pd.DataFrame):
        baseline_runs = [baseline_runs]
    mine, theirs = _figures(runs, rule), _figures(baseline_runs, rule)
    described = {row["cell_id"]: row for cells in runs for row in _select(cells, rule).to_dict("records")}
    lower = rule.metric in LOWER_IS_BETTER
    out = []
    for cell_id, values in mine.items():
        if cell_id not in theirs:
            continue
        row = described[cell_id]
        found: Change | None = change(values, theirs[cell_id], confidence)
        decision = decide(found, rule.max_regression_pct, lower)
        regression = None if found is None else (found.pct if lower else -found.pct)
        ok = decision == "pass" or (decision == "single" and regression <= rule.max_regression_pct)
        prompt = row.get("target_prompt_tokens")
        out.append(Comparison(
            metric=rule.metric, cell_id=cell_id, category=row.get("category"),
            concurrency=int(row["concurrency"]) if rule.kind == "decode" else None,
            prompt_tokens=None if prompt is None or pd.isna(prompt) else int(prompt),
            value=Estimate.of(values).mean, baseline=Estimate.of(theirs[cell_id]).mean,
            runs=len(values), baseline_runs=len(theirs[cell_id]),
            change_pct=None if found is None else found.pct,
            change_low_pct=found.low if found is not None else None,
            change_high_pct=found.high if found is not None else None,
            limit_pct=rule.max_regression_pct, decision=decision, ok=bool(ok), confidence_pct=100 * confidence,
            repeats_to_decide=repeats_to_decide(found, rule.max_regression_pct, lower, confidence)
            if decision == "straddle" else None,
        ))
    return out


def describe(rule: ComparisonRule, comparisons: list[Comparison]) -> str:
    """A rule whose cells all pass, in one line that still names the worst cell."""
    if not comparisons:
        return f"{METRIC_WORDS[rule.metric]}: no matching cells in both runs"
    regressions = [(c.change_pct if c.metric in LOWER_IS_BETTER else -c.change_pct, c)
                   for c in comparisons if c.change_pct is not None]
    if not regressions:
        return f"{METRIC_WORDS[rule.metric]}: no figures"
    worst = max(regressions, key=lambda pair: pair[0])[1]
    return f"{len(comparisons)} cell(s) within limits, the worst {worst.text()}"


def cell_codes(cells: pd.DataFrame) -> list[list[str]]:
    """Each recorded cell's fault codes (read from the text only for journals written before codes)."""
    codes = cells["invalid_codes"] if "invalid_codes" in cells.columns else [None] * len(cells)
    texts = cells["invalid_reasons"] if "invalid_reasons" in cells.columns else [None] * len(cells)
    return [codes_of(c, t) for c, t in zip(codes, texts)]


def _undisturbed(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, disturbed cells): a cell whose only faults are other processes' load (host CPU or the engine's
    GPU) is evidence lost, not a fault of the candidate, so it leaves the statistics instead of rejecting."""
    disturbed = [only_disturbed(codes) for codes in cell_codes(cells)]
    only_busy = ~cells["valid"].astype(bool) & pd.Series(disturbed, index=cells.index, dtype=bool)
    return cells[~only_busy], cells[only_busy]


def judge_runs(runs: list[tuple[Manifest | None, pd.DataFrame | None]], baseline_runs: list[pd.DataFrame],
               rules: VerdictRules, *, is_baseline: bool) -> Verdict:
    """A candidate's verdict from all of its runs (manifest and cells each) against the baseline's cells.

    Cells disturbed by other processes on the host are left out of the statistics, and said so."""
    if not runs or all(manifest is None for manifest, _ in runs):
        return Verdict("failed", ["incomplete: the run was never sealed"])
    failed = [m for m, _ in runs if m is not None and m.status != "completed"]
    completed = [(m, cells) for m, cells in runs if m is not None and m.status == "completed"]
    if not completed:
        return Verdict("failed", [(failed[0].failure or Failure()).text])
    reasons = [f"{len(failed)} of {len(runs)} runs failed: {(failed[0].failure or Failure()).text}"] if failed else []
    if any(cells is None or cells.empty for _, cells in completed):
        return Verdict("rejected", reasons + ["no cells were recorded"])
    notes, kept = [], []
    for manifest, cells in completed:
        cells, disturbed = _undisturbed(cells)
        notes += [f"left out: run {manifest.run_id} {row.cell_id} ({row.invalid_reasons})"
                  for row in disturbed.itertuples()]
        kept.append((manifest, cells))
        reasons += _run_problems(manifest, cells, rules, several=len(completed) > 1)
    if not reasons and all(cells.empty for _, cells in kept):
        return Verdict("inconclusive", ["every cell was disturbed by other load on the host, so nothing was "
                                        "measured: run it again on a quiet host"] + notes)
    if is_baseline:
        outcome = "rejected" if reasons else "accepted"
        return Verdict(outcome, (reasons or ["baseline of the study"]) + notes)
    if not baseline_runs:
        return Verdict("rejected", reasons + ["no valid baseline run to compare against"] + notes)
    verdict = _compare(kept, baseline_runs, rules, reasons, left_out=bool(notes))
    verdict.reasons += notes
    return verdict


def family_confidence(runs: list[pd.DataFrame], baseline_runs: list[pd.DataFrame], rules: VerdictRules) -> float:
    """Each cell's interval confidence such that all of a verdict's cells hold together at 95% (Bonferroni):
    a verdict that looks at ten cells would otherwise find one 'beyond the limit' by chance."""
    cells = sum(len(set(_figures(runs, rule)) & set(_figures(baseline_runs, rule))) for rule in rules.rules)
    return 1.0 - (1.0 - CONFIDENCE) / max(1, cells)


def _compare(completed, baseline_runs, rules: VerdictRules, reasons: list[str], left_out: bool = False) -> Verdict:
    comparisons: list[Comparison] = []
    failing, straddling, passing = [], [], []
    settled = bool(reasons)
    runs = [cells for _, cells in completed]
    confidence = family_confidence(runs, baseline_runs, rules)
    for rule in rules.rules:
        found = compare_rule(runs, baseline_runs, rule, confidence)
        comparisons.extend(found)
        if not found and left_out:
            straddling.append(f"inconclusive: {METRIC_WORDS[rule.metric]}: no cell left to compare once the "
                              "disturbed cells were left out")
        elif not found:
            failing.append(describe(rule, found))
            settled = True
        for c in found:
            if c.decision == "straddle":
                hint = (f"; about {c.repeats_to_decide} runs per side would likely decide it"
                        if c.repeats_to_decide and c.repeats_to_decide <= 50 else
                        "; the change sits so near the limit that no affordable number of runs decides it")
                straddling.append(f"inconclusive: {c.text()}{hint}")
            elif not c.ok:
                failing.append(c.text())
        if found and all(c.ok for c in found):
            passing.append(f"{METRIC_WORDS[rule.metric]}: {describe(rule, found)}")
    intervals = ([f"intervals: {100 * confidence:.1f}% per cell, so that all {len(comparisons)} judged cells hold "
                  f"together at {100 * CONFIDENCE:.0f}%"] if len(comparisons) > 1
                 and any(c.change_low_pct is not None for c in comparisons) else [])
    if reasons or failing:
        return Verdict("rejected", reasons + failing + straddling + [f"within limits: {t}" for t in passing]
                       + intervals, comparisons, settled)
    if straddling:
        return Verdict("inconclusive", straddling + [f"within limits: {t}" for t in passing] + intervals, comparisons)
    return Verdict("accepted", (passing or ["valid, and no comparison rules to apply"]) + intervals, comparisons)


def judge_run(manifest: Manifest | None, cells: pd.DataFrame | None, baseline_cells: pd.DataFrame | None,
              rules: VerdictRules, *, is_baseline: bool) -> Verdict:
    """One run against one baseline run (no interval: the reasons say so)."""
    baseline = [] if baseline_cells is None or baseline_cells.empty else [baseline_cells]
    return judge_runs([(manifest, cells)], baseline, rules, is_baseline=is_baseline)


def _run_problems(manifest: Manifest, cells: pd.DataFrame, rules: VerdictRules, several: bool) -> list[str]:
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
    return reasons


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

    @property
    def record(self) -> RunRecord | None:
        return self.records[-1] if self.records else None


@dataclass
class NoiseFloor:
    """The baseline's own between-run spread in one cell a rule selects, and what the rule's limit needs."""

    metric: str
    cell_id: str
    runs: int
    cv_pct: float | None
    limit_pct: float
    runs_needed: int | None

    @property
    def resolvable(self) -> bool | None:
        if self.cv_pct is None:
            return None
        return self.runs_needed is not None and self.runs >= self.runs_needed


def noise_rows(baseline_runs: list[pd.DataFrame], rules: VerdictRules) -> list[NoiseFloor]:
    """Per rule and selected cell: the baseline's between-run CV, and the runs per side its limit needs."""
    out = []
    for rule in rules.rules:
        for cell_id, values in _figures(baseline_runs, rule).items():
            cv = Estimate.of(values).cv_pct
            out.append(NoiseFloor(rule.metric, cell_id, len(values), cv, rule.max_regression_pct,
                                  runs_needed_for(rule.max_regression_pct, cv) if cv is not None else None))
    return out


def noise_floor(study: Study, journal: Journal) -> list[NoiseFloor]:
    """The study's noise floor, from the baseline's recorded runs under the study's plan."""
    baseline = next((e for e in study.expand() if e.name == study.verdict.baseline), None)
    if baseline is None:
        return []
    return noise_rows(_valid_cells(journal.find_all(baseline.candidate.id, study.plan.id)), study.verdict)


def _valid_cells(records: list[RunRecord]) -> list[pd.DataFrame]:
    return baseline_evidence([record.table("cells") if record.status == "completed" else None
                              for record in records])


def baseline_evidence(runs: list[pd.DataFrame | None]) -> list[pd.DataFrame]:
    """The baseline's evidence: cells of completed runs without faults, disturbed cells left out."""
    out = []
    for cells in runs:
        if cells is None or cells.empty:
            continue
        cells, _ = _undisturbed(cells)
        if bool(cells["valid"].all()):
            out.append(cells)
    return out


def _output_equivalence(baseline_records: list, records: list) -> str | None:
    """Greedy outputs of the candidate's newest run against the baseline's (plan.equivalence), as a note: a drafter
    or a batching change must not change what the model says."""
    def outputs(found: list):
        table = next((t for t in (r.table("outputs") for r in reversed(found) if r.status == "completed")
                      if t is not None), None)
        return None if table is None else table.to_dict("records")

    reference, other = outputs(baseline_records), outputs(records)
    if reference is None or other is None:
        return None
    return describe_equivalence(compare_outputs(reference, other), "the baseline")


def judge(study: Study, journal: Journal, *, append: bool = True) -> list[Judged]:
    """Judge every candidate's recorded runs under the study's current rules; append an event to the
    candidate's newest run where the verdict changed."""
    rules = study.verdict
    entries = study.expand()
    if not any(entry.name == rules.baseline for entry in entries):
        raise InputError(f"verdict.baseline: no candidate named {rules.baseline!r} in study {study.name} "
                         f"(names: {', '.join(e.name for e in entries)})")
    runs = {e.name: journal.find_all(e.candidate.id, study.plan.id) for e in entries}
    baseline_records = runs[rules.baseline]
    baseline_cells = _valid_cells(baseline_records)
    out = []
    for entry in entries:
        records = runs[entry.name]
        if not records:
            out.append(Judged(entry, [], None))
            continue
        verdict = judge_runs([(r.manifest, r.table("cells")) for r in records], baseline_cells, rules,
                             is_baseline=entry.name == rules.baseline)
        if entry.name != rules.baseline:
            equivalence = _output_equivalence(baseline_records, records)
            if equivalence:
                verdict.reasons.append(equivalence)
        event = verdict.to_event(study=study.name, candidate=entry.name, candidate_id=entry.candidate.id,
                                 rules_hash=rules.hash, rules=rules.model_dump(mode="json"),
                                 run_ids=[r.run_id for r in records],
                                 baseline_run_id=baseline_records[-1].run_id if baseline_records else None,
                                 baseline_run_ids=[r.run_id for r in baseline_records])
        latest = records[-1].latest_verdict
        unchanged = latest is not None and all(
            latest.get(k) == event[k] for k in ("outcome", "reasons", "rules_hash", "run_ids", "baseline_run_ids"))
        if append and not unchanged:
            records[-1].append_verdict(event)
        out.append(Judged(entry, records, verdict))
    return out
