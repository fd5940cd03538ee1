"""Estimates over runs: runs are the unit of evidence, requests nest inside them.

- `runs`: a candidate's estimate of a cell over its runs, and the two-sample comparison (Welch, log scale) that
  servebook used before the study model, kept for one-off comparisons and as the benchmark's reference;
- `model`: one model per cell over the whole study, the decisions and the sequential levels;
- `planning`: runs needed, detectable change, and the spend of machine time (Kalibera and Jones).
"""

from .model import ALPHA, Block, Contrast, fit_contrasts, holm, spent_alpha
from .planning import Allocation, allocate, detectable_change, runs_needed_for
from .runs import (
    CONFIDENCE,
    MIN_INTERVAL_RUNS,
    Change,
    Decision,
    Estimate,
    Spread,
    change,
    decide,
    regression_bounds,
    repeats_to_decide,
)

__all__ = ["ALPHA", "CONFIDENCE", "MIN_INTERVAL_RUNS", "Allocation", "Block", "Change", "Contrast", "Decision",
           "Estimate", "Spread", "allocate",
           "change", "decide", "detectable_change", "fit_contrasts", "holm", "regression_bounds", "repeats_to_decide",
           "runs_needed_for", "spent_alpha"]
