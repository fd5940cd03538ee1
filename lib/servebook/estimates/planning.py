"""Planning runs from a measured spread: the runs a limit needs, the change the runs spent can detect, and how
to spend machine time between launches and measurement within a launch."""

from __future__ import annotations

import math
from dataclasses import dataclass


def runs_needed_for(limit_pct: float, cv_pct: float, alpha: float = 0.05) -> int | None:
    """Runs per side at which an unchanged candidate's one-sided bound would fall inside `limit_pct`, given a
    between-run spread of `cv_pct` (two groups' degrees of freedom; a study's pooled noise needs fewer): below
    that, the rule's limit is finer than the noise can resolve."""
    from scipy import stats

    if cv_pct <= 0:
        return 2
    sd = math.log(1 + cv_pct / 100.0)
    gap = abs(math.log(1 - limit_pct / 100.0)) if limit_pct < 100 else math.inf
    for n in range(2, 201):
        if stats.t.ppf(1 - alpha, 2 * n - 2) * sd * math.sqrt(2 / n) < gap:
            return n
    return None


def detectable_change(cv_pct: float, runs: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest change `runs` per side detect with `power` at one-sided `alpha`, given a between-run spread
    of `cv_pct`: what a reader should not expect these runs to resolve (the minimum detectable effect)."""
    from scipy import stats

    if runs < 2 or cv_pct is None:
        return None
    sd = math.log(1 + cv_pct / 100.0)
    df = 2 * runs - 2
    shift = (stats.t.ppf(1 - alpha, df) + stats.t.ppf(power, df)) * sd * math.sqrt(2 / runs)
    return 100.0 * (1 - math.exp(-shift))


@dataclass(frozen=True)
class Allocation:
    """Where a cell's noise lies and what to spend on it (Kalibera and Jones, "Rigorous benchmarking in
    reasonable time", two levels: launches, and measurement time within a launch)."""

    #: the between-launch part of the run-to-run spread, in percent (what no longer cell can average away)
    launch_pct: float
    #: the cell length, as a multiple of today's, that buys the most precision per second of machine time
    cell_scale: float
    #: runs per side the limit needs with cells of that length
    runs_needed: int | None

    def describe(self) -> str:
        runs = "more than 200" if self.runs_needed is None else str(self.runs_needed)
        return f"cells x{self.cell_scale:g}, then {runs} runs"


def allocate(cv_pct: float, within_pct: float, limit_pct: float, launch_s: float, cell_s: float) -> Allocation:
    """Split the between-run spread `cv_pct` into the part a run's own requests explain (`within_pct`, the standard
    error of a run's figure at today's cell length) and the launch-to-launch rest; then the cell length that
    minimises the variance of a run's figure per second spent, given what a launch costs (`launch_s`, the
    whole run) and what this cell costs (`cell_s`): scale = sqrt(launch_s * within^2 / (cell_s * launch^2)),
    between 0.5 and 8 times today's."""
    total2, within2 = (cv_pct / 100) ** 2, (within_pct / 100) ** 2
    launch2 = max(total2 - within2, 0.0)
    if launch2 <= 0:
        scale = 8.0
    else:
        scale = min(8.0, max(0.5, math.sqrt(launch_s * within2 / (max(cell_s, 1e-9) * launch2))))
    scale = round(scale * 2) / 2  # half steps: a plan's cell length is not set finer than that
    per_run = math.sqrt(launch2 + within2 / scale)
    return Allocation(100 * math.sqrt(launch2), scale, runs_needed_for(limit_pct, 100 * per_run))
