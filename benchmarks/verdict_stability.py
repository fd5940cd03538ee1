"""Can noise flip a verdict, and does the verdict decide what the data can decide? Thousands of seeded studies.

Each trial is a study of the demo's shape: a baseline and 5 candidates, 4 judged cells (aggregate decode at 1
and 4 requests, prose and code), a 7% limit. Every run's figures carry launch-to-launch noise, log-normal,
at a total CV of 5% or 10%: half of its variance is shared by all cells of a run (a slow launch is slow in every
cell, as seen on the H200s) and half is the cell's own. The same runs are judged two ways:

- today's method (servebook before this change): each candidate against the baseline alone, Welch intervals,
  Bonferroni over the cells, two-sided;
- the study model: one fit per cell over every candidate's runs (rounds as blocks, variance pooled and moderated),
  acceptance when every cell is non-inferior at one-sided 5% (intersection-union), rejection when Holm across the
  cells finds one beyond the limit; with --until-decided, runs are added to undecided candidates up to 6 each
  (and to the baseline, which catches up each round to sqrt(k) times the runs of one of k open candidates),
  with group-sequential boundaries (Lan-DeMets,
  O'Brien-Fleming-type spending) so that the looks together keep the 5%.

Figures, per candidate verdict: familywise false rejection of a true null; rejection of a true -15% regression
at 3 runs per side; acceptance of a true null within 6 runs per side. Beside them, the most any level-5% test
could reject the -15% regression at 3 runs per side (Neyman-Pearson, variance known): at CV 5% that bound is
87%, so 90% at a fixed 3 runs is out of reach of every valid test; only added runs get there.

    .venv/bin/python benchmarks/verdict_stability.py [--trials 1000] [--seed 1]

`benchmarks/verdict_stability_engines.py` draws its runs from real launches (llama.cpp and the simulator) instead.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from servebook.config import ComparisonRule
from servebook.estimates import ALPHA, change, decide, fit_contrasts, spent_alpha
from servebook.sweeps.orchestrate import baseline_target, spread
from servebook.verdicts import comparison_of, settle

CELLS = [("prose", 1), ("prose", 4), ("code", 1), ("code", 4)]
RULE = ComparisonRule(metric="aggregate_tok_s", concurrency=[1, 4], max_regression_pct=7)
CANDIDATES = 5
START, MAX_RUNS = 3, 6


def draw_run(rng: np.random.Generator, effect: float, cv: float, shared: float = 0.5) -> list[float]:
    """One launch's figure per cell: 100 x (1 + effect), times shared and per-cell log-normal noise."""
    sigma = math.sqrt(math.log(1 + cv * cv))
    run = rng.normal(0, sigma * math.sqrt(shared))
    return [100 * (1 + effect) * math.exp(run + rng.normal(0, sigma * math.sqrt(1 - shared))) for _ in CELLS]


class Study:
    """Runs of a baseline and candidates with given true effects, drawn as the sweep would make them."""

    def __init__(self, rng: np.random.Generator, effects: list[float], cv: float):
        self.rng, self.effects, self.cv = rng, effects, cv
        self.runs: list[list[list[float]]] = [[] for _ in range(len(effects) + 1)]  # [group][run][cell]

    def add(self, group: int) -> None:
        effect = 0.0 if group == 0 else self.effects[group - 1]
        self.runs[group].append(draw_run(self.rng, effect, self.cv))


def new_verdicts(study: Study, alphas: dict[int, float]) -> dict[int, str]:
    """The verdict of each group in `alphas` (at its alpha), from one fit per cell over the whole study."""
    comparisons: dict[int, list] = {group: [] for group in alphas}
    for cell, (category, concurrency) in enumerate(CELLS):
        groups = {str(g): [(("", str(r)), run[cell]) for r, run in enumerate(runs)] for g, runs in enumerate(study.runs)}
        contrasts = fit_contrasts(groups, "0")
        row = {"cell_id": f"decode-{category}-c{concurrency}", "category": category, "concurrency": concurrency}
        for group, alpha in alphas.items():
            comparisons[group].append(comparison_of(RULE, row, groups[str(group)], groups["0"],
                                                    contrasts.get(str(group)), alpha))
    out = {}
    for group, found in comparisons.items():
        settle(found, alphas[group])
        if any(c.decision == "fail" for c in found):
            out[group] = "rejected"
        else:
            out[group] = "accepted" if all(c.decision == "pass" for c in found) else "inconclusive"
    return out


def old_verdict(study: Study, group: int) -> str:
    confidence = 1 - (1 - 0.95) / len(CELLS)
    decisions = []
    for cell in range(len(CELLS)):
        mine = [run[cell] for run in study.runs[group]]
        theirs = [run[cell] for run in study.runs[0]]
        decisions.append(decide(change(mine, theirs, confidence), RULE.max_regression_pct, False))
    if "fail" in decisions:
        return "rejected"
    return "accepted" if all(d == "pass" for d in decisions) else "inconclusive"


def fixed(rng: np.random.Generator, effects: list[float], cv: float, runs: int) -> tuple[list[str], list[str]]:
    study = Study(rng, effects, cv)
    for _ in range(runs):
        for group in range(len(effects) + 1):
            study.add(group)
    groups = range(1, len(effects) + 1)
    new = new_verdicts(study, {g: ALPHA for g in groups})
    return [new[g] for g in groups], [old_verdict(study, g) for g in groups]


def sequential(rng: np.random.Generator, effects: list[float], cv: float) -> tuple[list[str], list[int]]:
    """The new method with runs added until decided, up to MAX_RUNS per candidate."""
    study = Study(rng, effects, cv)
    for _ in range(START):
        for group in range(len(effects) + 1):
            study.add(group)
    looks = MAX_RUNS - START + 1
    outcomes: dict[int, str] = {}
    while True:
        alphas = {g: spent_alpha(len(study.runs[g]) - START + 1, looks, first_runs=START)
                  for g in range(1, len(effects) + 1) if g not in outcomes}
        for group, outcome in new_verdicts(study, alphas).items():
            if outcome != "inconclusive" or len(study.runs[group]) >= MAX_RUNS:
                outcomes[group] = outcome
        open_ = [g for g in range(1, len(effects) + 1) if g not in outcomes]
        if not open_:
            groups = range(1, len(effects) + 1)
            return [outcomes[g] for g in groups], [len(study.runs[g]) for g in groups]
        target = baseline_target(len(open_), max(len(study.runs[g]) for g in open_), MAX_RUNS)
        for group in spread(open_, 0, max(0, target - len(study.runs[0]))):  # the baseline catches up, as sweeps do
            study.add(group)


def best_possible_rejection(cv: float, runs: int, effect: float = -0.15, shared: float = 0.5) -> float:
    """The power of the most powerful level-5% test of "every cell within the limit" against a regression of
    `effect` in every cell, with the variance known (Neyman-Pearson against the least favourable null, every
    cell exactly at the limit): no test of that level, however it combines cells, rejects more often."""
    from scipy.stats import norm

    sigma2 = math.log(1 + cv * cv)
    contrast_var = 2 * sigma2 / runs * (shared + (1 - shared) / len(CELLS))  # the cells' mean, both sides
    distance = (math.log(1 - RULE.max_regression_pct / 100) - math.log(1 + effect)) / math.sqrt(contrast_var)
    return float(norm.cdf(distance - norm.ppf(1 - ALPHA)))


def share(outcomes: list[str], what: str) -> float:
    return outcomes.count(what) / len(outcomes) if outcomes else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    print(f"{args.trials} seeded studies per row: baseline + {CANDIDATES} candidates, {len(CELLS)} cells, limit -7%\n")
    header = f"{'CV':>4} {'figure':58} {'today':>8} {'model':>8} {'model, until decided':>21}"
    print(header)
    print("-" * len(header))
    for cv in (0.05, 0.10):
        rng = np.random.default_rng(args.seed)
        null_new, null_old, null_seq, null_runs, null6_new, null6_old = [], [], [], [], [], []
        loss_new, loss_old, loss_seq = [], [], []
        for _ in range(args.trials):
            new, old = fixed(rng, [0.0] * CANDIDATES, cv, START)
            null_new += new
            null_old += old
            seq, spent = sequential(rng, [0.0] * CANDIDATES, cv)
            null_seq += seq
            null_runs += spent
            new, old = fixed(rng, [0.0] * CANDIDATES, cv, MAX_RUNS)
            null6_new += new
            null6_old += old
            effects = [-0.15] + [0.0] * (CANDIDATES - 1)
            new, old = fixed(rng, effects, cv, START)
            loss_new.append(new[0])
            loss_old.append(old[0])
            seq, _ = sequential(rng, effects, cv)
            loss_seq.append(seq[0])
        rows = [
            ("true null falsely rejected (per verdict)", share(null_old, "rejected"), share(null_new, "rejected"),
             share(null_seq, "rejected")),
            ("true -15% rejected, 3 runs per side", share(loss_old, "rejected"), share(loss_new, "rejected"),
             share(loss_seq, "rejected")),
            ("true null accepted, 3 runs per side", share(null_old, "accepted"), share(null_new, "accepted"), None),
            ("true null accepted, 6 runs per side (until decided: within 6)", share(null6_old, "accepted"),
             share(null6_new, "accepted"), share(null_seq, "accepted")),
        ]
        for name, old_value, new_value, seq_value in rows:
            seq_text = "-" if seq_value is None else f"{100 * seq_value:.1f}%"
            print(f"{100 * cv:>3.0f}% {name:58} {100 * old_value:>7.1f}% {100 * new_value:>7.1f}% {seq_text:>21}")
        print(f"{'':4} {'mean runs per null candidate, until decided':58} {START:>8} {START:>8} "
              f"{np.mean(null_runs):>21.2f}")
        print(f"{'':4} {'bound: true -15% rejected by the best 5% test, 3 runs':58} {'':>8} "
              f"{100 * best_possible_rejection(cv, START):>7.1f}%   (variance known)")
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
