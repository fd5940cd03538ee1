"""How much of a study's launch-to-launch noise its interleaving rounds take out. Prints, per judged cell, the
baseline's between-launch CV, the spread left once each round's common shift is removed (log(figure) ~ candidate +
round, fitted over every candidate's runs: the noise the verdict's model faces), and their ratio.

With `sweep --resident` a round's candidates measure the same cell within the same minute, so a host whose CPUs
drift from minute to minute moves all of them alike; run one after another, a round spans many minutes and the
ratio stays near 1.

    .venv/bin/python benchmarks/round_noise.py data/studies/h200-vllm-1b-resident.yaml --journal /tmp/sb-journal
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from servebook.config import load_study
from servebook.journal import Journal
from servebook.verdicts.comparisons import blocked_figures
from servebook.verdicts.evidence import baseline_evidence, run_cells


def blocked_cv(rows: list[tuple[str, str, float]]) -> tuple[float, int] | None:
    """The residual spread (percent, on the log scale) of log(value) ~ candidate + round, and its df."""
    names = sorted({n for n, _, _ in rows})
    rounds = sorted({r for _, r, _ in rows})  # one round: no round factor, the spread of repeated launches in it
    x = np.zeros((len(rows), len(names) + len(rounds) - 1))
    for i, (name, block, _) in enumerate(rows):
        x[i, names.index(name)] = 1.0
        if block != rounds[0]:
            x[i, len(names) + rounds.index(block) - 1] = 1.0
    y = np.array([math.log(v) for _, _, v in rows])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    df = len(rows) - np.linalg.matrix_rank(x)
    if df <= 0:
        return None
    residual = y - x @ beta
    return 100 * math.sqrt(float(residual @ residual) / df), int(df)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study")
    parser.add_argument("--journal", default="journal")
    args = parser.parse_args()
    study = load_study(args.study)
    journal = Journal(args.journal).require()
    per_entry = {}
    for entry in study.expand():
        records = journal.find_all(entry.candidate.id, study.plan.id, statuses=("completed",))
        per_entry[entry.name] = baseline_evidence(run_cells(records))
    baseline = study.verdict.baseline_entry or "baseline"
    print(f"{'cell':28} {'metric':18} {'launches':>8} {'raw CV':>8} {'in-round':>9} {'df':>4} {'ratio':>6}")
    for rule in study.verdict.rules:
        figures = {name: blocked_figures(runs, rule) for name, runs in per_entry.items()}
        for cell_id, base in figures.get(baseline, {}).items():
            values = [v for _, v in base]
            raw = 100 * statistics.stdev(math.log(v) for v in values) if len(values) > 1 else float("nan")
            rows = [(name, str(block[-1]), v) for name, found in figures.items() for block, v in found.get(cell_id, [])
                    if v and v > 0]
            blocked = blocked_cv(rows)
            within, df = blocked if blocked else (float("nan"), 0)
            ratio = raw / within if within == within and within > 0 else float("nan")
            print(f"{cell_id:28} {rule.metric:18} {len(values):>8} {raw:>7.1f}% {within:>8.1f}% {df:>4} {ratio:>6.2f}")


if __name__ == "__main__":
    main()
