"""One rule's cells compared over runs: both sides' means, the change from the study's model of the cell, and
its one-sided bounds."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from ..config.metrics import LOWER_IS_BETTER, METRIC_WORDS, METRICS
from ..config.rules import ComparisonRule
from ..estimates import ALPHA, Block, Contrast, Decision, Spread, fit_contrasts, holm
from ..measure.figures.tails import Tail, insufficient_tail
from ..util.frames import frame_records
from .machines import MachineChange, cpu_probes, host_dependent, machine_changes

#: the decisions that leave a cell undecided (never accepted, never rejected on it), in every output alike
UNDECIDED: tuple[Decision, ...] = ("straddle", "single", "missing", "host", "insufficient")
#: written into events and JSON only where set, so that verdicts without an insufficient tail read as before
_TAIL_FIELDS = ("tail_samples", "tail_needed", "tail_p")


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
    #: the interval shown is the two one-sided bounds at alpha each: a (1 - 2 alpha) two-sided interval
    confidence_pct: float = 100 * (1 - 2 * ALPHA)
    #: one-sided p-values: that the candidate is within the limit (non-inferiority), and beyond it
    p_within: float | None = None
    p_beyond: float | None = None
    #: an improvement beyond the noise (the bound on the good side of no change)
    better: bool = False
    #: how the variance behind the interval was estimated
    method: str = ""
    #: the change's standard error on the log scale and its degrees of freedom (what settle() needs for Holm's level)
    log_se: float | None = None
    df: int | None = None
    #: set by settle(): how many cells were tested together (Holm's family), the one-sided level of the bound that
    #: rejects (the one toward no change; it tests "beyond the limit"), and the interval at the levels the verdict
    #: used. The bound that accepts stays at one-sided alpha: acceptance is an intersection-union test, no penalty.
    holm_cells: int | None = None
    holm_level: float | None = None
    decision_low_pct: float | None = None
    decision_high_pct: float | None = None
    #: the change on each machine alone, where the runs come from two or more (verdicts.machines)
    machines: list[MachineChange] = field(default_factory=list)
    #: decision `insufficient`: the fewest samples behind the percentile in a run of either side, the samples its
    #: confidence needs, and the quantile (measure.figures.tails)
    tail_samples: int | None = None
    tail_needed: int | None = None
    tail_p: float | None = None
    #: judged by a guard (config.rules.VerdictRules.guards): it may reject or leave undecided, never gain
    guard: bool = False

    def __post_init__(self) -> None:
        # read back from a verdict event (or copied with asdict), each machine is a dict
        self.machines = [m if isinstance(m, MachineChange) else MachineChange(**m) for m in self.machines]

    @property
    def lower_is_better(self) -> bool:
        return self.metric in LOWER_IS_BETTER

    @property
    def where(self) -> str:
        where = METRICS[self.metric].where
        if where is not None:
            return where
        if self.prompt_tokens is not None and self.concurrency is None:
            return f"at {self.prompt_tokens} tokens"
        n = self.concurrency
        return f"{self.category} at {n} request{'s' if n != 1 else ''}"

    @property
    def shown_bounds(self) -> tuple[float, float] | None:
        """The interval at the levels the verdict used (after settle()), else the cell's own one-sided bounds."""
        if self.decision_low_pct is not None and self.decision_high_pct is not None:
            return self.decision_low_pct, self.decision_high_pct
        if self.change_low_pct is not None and self.change_high_pct is not None:
            return self.change_low_pct, self.change_high_pct
        return None

    @property
    def beyond_alone(self) -> bool:
        """Whether this cell's own bound (untested against the others) lies beyond the limit."""
        if self.change_low_pct is None or self.change_high_pct is None:
            return False
        return self.change_low_pct > self.limit_pct if self.lower_is_better else self.change_high_pct < -self.limit_pct

    @property
    def rule_words(self) -> str:
        """'aggregate decode' ('guard ITL p99' for a guard's): the rule the cell was judged by."""
        return f"{'guard ' if self.guard else ''}{METRIC_WORDS[self.metric]}"

    @property
    def name(self) -> str:
        """'aggregate decode, prose at 4 requests': the cell as every output names it."""
        return f"{self.rule_words}, {self.where}"

    def figure(self) -> str:
        """'-34.0% [-41.2, -27.1]': the change with the interval at the levels the verdict used (the study's method
        says which, once)."""
        bounds = self.shown_bounds
        if self.decision == "host":
            return "depends on the machine: " + "; ".join(m.text() for m in self.machines)
        if self.change_pct is None:
            return "no figure on one side"
        interval = (f" [{bounds[0]:+.1f}, {bounds[1]:+.1f}]" if bounds is not None
                    else f" ({self.runs} vs {self.baseline_runs} runs: no interval)")
        return f"{self.change_pct:+.1f}%{interval}"

    def limit(self) -> str:
        """The rule's limit in the direction a regression goes: '-7%' for a rate, '+10%' for a time."""
        return f"{'+' if self.metric in LOWER_IS_BETTER else '-'}{self.limit_pct:g}%"

    def text(self) -> str:
        """'aggregate decode, prose at 4 requests: -34.0% [-41.2, -27.1] (limit -7%)'. How the cells tested together
        set the interval's levels (Holm) is the verdict's method, said once beside it, not with every cell."""
        better = ", better" if self.better and self.change_pct is not None and self.decision != "host" else ""
        text = f"{self.name}: {self.figure()}{better} (limit {self.limit()}{self._rule()})"
        tail = self.tail
        return text if tail is None else f"{text}; insufficient tail: {self.cell_id} rests on {tail.reason()}"

    @property
    def tail(self) -> Tail | None:
        """The insufficient tail that left this cell undecided, None where there is none."""
        if self.decision != "insufficient" or self.tail_samples is None or self.tail_needed is None:
            return None
        return Tail(self.tail_p or 0.0, self.tail_samples, self.tail_needed)

    def to_dict(self) -> dict[str, Any]:
        """As events and JSON hold it: every field, the tail's only where a tail was insufficient."""
        data = asdict(self)
        return {k: v for k, v in data.items() if (k not in _TAIL_FIELDS or v is not None) and (k != "guard" or v)}

    def _rule(self) -> str:
        """Where a verdict recorded before Holm's levels were kept straddles a limit its own bound lies beyond."""
        if self.holm_cells is None and self.beyond_alone and self.decision == "straddle":
            return "; beyond it at this cell alone, not with the cells tested together (Holm)"  # an older record
        return ""


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
    return {cell: [v for _, v in values] for cell, values in blocked_figures(runs, rule).items()}


def run_block(cells: pd.DataFrame, position: int) -> Block:
    """The block a run belongs to: what judge() put in `cells.attrs["block"]` (machine, interleaving round), or
    its position among its candidate's runs."""
    block = cells.attrs.get("block")
    return tuple(block) if block else ("", str(position))


def blocked_figures(runs: list[pd.DataFrame], rule: ComparisonRule) -> dict[str, list[tuple[Block, float]]]:
    """cell id -> (block, the rule's figure) in each run that has it."""
    out: dict[str, list[tuple[Block, float]]] = {}
    for position, cells in enumerate(runs):
        block = run_block(cells, position)
        for row in frame_records(select_cells(cells, rule)):
            value = row.get(rule.metric)
            if value is not None and not pd.isna(value):
                out.setdefault(row["cell_id"], []).append((block, float(value)))
    return out


def log_margin(rule: ComparisonRule) -> float:
    """The rule's limit as a log ratio of candidate to baseline: a drop for rates, a rise for times."""
    if rule.metric in LOWER_IS_BETTER:
        return math.log(1 + rule.max_regression_pct / 100.0)
    return math.log(max(1e-9, 1 - rule.max_regression_pct / 100.0))


def compare_rule(runs: list[pd.DataFrame], baseline_runs: list[pd.DataFrame], rule: ComparisonRule,
                 alpha: float = ALPHA, peers: dict[str, list[pd.DataFrame]] | None = None) -> list[Comparison]:
    """Every cell the rule selects, in the candidate's cell order, against the baseline: the change from the
    study's model of that cell (`peers`: the other candidates' runs, whose noise is the same noise), with
    one-sided bounds at `alpha`. The decision here is per cell; the verdict applies Holm across cells."""
    if isinstance(runs, pd.DataFrame):
        runs = [runs]
    if isinstance(baseline_runs, pd.DataFrame):
        baseline_runs = [baseline_runs]
    mine, theirs = blocked_figures(runs, rule), blocked_figures(baseline_runs, rule)
    others = {name: blocked_figures(frames, rule) for name, frames in (peers or {}).items()}
    described = {row["cell_id"]: row for cells in runs for row in frame_records(select_cells(cells, rule))}
    probes = cpu_probes([*runs, *baseline_runs, *(f for frames in (peers or {}).values() for f in frames)])
    out = []
    for cell_id, values in mine.items():
        if cell_id not in theirs:
            continue
        groups = {_CANDIDATE: values, _BASELINE: theirs[cell_id],
                  **{f"peer:{name}": found[cell_id] for name, found in others.items() if cell_id in found}}
        contrast = fit_contrasts(groups, _BASELINE).get(_CANDIDATE)
        row = {str(k): v for k, v in described[cell_id].items()}
        found = comparison_of(rule, row, values, theirs[cell_id], contrast, alpha)
        found.machines = machine_changes(groups, _CANDIDATE, _BASELINE, log_margin(rule),
                                         rule.metric in LOWER_IS_BETTER, alpha)
        for machine in found.machines:
            machine.cpu_probe_ms = probes.get(machine.machine)
        if host_dependent(found.machines):
            found.decision, found.ok, found.repeats_to_decide = "host", False, None
        thinnest = _thinnest_tail(rule, cell_id, [*runs, *baseline_runs])
        if thinnest is not None:
            # a percentile from too few samples says little of its quantile: the cell is judged neither way
            found.decision, found.ok, found.repeats_to_decide, found.better = "insufficient", False, None, False
            found.tail_samples, found.tail_needed, found.tail_p = thinnest.n, thinnest.needed, thinnest.p
        out.append(found)
    return out


def _thinnest_tail(rule: ComparisonRule, cell_id: str, runs: list[pd.DataFrame]) -> Tail | None:
    """The fewest-sampled insufficient tail of the rule's figure at `cell_id` over the runs of both sides (None:
    every run's is sufficient, or the figure is no counted percentile)."""
    found = [tail for cells in runs for row in frame_records(select_cells(cells, rule))
             if row["cell_id"] == cell_id and (tail := insufficient_tail(row, rule.metric)) is not None]
    return min(found, key=lambda tail: tail.n, default=None)


_CANDIDATE, _BASELINE = "candidate", "baseline"


def comparison_of(rule: ComparisonRule, row: dict[str, Any], values: list[tuple[Block, float]],
                  baseline: list[tuple[Block, float]], contrast: Contrast | None, alpha: float) -> Comparison:
    """One cell's comparison from its contrast; `row`: the candidate's cell row (id, category, concurrency)."""
    lower = rule.metric in LOWER_IS_BETTER
    margin = log_margin(rule)
    bounds = contrast.bounds_pct(alpha) if contrast is not None else None
    p = contrast.p_beyond(margin, worse_is_lower=not lower) if contrast is not None else None
    if contrast is None:
        decision: Decision = "missing"
    elif (contrast.n_candidate < 2 and contrast.n_baseline < 2) or p is None:
        # One launch per side: the study's other candidates give the noise, but a verdict never rests on one
        # launch per side; with more on one side, the model's interval decides.
        decision = "single"
    elif p[0] <= alpha:
        decision = "pass"
    else:
        decision = "straddle"  # "fail" is for the verdict to say, after Holm across its cells
    regression = None if contrast is None else (contrast.pct if lower else -contrast.pct)
    ok = decision == "pass" or (decision == "single" and regression is not None
                                and regression <= rule.max_regression_pct)
    better = bounds is not None and (bounds[1] < 0 if lower else bounds[0] > 0)
    prompt = row.get("target_prompt_tokens")
    return Comparison(
        metric=rule.metric, cell_id=str(row["cell_id"]), category=row.get("category"),
        concurrency=int(row["concurrency"]) if "concurrency" in METRICS[rule.metric].selects else None,
        prompt_tokens=None if prompt is None or pd.isna(prompt) else int(prompt),
        # each side's figure as the tables and charts show it (estimates.Spread: the geometric mean, the centre on
        # the log scale the model compares on)
        value=Spread.of([v for _, v in values]).center, baseline=Spread.of([v for _, v in baseline]).center,
        runs=len(values), baseline_runs=len(baseline),
        change_pct=None if contrast is None else contrast.pct,
        change_low_pct=bounds[0] if bounds else None, change_high_pct=bounds[1] if bounds else None,
        limit_pct=rule.max_regression_pct, decision=decision, ok=bool(ok), confidence_pct=100 * (1 - 2 * alpha),
        repeats_to_decide=_runs_to_decide(contrast, margin, alpha) if decision == "straddle" else None,
        p_within=None if p is None else p[0], p_beyond=None if p is None else p[1], better=better,
        method=contrast.method if contrast is not None else "",
        log_se=None if contrast is None else contrast.se, df=None if contrast is None else contrast.df)


def settle(comparisons: list[Comparison], alpha: float) -> list[Comparison]:
    """Mark as failing the cells Holm's procedure finds beyond their limits at familywise `alpha` (in place);
    returns the cells that were tested. Verdicts and `servebook compare` both settle here, so a regression one
    of them reports the other reports too."""
    # a cell that depends on the machine is decided machine by machine, not by the pooled figure
    tested = [c for c in comparisons if c.p_beyond is not None and c.decision not in ("single", "host", "insufficient")]
    for c, beyond in zip(tested, holm([c.p_beyond or 1.0 for c in tested], alpha), strict=True):
        if beyond:
            c.decision, c.ok = "fail", False
    _decision_bounds(tested, alpha)
    return tested


def _decision_bounds(tested: list[Comparison], alpha: float) -> None:
    """Each tested cell's interval at the levels the verdict used, so no shown interval contradicts its verdict.

    The bound that accepts (non-inferiority) stays at one-sided `alpha`. The bound that rejects is the one compatible
    with Holm's procedure (Strassburger and Bretz, 2008): for every cell Holm did not reject, one-sided
    alpha / (the cells not rejected), which by Holm's stopping rule cannot lie beyond the limit. A rejected cell
    keeps its own bound, beyond the limit, and its text names the rule."""
    from scipy import stats

    kept = [c for c in tested if c.decision != "fail"]
    for c in tested:
        c.holm_cells = len(tested)
        if c.decision == "fail" or c.change_pct is None or c.log_se is None or c.df is None:
            continue
        level = alpha / len(kept)
        c.holm_level = level
        low, high = c.change_low_pct, c.change_high_pct
        reach = math.log1p(c.change_pct / 100.0) + (-1 if c.lower_is_better else 1) * \
            float(stats.t.ppf(1 - level, c.df)) * c.log_se
        if c.lower_is_better:
            low = 100.0 * math.expm1(reach)
        else:
            high = 100.0 * math.expm1(reach)
        c.decision_low_pct, c.decision_high_pct = low, high


def _runs_to_decide(contrast: Contrast | None, margin: float, alpha: float) -> int | None:
    """Runs per side that would likely put the one-sided bound on one side of the limit, if the estimate and the
    noise hold; None when it cannot be said."""
    from scipy import stats

    if contrast is None or contrast.se is None or contrast.df is None or contrast.se == 0:
        return None
    gap = abs(contrast.log_ratio - margin)
    if gap == 0:
        return None
    per_run = contrast.se / math.sqrt(1 / contrast.n_candidate + 1 / contrast.n_baseline)  # the spread of one run
    # t * per_run * sqrt(2 / n) < gap, at the study's degrees of freedom
    needed = 2 * (float(stats.t.ppf(1 - alpha, contrast.df)) * per_run / gap) ** 2
    n = max(math.floor(needed) + 1, max(contrast.n_candidate, contrast.n_baseline) + 1)
    return n if n <= 200 else None


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
