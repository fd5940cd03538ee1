"""The noise floor: the baseline's own between-run spread per judged cell, and the runs its limit needs."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..config.rules import VerdictRules
from ..config.study import Study
from ..estimates import Estimate, detectable_change, runs_needed_for
from ..journal import Journal
from .comparisons import figures
from .evidence import valid_cells


@dataclass
class NoiseFloor:
    """The baseline's own between-run spread in one cell a rule selects, and what the rule's limit needs."""

    metric: str
    cell_id: str
    runs: int
    cv_pct: float | None
    limit_pct: float
    runs_needed: int | None
    #: the smallest change these runs per side would detect (one-sided 5%, 80% power), in percent
    detectable_pct: float | None = None

    @property
    def resolvable(self) -> bool | None:
        if self.cv_pct is None:
            return None
        return self.runs_needed is not None and self.runs >= self.runs_needed


def noise_rows(baseline_runs: list[pd.DataFrame], rules: VerdictRules) -> list[NoiseFloor]:
    """Per rule and selected cell: the baseline's between-run CV, and the runs per side its limit needs."""
    out = []
    for rule in rules.rules:
        for cell_id, values in figures(baseline_runs, rule).items():
            cv = Estimate.of(values).cv_pct
            out.append(NoiseFloor(rule.metric, cell_id, len(values), cv, rule.max_regression_pct,
                                  runs_needed_for(rule.max_regression_pct, cv) if cv is not None else None,
                                  detectable_change(cv, len(values)) if cv is not None else None))
    return out


def noise_floor(study: Study, journal: Journal) -> list[NoiseFloor]:
    """The study's noise floor, from the baseline's recorded runs under the study's plan."""
    baseline = next((e for e in study.expand() if e.name == study.verdict.baseline), None)
    if baseline is None:
        return []
    return noise_rows(valid_cells(journal.find_all(baseline.candidate.id, study.plan.id)), study.verdict)
