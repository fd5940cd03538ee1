"""Steps in a series of runs over time: did the new engine release (or driver, or image) move a figure?

Candidate steps come from PELT (the `ruptures` library's C search under the L2 cost: exact optimal segmentation
under a penalty, linear time, numpy and scipy only; Apache Otava pins numpy and pulls in cloud clients, MongoDB's
signal-processing-algorithms pins numpy below 2) on the log of the figure, with a penalty scaled by the
series' own noise, estimated robustly from differences of neighbouring runs so that a step does not inflate it.
Each candidate step is then confirmed like a verdict: the runs after it against the runs before it (up to the
neighbouring steps) in one pooled model, two-sided, at a level that accounts for having searched every position.
A step that is not confirmed is merged away and the rest are tested again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .model import ALPHA

#: PELT's penalty of one more step, in units of the noise variance times log(n): low, as the test below
#: confirms what the search proposes
PENALTY = 1.0
#: the two-sided level of confirming a step, shared out over every position the search could have put it
#: (Bonferroni): calibrated by benchmarks/change_points.py to about one false step per 300 runs of a flat
#: series at any noise, while a 5% step at 2% noise is found within 5 runs about 98% of the time
STEP_ALPHA = 0.2
MIN_SEGMENT = 2
#: the least noise the penalty assumes (log scale): a series flat to a millionth is exact, not noisy, and
#: the search's running sums round at about 1e-16, so a smaller penalty would split exact segments on rounding
SIGMA_FLOOR = 1e-6


@dataclass(frozen=True)
class Step:
    """A confirmed step: the series moves at `index` (the first run after the step)."""

    index: int
    before: int
    after: int
    change_pct: float
    low_pct: float | None
    high_pct: float | None
    p_value: float

    def text(self) -> str:
        interval = f" [{self.low_pct:+.1f}, {self.high_pct:+.1f}]" if self.low_pct is not None else ""
        return f"{self.change_pct:+.1f}%{interval} ({self.before} runs before, {self.after} after)"


def noise_scale(logs: Sequence[float]) -> float:
    """The run-to-run standard deviation of a log series, from the median absolute first difference: robust to
    a few steps and outliers (a step moves one difference of many)."""
    import numpy as np

    if len(logs) < 3:
        return 0.0
    diffs = np.diff(np.asarray(logs, dtype=float))
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return 1.4826 * mad / math.sqrt(2.0)


def find_steps(values: Sequence[float], *, alpha: float = STEP_ALPHA, min_segment: int = MIN_SEGMENT) -> list[Step]:
    """The confirmed steps of a series of positive figures in time order (empty when it is too short)."""
    import numpy as np
    import ruptures as rpt

    series = [float(v) for v in values]
    if len(series) < 2 * min_segment or min(series) <= 0:
        return []
    logs = np.log(np.asarray(series))
    sigma = noise_scale(logs)
    if sigma <= 0:
        sigma = max(float(np.std(logs)), SIGMA_FLOOR)
    # KernelCPD's linear kernel is PELT under the same L2 cost, in C (ruptures' Pelt evaluated the cost in Python,
    # a tenth of a second a series); centred, its running sums lose less to rounding.
    search = rpt.KernelCPD(kernel="linear", min_size=min_segment, jump=1).fit((logs - logs.mean()).reshape(-1, 1))
    edges: list[int] = []
    for _ in range(2):  # the second pass takes the noise from the residuals of the first one's segments
        penalty = PENALTY * sigma * sigma * math.log(len(series))
        edges = [int(b) for b in search.predict(pen=penalty) if 0 < b < len(series)]
        residuals = np.concatenate([part - part.mean() for part in np.split(logs, edges)])
        if len(series) - len(edges) - 1 > 0:
            sigma = max(float(np.sqrt((residuals ** 2).sum() / (len(series) - len(edges) - 1))), SIGMA_FLOOR)
    # Searching every position for the best split inflates a plain test's error by about the number of
    # positions a step could take; Bonferroni over them is conservative but keeps a flat series quiet.
    level = alpha / max(len(series) - 2 * min_segment + 1, 1)
    while True:
        steps = [_test(series, edges, i) for i in range(len(edges))]
        weakest = max(range(len(steps)), key=lambda i: steps[i][1], default=None)
        if weakest is None or steps[weakest][1] <= level:
            return [step for step, _ in steps]
        edges.pop(weakest)


def _test(series: list[float], edges: list[int], i: int) -> tuple[Step, float]:
    """Edge i tested between its neighbouring edges: the runs after against the runs before on the log scale,
    one pooled variance (the study model with two groups and no blocks), the interval at the verdicts' 90%."""
    import numpy as np
    from scipy import stats

    start = edges[i - 1] if i > 0 else 0
    end = edges[i + 1] if i + 1 < len(edges) else len(series)
    at = edges[i]
    before, after = np.log(series[start:at]), np.log(series[at:end])
    shift = float(after.mean() - before.mean())
    result = stats.ttest_ind(after, before, equal_var=True)
    p = float(result.pvalue) if result.pvalue == result.pvalue else (0.0 if shift else 1.0)
    low, high = result.confidence_interval(1 - 2 * ALPHA)
    bounds = (100 * (math.exp(low) - 1), 100 * (math.exp(high) - 1)) if low == low else (None, None)
    return Step(at, len(before), len(after), 100 * (math.exp(shift) - 1), bounds[0], bounds[1], p), p
