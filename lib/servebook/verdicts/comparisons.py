"""One rule's cells compared over runs: both sides' means, the change and its interval."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..config.rules import LOWER_IS_BETTER, METRIC_WORDS, ComparisonRule
from ..estimates import CONFIDENCE, Change, Decision, Estimate, change, decide, repeats_to_decide


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


def select_cells(cells: pd.DataFrame, rule: ComparisonRule) -> pd.DataFrame:
    chosen = cells[cells["kind"] == rule.kind]
    if rule.concurrency:
        chosen = chosen[chosen["concurrency"].isin(rule.concurrency)]
    if rule.category:
        chosen = chosen[chosen["category"] == rule.category]
    if rule.prompt_tokens:
        chosen = chosen[chosen["target_prompt_tokens"].isin(rule.prompt_tokens)]
    return chosen


def figures(runs: list[pd.DataFrame], rule: ComparisonRule) -> dict[str, list[float]]:
    """cell id -> the rule's figure in each run that has it."""
    out: dict[str, list[float]] = {}
    for cells in runs:
        for row in select_cells(cells, rule).to_dict("records"):
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
    mine, theirs = figures(runs, rule), figures(baseline_runs, rule)
    described = {row["cell_id"]: row for cells in runs for row in select_cells(cells, rule).to_dict("records")}
    lower = rule.metric in LOWER_IS_BETTER
    out = []
    for cell_id, values in mine.items():
        if cell_id not in theirs:
            continue
        row = described[cell_id]
        found: Change | None = change(values, theirs[cell_id], confidence)
        decision = decide(found, rule.max_regression_pct, lower)
        regression = None if found is None else (found.pct if lower else -found.pct)
        ok = decision == "pass" or (decision == "single" and regression is not None
                                    and regression <= rule.max_regression_pct)
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
            if decision == "straddle" and found is not None else None,
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
