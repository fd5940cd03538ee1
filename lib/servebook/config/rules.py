"""Verdict rules: which cells of a candidate are compared with the baseline, and how far they may regress."""

from __future__ import annotations

import hashlib

from pydantic import Field, model_validator

from .metrics import LOWER_IS_BETTER, METRIC_WORDS, METRICS, Metric, selector_problem
from .scaling import ScalingRule
from .strict import StrictModel

__all__ = ["LOWER_IS_BETTER", "METRIC_WORDS", "ComparisonRule", "Metric", "RecordedBaseline", "VerdictRules"]


class ComparisonRule(StrictModel):
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
        problem = selector_problem(self.metric, self.concurrency, self.category, self.prompt_tokens)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def kind(self) -> str:
        """The cell kind whose cells the rule compares (config.metrics)."""
        return METRICS[self.metric].kind


class RecordedBaseline(StrictModel):
    """A baseline taken from the journal instead of being run again: the runs a verdict accepted of `candidate`
    under the study's plan, on the machine the study's candidates ran on, at most `max_age_days` old."""

    candidate: str = Field(..., description="the recorded candidate's name (label) or a prefix of its id")
    engine_version: str | None = Field(None, description="only runs on this engine version (as the run recorded it)")
    study: str | None = Field(None, description="only runs recorded by this study")
    accepted_only: bool = Field(True, description="only runs that a verdict accepted (a baseline of its study "
                                                  "counts as accepted)")
    max_age_days: float = Field(30, gt=0, description="refuse a baseline whose newest run is older than this")
    max_runs: int | None = Field(None, ge=2, description="the newest N runs at most")


class VerdictRules(StrictModel):
    baseline: str = Field("baseline", description="name of the study candidate others are compared with")
    baseline_from: RecordedBaseline | None = Field(
        None, description="compare every candidate of the study with recorded runs instead of a study candidate")
    require_valid: bool = Field(True, description="every cell valid: right lengths, no errors, cold prefill")
    require_reconciled: bool = Field(True, description="every cell's counters reconciled with the client")
    rules: list[ComparisonRule] = Field(default_factory=list)
    guards: list[ComparisonRule] = Field(
        default_factory=list, description="figures a candidate must not worsen beyond their limits, judged like rules "
                                          "but only able to reject or leave a verdict undecided: a guard that holds "
                                          "accepts nothing, and its gains are no gains (reported as guard)")
    #: candidates with more (or fewer) replicas than the baseline: the multiple they must hold (config.scaling)
    scaling: list[ScalingRule] = Field(default_factory=list)
    max_runs: int | None = Field(
        None, ge=2, description="planned most runs per candidate when runs are added until decided (sweep "
                                "--until-decided): each verdict then spends a share of its error at every look")

    @model_validator(mode="after")
    def _one_baseline(self) -> "VerdictRules":
        # (the default name stays allowed, so rules dumped with every field read back)
        if self.baseline_from is not None and self.baseline != "baseline":
            raise ValueError("verdict: give baseline (a study candidate) or baseline_from (recorded runs), not both")
        return self

    @property
    def baseline_entry(self) -> str | None:
        """The study candidate others are compared with; None when the baseline comes from recorded runs."""
        return None if self.baseline_from is not None else self.baseline

    @property
    def hash(self) -> str:
        # Unset new fields stay out, so verdicts recorded before they existed keep their rules hash.
        unset = {name for name in ("max_runs", "baseline_from") if getattr(self, name) is None}
        unset |= set() if self.scaling else {"scaling"}
        unset |= set() if self.guards else {"guards"}
        return hashlib.sha256(self.model_dump_json(exclude=unset).encode()).hexdigest()[:12]
