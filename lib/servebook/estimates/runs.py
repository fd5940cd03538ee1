"""Estimates over runs: runs are the unit of evidence, requests nest inside them.

Each run contributes one figure per cell (its cell summary); a candidate's estimate of a cell is
the mean over its runs with a t interval, and a comparison with the baseline is the ratio of the
two means with a Welch interval on the log scale (rates and times are positive and their effects
multiplicative, so a change of -10% and one of +11% are the same distance from no change).
With one run on a side there is no between-run variance and so no interval: the comparison says so. What tables
and charts show of one candidate's runs is a `Spread`: the geometric mean with an interval on the log scale, or the
range of fewer than three runs.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Literal, Sequence

CONFIDENCE = 0.95
#: host: within the limit on one machine's runs and beyond it on another's (verdicts.machines); insufficient: the
#: figure is a percentile read from too few samples in some run (measure.figures.tails), which no verdict rests on
Decision = Literal["pass", "fail", "straddle", "single", "missing", "host", "insufficient"]


@functools.lru_cache(maxsize=None)
def _t_interval(confidence: float, df: int) -> tuple[float, float]:
    """The standard t interval's ends: scipy takes a fifth of a millisecond for one, and a site draws an interval
    for every point of every run's charts."""
    from scipy import stats

    low, high = stats.t.interval(confidence, df)
    return float(low), float(high)


@dataclass(frozen=True)
class Estimate:
    """The mean of a cell's figure over n runs, with its confidence interval (None below 2 runs)."""

    mean: float
    low: float | None
    high: float | None
    n: int
    cv_pct: float | None  # between-run coefficient of variation: the noise of this cell

    @classmethod
    def of(cls, values: Sequence[float], confidence: float = CONFIDENCE) -> "Estimate":
        values = [float(v) for v in values]
        n = len(values)
        mean = sum(values) / n
        if n < 2:
            return cls(mean, None, None, n, None)
        sd = statistics.stdev(values)
        if sd > 0:
            # scipy's own arithmetic (quantile * scale + loc), with the quantiles looked up once per size
            q_low, q_high = _t_interval(confidence, n - 1)
            scale = sd / math.sqrt(n)
            low, high = q_low * scale + mean, q_high * scale + mean
        else:
            low, high = mean, mean
        return cls(mean, low, high, n, 100.0 * sd / mean if mean else None)


#: the fewest runs a t interval is drawn from: two runs give a t interval with one degree of freedom, which spans
#: twelve standard deviations either side (baseline decode 211.5 [-524.3, 947.3] tok/s), so they show their range
MIN_INTERVAL_RUNS = 3


@dataclass(frozen=True)
class Spread:
    """A figure over runs as every table, chart and verdict shows it, so that none contradicts another.

    Rates and times cannot be negative and their effects multiply: where every run's figure is positive the centre is
    the geometric mean and the interval a t interval of the logs, back-transformed, so it never crosses zero (the
    verdict's model works on the same log scale). Fewer than `MIN_INTERVAL_RUNS` runs show their range (lowest to
    highest), labelled so; a figure some run has at zero has no log and shows its range too; one that can be
    negative (some run below zero) keeps the plain mean with its t interval. One run is just its figure."""

    center: float
    low: float | None
    high: float | None
    n: int
    #: "interval": a 95% t interval (of the logs where `geometric`); "range": the runs' lowest and highest; "single"
    kind: Literal["interval", "range", "single"]
    geometric: bool

    @classmethod
    def of(cls, values: Sequence[float], confidence: float = CONFIDENCE) -> "Spread":
        values = [float(v) for v in values]
        n = len(values)
        if not n:
            raise ValueError("a spread of no runs")
        positive = min(values) > 0
        center = math.exp(sum(math.log(v) for v in values) / n) if positive else sum(values) / n
        if n == 1:
            return cls(center, None, None, 1, "single", positive)
        if n < MIN_INTERVAL_RUNS or min(values) == 0:
            return cls(center, min(values), max(values), n, "range", positive)
        if not positive:
            e = Estimate.of(values, confidence)
            return cls(e.mean, e.low, e.high, n, "interval", False)
        logs = Estimate.of([math.log(v) for v in values], confidence)
        assert logs.low is not None and logs.high is not None  # n >= 2
        return cls(center, math.exp(logs.low), math.exp(logs.high), n, "interval", True)

    def text(self, spec: str) -> str:
        """'208.3 [150.2, 288.9]' (an interval), '208.3 range [150.0, 289.0]', or the one run's figure."""
        if self.low is None or self.high is None:
            return f"{self.center:{spec}}"
        return f"{self.center:{spec}}{' range' if self.kind == 'range' else ''} [{self.low:{spec}}, {self.high:{spec}}]"


@dataclass(frozen=True)
class Change:
    """Candidate vs baseline on one cell: the change of the mean in percent, with its interval."""

    pct: float
    low: float | None
    high: float | None
    n_candidate: int
    n_baseline: int
    log_sd: float | None  # pooled between-run spread on the log scale, for the repeats a decision needs

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def text(self) -> str:
        if not self.has_interval:
            return f"{self.pct:+.1f}% ({self.n_candidate} vs {self.n_baseline} runs: no interval)"
        return f"{self.pct:+.1f}% [{self.low:+.1f}, {self.high:+.1f}]"


def change(candidate: Sequence[float], baseline: Sequence[float], confidence: float = CONFIDENCE) -> Change | None:
    """The change of `candidate` against `baseline` from their own runs alone (the pairwise Welch comparison servebook
    used before the study model; benchmarks compare the two); None when either side has none
    or a figure is not positive (a rate or a time of zero has no ratio)."""
    from scipy import stats

    mine = [float(v) for v in candidate if v is not None and v == v]
    theirs = [float(v) for v in baseline if v is not None and v == v]
    if not mine or not theirs or min(mine + theirs) <= 0:
        return None
    log_mine, log_theirs = [math.log(v) for v in mine], [math.log(v) for v in theirs]
    difference = sum(log_mine) / len(mine) - sum(log_theirs) / len(theirs)
    pct = 100.0 * (math.exp(difference) - 1.0)
    if len(mine) < 2 or len(theirs) < 2:
        return Change(pct, None, None, len(mine), len(theirs), None)
    pooled = math.sqrt((statistics.variance(log_mine) + statistics.variance(log_theirs)) / 2)
    if pooled < 1e-12:
        return Change(pct, pct, pct, len(mine), len(theirs), 0.0)
    result = stats.ttest_ind(log_mine, log_theirs, equal_var=False)
    low, high = result.confidence_interval(confidence)
    return Change(pct, 100.0 * (math.exp(low) - 1.0), 100.0 * (math.exp(high) - 1.0), len(mine), len(theirs),
                  pooled)


def regression_bounds(c: Change, lower_is_better: bool) -> tuple[float, float, float]:
    """(estimate, lowest, highest) regression in percent: a drop for rates, a rise for times."""
    low = c.pct if c.low is None or c.high is None else c.low
    high = c.pct if c.low is None or c.high is None else c.high
    if lower_is_better:
        return c.pct, low, high
    return -c.pct, -high, -low


def decide(c: Change | None, limit_pct: float, lower_is_better: bool) -> Decision:
    """pass: the whole interval is within the limit; fail: all of it beyond; straddle: noise could flip it;
    single: one run on a side, so only the point estimate is known; missing: no figure to compare."""
    if c is None:
        return "missing"
    estimate, lowest, highest = regression_bounds(c, lower_is_better)
    if not c.has_interval:
        return "single"
    if highest <= limit_pct:
        return "pass"
    if lowest > limit_pct:
        return "fail"
    return "straddle"


def repeats_to_decide(c: Change, limit_pct: float, lower_is_better: bool, confidence: float = CONFIDENCE) -> int | None:
    """Runs per side that would likely put the interval on one side of the limit, if the observed spread
    holds; None when it cannot be said (no spread known, or the estimate sits on the limit)."""
    from scipy import stats

    if c.log_sd is None or c.log_sd == 0:
        return None
    estimate = regression_bounds(c, lower_is_better)[0]
    # Distance from the estimate to the limit, on the same log scale as the interval.
    gap = abs(math.log(1 + estimate / 100.0) - math.log(1 + limit_pct / 100.0)) if estimate > -100 else None
    if not gap:
        return None
    for n in range(max(c.n_candidate, c.n_baseline) + 1, 201):
        half_width = stats.t.ppf(0.5 + confidence / 2, 2 * n - 2) * c.log_sd * math.sqrt(2 / n)
        if half_width < gap:
            return n
    return None
