"""Scaling as a verdict: N replicas against M, as the multiple of the baseline's figure they hold, with its interval
over runs, judged against `min_efficiency` of the ideal N/M.

The comparison is the verdicts' own (verdicts.comparisons): one model per cell on the log scale, blocks, pooled
noise, one-sided bounds. Only the limit differs: instead of "no worse than -7%", "at least +80%" (0.9 of 2x), so
the same intervals, Holm's control across cells and runs-to-decide apply unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ..config.rules import METRIC_WORDS, ComparisonRule
from ..config.scaling import ScalingRule
from ..estimates import ALPHA
from .comparisons import Comparison, compare_rule


@dataclass
class ScalingComparison(Comparison):
    """One cell of a scaling rule: the change is the multiple over the baseline, the limit the required multiple."""

    replicas: int = 1
    baseline_replicas: int = 1
    min_efficiency: float = 1.0

    @property
    def ideal(self) -> float:
        return self.replicas / self.baseline_replicas

    def multiple(self, pct: float | None) -> float | None:
        return None if pct is None else 1 + pct / 100.0

    @property
    def efficiency(self) -> float | None:
        multiple = self.multiple(self.change_pct)
        return None if multiple is None else multiple / self.ideal

    @property
    def rule_words(self) -> str:
        return f"scaling {self.replicas} vs {self.baseline_replicas} replicas, {METRIC_WORDS[self.metric]}"

    def figure(self) -> str:
        """'x1.93 [1.80, 2.07], efficiency 96% [90, 103]'."""
        multiple = self.multiple(self.change_pct)
        if multiple is None:
            return "no figure on one side"
        bounds = self.shown_bounds
        if bounds is None:
            interval = f" ({self.runs} vs {self.baseline_runs} runs: no interval)"
            efficiency = ""
        else:
            low, high = self.multiple(bounds[0]) or 0.0, self.multiple(bounds[1]) or 0.0
            interval = f" [{low:.2f}, {high:.2f}]"
            efficiency = f" [{100 * low / self.ideal:.0f}, {100 * high / self.ideal:.0f}]"
        return f"x{multiple:.2f}{interval}, efficiency {100 * multiple / self.ideal:.0f}%{efficiency}"

    def limit(self) -> str:
        """'at least 90% of x2, so x1.80'."""
        return f"at least {100 * self.min_efficiency:.0f}% of x{self.ideal:g}, so x{self.min_efficiency * self.ideal:.2f}"

    def text(self) -> str:
        """'scaling 2 vs 1 replicas, capacity under the objectives, per run: x1.93 [1.80, 2.07], efficiency 96%
        [90, 103] (rule: at least 90% of x2, so x1.80)'."""
        return f"{self.name}: {self.figure()} (rule: {self.limit()})"


def as_comparison_rule(rule: ScalingRule, replicas: int, baseline_replicas: int) -> ComparisonRule:
    """The scaling rule as a comparison rule whose limit is the required gain (a negative regression: built
    without validation, which only accepts losses)."""
    required = rule.min_efficiency * replicas / baseline_replicas
    return ComparisonRule.model_construct(metric=rule.metric, max_regression_pct=-100.0 * (required - 1),
                                          concurrency=rule.concurrency, category=rule.category,
                                          prompt_tokens=rule.prompt_tokens)


def scaling_comparisons(runs: list[pd.DataFrame], baseline_runs: list[pd.DataFrame], rules: list[ScalingRule],
                        scale: tuple[int, int] | None, alpha: float = ALPHA,
                        peers: dict[str, list[pd.DataFrame]] | None = None) -> list[ScalingComparison]:
    """Every cell each scaling rule selects, for a candidate of `scale` = (its replicas, the baseline's); none when
    the two have as many replicas (nothing scales)."""
    if scale is None or scale[0] == scale[1]:
        return []
    out = []
    for rule in rules:
        for found in compare_rule(runs, baseline_runs, as_comparison_rule(rule, *scale), alpha, peers):
            # more replicas being faster is the premise, not news: no "better beyond the noise" line
            out.append(ScalingComparison(**{**asdict(found), "better": False}, replicas=scale[0],
                                         baseline_replicas=scale[1], min_efficiency=rule.min_efficiency))
    return out
