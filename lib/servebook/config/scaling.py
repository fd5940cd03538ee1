"""Scaling rules: how much of N times one replica's figure N replicas must hold (issue 32's "two replicas hold at
least 1.8 times one" is `min_efficiency: 0.9` between a 2-replica candidate and a 1-replica baseline)."""

from __future__ import annotations

from pydantic import Field, model_validator

from .metrics import METRICS, Metric, selector_problem
from .strict import StrictModel


class ScalingRule(StrictModel):
    """A candidate with N replicas against a baseline with M: its figure over the baseline's must reach
    `min_efficiency` times N / M, judged over runs like any rule (one-sided bounds, Holm across cells)."""


    metric: Metric = Field(..., description="a figure replicas multiply (config.metrics: scales)")
    min_efficiency: float = Field(..., gt=0, le=1.5, description="the share of the ideal N/M multiple to hold")
    concurrency: list[int] | None = None
    category: str | None = None
    prompt_tokens: list[int] | None = None

    @model_validator(mode="after")
    def _a_figure_replicas_multiply(self) -> "ScalingRule":
        if not METRICS[self.metric].scales:
            # a per-request rate or a latency is what one replica gives each request, however many there are
            scaling = ", ".join(name for name, m in METRICS.items() if m.scales)
            raise ValueError(f"{self.metric}: replicas do not multiply it; a scaling rule judges one of {scaling}")
        problem = selector_problem(self.metric, self.concurrency, self.category, self.prompt_tokens)
        if problem:
            raise ValueError(problem)
        return self
