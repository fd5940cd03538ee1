"""Whether a percentile has enough samples behind it to mean what it says: the one judgement of tail sufficiency.

A p99 read from 40 requests is, whatever the interpolation, one of the two largest of them: one stall decides it.
Every percentile servebook publishes carries the number of samples behind it (`{figure}_n` columns of
cells.parquet), and one read from fewer than `samples_needed` is marked insufficient wherever it is shown; a verdict
never rests on one (verdicts.comparisons: decision `insufficient`). docs/metrics.md states the rule.

The rule (distribution-free, from the order statistics). Let q be the true p-quantile of a continuous distribution.
Each of n independent samples lies above q with probability 1 - p, so the number above it is A ~ Binomial(n, 1 - p),
and the k-th smallest sample X(k) is an upper bound of q exactly when A >= n - k + 1:

    P(X(k) >= q) = P(A >= n - k + 1).

The largest sample (k = n) bounds q with confidence 1 - p^n; for p = 0.99 at 99% that takes
n >= ln(0.01) / ln(0.99) = 458.2, so 459 samples. A bound that is the maximum is one sample, though: one outlier
both makes it and is all there is above it. servebook asks that the bound's upper index be at most n - 1 (the
second-largest sample), so that at least two samples lie at or above the true quantile with the confidence asked:

    P(A >= 2) = 1 - p^n - n (1 - p) p^(n - 1) >= c.

The smallest such n, at c = 99%:

    p50: 11 (at 10: 1 - 11 / 1024 = 0.9893)            p90: 64
    p95: 130                                           p99: 662
    p99 at 661: 1 - 0.99^661 - 661 * 0.01 * 0.99^660 = 0.989999 < 0.99; at 662: 0.990086 >= 0.99

662 is the figure of the MLCommons Endpoints rules (v1.0 draft, 2026-09) for a p99 at 99% confidence, which they
report "insufficient" below: this formulation reproduces it exactly. The looser one-sided bound at the maximum
(459 for a p99) and the two-sided interval with the maximum as its upper end (0.99^n <= 0.005: 528) do not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the confidence every published percentile is held to (MLCommons asks 99% of a p99)
CONFIDENCE = 0.99
#: the latency figures of measure.figures.latency whose percentiles count their samples in `{name}_n`
_LATENCY = re.compile(r"^(ttft|tpot|itl|e2e)_p(\d+)_ms$")
#: seconds-valued percentile columns of the kinds, each with the column that counts its samples
_SECONDS = re.compile(r"^(itl|probe_itl|probe_ttft)_p(\d+)_s$")
#: percentiles with a name of their own: (quantile, the column counting their samples)
_NAMED = {"ttft_s": (0.5, "ttft_n"), "ttft_p90_s": (0.9, "ttft_n"), "replay_ttft_p90_s": (0.9, "replay_ttft_n")}


@functools.cache
def samples_needed(p: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples for which the second-largest is a one-sided `confidence` upper bound of the p-quantile
    (the module's doc derives it): 662 for a p99 at 99%, 64 for a p90, 11 for a median."""
    if not 0 < p < 1 or not 0 < confidence < 1:
        raise ValueError(f"a quantile and a confidence between 0 and 1, not {p} and {confidence}")
    n = 2
    while p ** n + n * (1 - p) * p ** (n - 1) > 1 - confidence:
        n += 1
    return n


def sufficient(p: float, n: int, confidence: float = CONFIDENCE) -> bool:
    """Whether `n` samples are enough for a p-quantile at `confidence`: the judgement every output reads."""
    return n >= samples_needed(p, confidence)


def percentile_of(column: str) -> tuple[float, str] | None:
    """(quantile, the column counting its samples) of a percentile column of cells.parquet; None for a column that
    is no percentile or whose samples are not counted (a mean, a rate, a median over sessions or conversations)."""
    if column in _NAMED:
        return _NAMED[column]
    found = _LATENCY.match(column) or _SECONDS.match(column)
    if found is None or not 0 < int(found.group(2)) < 100:
        return None
    return int(found.group(2)) / 100, f"{found.group(1)}_n"


@dataclass(frozen=True)
class Tail:
    """A percentile of a cell with the samples behind it, and the samples its confidence needs."""

    p: float
    n: int
    needed: int

    @property
    def insufficient(self) -> bool:
        return self.n < self.needed

    def words(self) -> str:
        """'insufficient (n=40)': how a table says it beside the figure."""
        return f"insufficient (n={self.n})"

    def reason(self) -> str:
        """'40 samples, fewer than the 662 a p99 needs at 99% confidence'."""
        return (f"{self.n} sample{'s' if self.n != 1 else ''}, fewer than the {self.needed} a p{100 * self.p:g} needs "
                f"at {100 * CONFIDENCE:g}% confidence")


def tail_of(row: Mapping[Any, Any], column: str) -> Tail | None:
    """The tail a cell's figure in `column` rests on; None where the column is no counted percentile, the cell has
    no figure there, or its count was not recorded (a run sealed before counts, whose requests were not read)."""
    found = percentile_of(column)
    if found is None:
        return None
    value, count = row.get(column), row.get(found[1])
    if value is None or value != value or count is None or count != count:
        return None
    return Tail(found[0], int(count), samples_needed(found[0]))


def insufficient_tail(row: Mapping[Any, Any], column: str) -> Tail | None:
    """The tail behind a cell's figure where it is insufficient, else None."""
    tail = tail_of(row, column)
    return tail if tail is not None and tail.insufficient else None
