"""Verdicts: accepted / rejected / failed, with reasons a reader can check against the numbers.

A verdict is computed from recorded cells only, so it can be recomputed under changed rules at
any time; each computation is appended to the run as a new event, never overwriting the last.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

Metric = Literal["aggregate_tok_s", "per_request_tok_s", "ttft_s", "prefill_tok_s"]
LOWER_IS_BETTER = {"ttft_s"}
METRIC_WORDS = {
    "aggregate_tok_s": "aggregate decode",
    "per_request_tok_s": "per-request decode",
    "ttft_s": "TTFT",
    "prefill_tok_s": "cold prefill",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ComparisonRule(_Strict):
    """`metric` at the selected cells must not regress more than `max_regression_pct` vs the baseline.

    A regression is a drop for rates and a rise for TTFT.
    """

    metric: Metric
    max_regression_pct: float = Field(..., ge=0)
    concurrency: list[int] | None = None
    category: str | None = None
    prompt_tokens: list[int] | None = None

    @model_validator(mode="after")
    def _selectors_fit_metric(self) -> "ComparisonRule":
        if self.metric == "prefill_tok_s" and (self.concurrency or self.category):
            raise ValueError("prefill_tok_s rules select cells by prompt_tokens, not concurrency/category")
        if self.metric != "prefill_tok_s" and self.prompt_tokens:
            raise ValueError(f"{self.metric} rules select cells by concurrency/category, not prompt_tokens")
        return self

    @property
    def kind(self) -> str:
        return "prefill" if self.metric == "prefill_tok_s" else "decode"


class VerdictRules(_Strict):
    baseline: str = Field("baseline", description="name of the study candidate others are compared with")
    require_valid: bool = Field(True, description="every cell valid: right lengths, no errors, cold prefill")
    require_reconciled: bool = Field(True, description="every cell's counters reconciled with the client")
    rules: list[ComparisonRule] = Field(default_factory=list)

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]


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
            ok=regression is not None and regression <= rule.max_regression_pct,
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


def judge(manifest: dict | None, cells: pd.DataFrame | None, baseline_cells: pd.DataFrame | None,
          rules: VerdictRules, *, is_baseline: bool) -> Verdict:
    if manifest is None:
        return Verdict("failed", ["incomplete: the run was never sealed"])
    if manifest.get("status") != "completed":
        failure = manifest.get("failure") or {}
        return Verdict("failed", [f"{failure.get('cause', 'unknown')}: {failure.get('message', 'no cause recorded')}"])
    if cells is None or cells.empty:
        return Verdict("rejected", ["no cells were recorded"])

    reasons: list[str] = []
    if rules.require_valid:
        for row in cells[~cells["valid"].astype(bool)].itertuples():
            reasons.append(f"{row.cell_id} invalid: {row.invalid_reasons}")
    for finding in (manifest.get("environment") or {}).get("preflight") or []:
        if finding.get("code") == "W_HOST_BUSY":
            reasons.append(f"measured on a busy host: {finding['message']}")
    for gate, score in ((manifest.get("summary") or {}).get("gates") or {}).items():
        if score["passed"] < score["cases"]:
            reasons.append(f"gate {gate} {score['passed']}/{score['cases']}: {score['first_failure']}")
    if rules.require_reconciled:
        for row in cells[cells["reconciliation"] != "ok"].itertuples():
            if row.reconciliation == "not_available":
                reasons.append(f"{row.cell_id}: counters not available, so not reconciled")
    rejected = bool(reasons)

    comparisons: list[Comparison] = []
    if is_baseline:
        summary = "baseline of the study"
        return Verdict("rejected" if rejected else "accepted", reasons or [summary])
    if baseline_cells is None or baseline_cells.empty:
        return Verdict("rejected", reasons + ["no valid baseline run to compare against"])
    texts = []
    for rule in rules.rules:
        found = compare_rule(cells, baseline_cells, rule)
        comparisons.extend(found)
        text = describe(rule, found)
        if not found or not all(c.ok for c in found):
            rejected = True
            reasons.append(text)
        else:
            texts.append(text)
    if rejected:
        reasons += [f"within limits: {t}" for t in texts]
    else:
        reasons = texts or ["valid, and no comparison rules to apply"]
    return Verdict("rejected" if rejected else "accepted", reasons, comparisons)
