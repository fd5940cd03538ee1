"""Verdicts: accepted / rejected / failed, with reasons a reader can check against the numbers.

A verdict is computed from recorded cells only, so it can be recomputed under changed rules at
any time; each computation is appended to the run as a new event, never overwriting the last.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

import pandas as pd

from .config.errors import InputError
from .config.rules import LOWER_IS_BETTER, METRIC_WORDS, ComparisonRule, VerdictRules
from .config.study import Study, StudyEntry
from .journal.manifest import Failure, Manifest
from .journal.store import Journal, RunRecord


@dataclass
class Comparison:
    metric: str
    cell_id: str
    concurrency: int | None
    prompt_tokens: int | None
    value: float | None
    baseline: float | None
    change_pct: float | None
    regression_pct: float | None
    limit_pct: float
    ok: bool


@dataclass
class Verdict:
    outcome: Literal["accepted", "rejected", "failed"]
    reasons: list[str]
    comparisons: list[Comparison] = field(default_factory=list)

    def to_event(self, **context) -> dict:
        return {"outcome": self.outcome, "reasons": self.reasons,
                "comparisons": [asdict(c) for c in self.comparisons], **context}


def _pct(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or pd.isna(value) or pd.isna(base) or base == 0:
        return None
    return 100.0 * (value - base) / base


def _select(cells: pd.DataFrame, rule: ComparisonRule) -> pd.DataFrame:
    chosen = cells[cells["kind"] == rule.kind]
    if rule.concurrency:
        chosen = chosen[chosen["concurrency"].isin(rule.concurrency)]
    if rule.category:
        chosen = chosen[chosen["category"] == rule.category]
    if rule.prompt_tokens:
        chosen = chosen[chosen["target_prompt_tokens"].isin(rule.prompt_tokens)]
    return chosen


def compare_rule(cells: pd.DataFrame, baseline: pd.DataFrame, rule: ComparisonRule) -> list[Comparison]:
    mine = _select(cells, rule).set_index("cell_id")
    theirs = _select(baseline, rule).set_index("cell_id")
    out = []
    for cell_id in mine.index.intersection(theirs.index):
        value, base = mine.at[cell_id, rule.metric], theirs.at[cell_id, rule.metric]
        change = _pct(value, base)
        regression = None if change is None else (change if rule.metric in LOWER_IS_BETTER else -change)
        prompt = mine.at[cell_id, "target_prompt_tokens"]
        out.append(Comparison(
            metric=rule.metric, cell_id=cell_id,
            concurrency=int(mine.at[cell_id, "concurrency"]) if rule.kind == "decode" else None,
            prompt_tokens=None if pd.isna(prompt) else int(prompt),
            value=None if pd.isna(value) else float(value), baseline=None if pd.isna(base) else float(base),
            change_pct=change, regression_pct=regression, limit_pct=rule.max_regression_pct,
            ok=bool(regression is not None and regression <= rule.max_regression_pct),
        ))
    return out


def describe(rule: ComparisonRule, comparisons: list[Comparison]) -> str:
    """'aggregate decode +4.3% at 1 request, -5.5% at 4 (limit -2%)', averaged over categories."""
    if not comparisons:
        return f"{METRIC_WORDS[rule.metric]}: no matching cells in both runs"
    key = (lambda c: c.concurrency) if rule.kind == "decode" else (lambda c: c.prompt_tokens)
    points: dict[int, list[float]] = {}
    for c in comparisons:
        if c.change_pct is not None:
            points.setdefault(key(c), []).append(c.change_pct)
    parts = []
    for i, (point, changes) in enumerate(sorted(points.items())):
        mean = sum(changes) / len(changes)
        if rule.kind == "decode":
            where = f"at {point} request{'s' if point != 1 else ''}" if i == 0 else f"at {point}"
        else:
            where = f"at {point} tokens"
        parts.append(f"{mean:+.1f}% {where}")
    sign = "+" if rule.metric in LOWER_IS_BETTER else "-"
    missing = "" if points else " (no figures)"
    return f"{METRIC_WORDS[rule.metric]} {', '.join(parts)}{missing} (limit {sign}{rule.max_regression_pct:g}%)"


def judge_run(manifest: Manifest | None, cells: pd.DataFrame | None, baseline_cells: pd.DataFrame | None,
              rules: VerdictRules, *, is_baseline: bool) -> Verdict:
    """One run's verdict from its recorded cells, under `rules`, against the baseline's cells."""
    if manifest is None:
        return Verdict("failed", ["incomplete: the run was never sealed"])
    if manifest.status != "completed":
        failure = manifest.failure or Failure()
        return Verdict("failed", [failure.text])
    if cells is None or cells.empty:
        return Verdict("rejected", ["no cells were recorded"])
    reasons = _run_problems(manifest, cells, rules)
    if is_baseline:
        return Verdict("rejected" if reasons else "accepted", reasons or ["baseline of the study"])
    if baseline_cells is None or baseline_cells.empty:
        return Verdict("rejected", reasons + ["no valid baseline run to compare against"])
    comparisons: list[Comparison] = []
    failing, passing = [], []
    for rule in rules.rules:
        found = compare_rule(cells, baseline_cells, rule)
        comparisons.extend(found)
        text = describe(rule, found)
        (passing if found and all(c.ok for c in found) else failing).append(text)
    if reasons or failing:
        return Verdict("rejected", reasons + failing + [f"within limits: {t}" for t in passing], comparisons)
    return Verdict("accepted", passing or ["valid, and no comparison rules to apply"], comparisons)


def _run_problems(manifest: Manifest, cells: pd.DataFrame, rules: VerdictRules) -> list[str]:
    """What rejects a run whatever its figures: invalid cells, a busy host, failed gates, unreconciled cells."""
    reasons: list[str] = []
    if rules.require_valid:
        for row in cells[~cells["valid"].astype(bool)].itertuples():
            reasons.append(f"{row.cell_id} invalid: {row.invalid_reasons}")
    busy = manifest.environment.finding("W_HOST_BUSY")
    if busy is not None:
        reasons.append(f"measured on a busy host: {busy.message}")
    for gate, score in (manifest.summary.gates if manifest.summary else {}).items():
        if not score.ok:
            reasons.append(f"gate {gate} {score.passed}/{score.cases}: {score.first_failure}")
    if rules.require_reconciled:
        for row in cells[cells["reconciliation"] == "not_available"].itertuples():
            reasons.append(f"{row.cell_id}: counters not available, so not reconciled")
    return reasons


def study_runs(study: Study, journal: Journal) -> list[tuple[StudyEntry, RunRecord | None]]:
    """The newest sealed run of every study candidate under the study's plan (None if never run)."""
    plan_id = study.plan.id
    return [(entry, journal.find(entry.candidate.id, plan_id)) for entry in study.expand()]


@dataclass
class Judged:
    """One study candidate, its run (None if never run) and its verdict (None if not judged)."""

    entry: StudyEntry
    record: RunRecord | None
    verdict: Verdict | None


def judge(study: Study, journal: Journal, *, append: bool = True) -> list[Judged]:
    """Judge the recorded runs under the study's current rules; append an event where it changed."""
    runs = study_runs(study, journal)
    rules = study.verdict
    if not any(entry.name == rules.baseline for entry, _ in runs):
        raise InputError(f"verdict.baseline: no candidate named {rules.baseline!r} in study {study.name} "
                         f"(names: {', '.join(e.name for e, _ in runs)})")
    baseline = next((record for entry, record in runs if entry.name == rules.baseline), None)
    baseline_cells = baseline.table("cells") if baseline is not None and baseline.status == "completed" else None
    baseline_ok = baseline_cells is not None and bool(baseline_cells["valid"].all())
    out = []
    for entry, record in runs:
        if record is None:
            out.append(Judged(entry, None, None))
            continue
        verdict = judge_run(record.manifest, record.table("cells"), baseline_cells if baseline_ok else None, rules,
                            is_baseline=entry.name == rules.baseline)
        event = verdict.to_event(study=study.name, candidate=entry.name, candidate_id=entry.candidate.id,
                                 rules_hash=rules.hash, rules=rules.model_dump(mode="json"),
                                 baseline_run_id=baseline.run_id if baseline else None)
        latest = record.latest_verdict
        unchanged = latest is not None and all(
            latest.get(k) == event[k] for k in ("outcome", "reasons", "rules_hash", "baseline_run_id"))
        if append and not unchanged:
            record.append_verdict(event)
        out.append(Judged(entry, record, verdict))
    return out
