"""How much of a study's launch-to-launch noise its interleaving rounds take out. Prints, per judged cell, the
baseline's between-launch CV, the spread left once each round's common shift is removed (log(figure) ~ candidate +
round, fitted over every candidate's runs: the noise the verdict's model faces), their ratio, and what is left when
the log of each cell's CPU probe (`cpu_probe_ms`, timed where the client runs; `engine_cpu_probe_ms`, on the CPUs
the engine is held to) is added to that model as a covariate. Last, how the baseline's launches' deviations from
their round's mean correlate across cells: a launch slow in every cell is slow as a process, which only more
launches average out; deviations that do not correlate are each cell's own noise.

With `sweep --resident` a round's candidates measure the same cell within the same minute, so a host whose CPUs
drift from minute to minute moves all of them alike; run one after another, a round spans many minutes and the
ratio stays near 1. A study without verdict rules (the noise studies: one configuration launched many times) is
read through the rules a comparison follows by default: every decode and cold-prefill cell.

    .venv/bin/python benchmarks/round_noise.py data/studies/h200-vllm-1b-resident.yaml --journal /tmp/sb-journal
    .venv/bin/python benchmarks/round_noise.py data/studies/h200-llamacpp-1b-noise-sliced.yaml \
        --journal sample-journals/sample-journal-noise-h100 --set knobs.context_length=270336   # as the sweep was
        # run; `servebook journal samples` extracts the sample journals into sample-journals/
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

import numpy as np
import pandas as pd

from servebook.config import load_study
from servebook.config.loading import parse_overrides
from servebook.journal import Journal
from servebook.verdicts import baseline_evidence, default_rules, select_cells
from servebook.verdicts.comparisons import run_block
from servebook.verdicts.evidence import run_cells

COVARIATES = ("cpu_probe_ms", "engine_cpu_probe_ms")


@dataclass
class Figure:
    candidate: str
    launch: str
    block: str
    value: float
    probes: dict[str, float]


def residual_cv(figures: list[Figure], covariate: str | None = None) -> tuple[float, int] | None:
    """The residual spread (percent, on the log scale) of log(value) ~ candidate + block [+ log(covariate)], and
    its degrees of freedom; None where the model has none left or a figure lacks the covariate."""
    if covariate and any(not f.probes.get(covariate) for f in figures):
        return None
    names = sorted({f.candidate for f in figures})
    blocks = sorted({f.block for f in figures})  # one block: the spread of repeated launches in it
    x = np.zeros((len(figures), len(names) + len(blocks) - 1 + (1 if covariate else 0)))
    for i, figure in enumerate(figures):
        x[i, names.index(figure.candidate)] = 1.0
        if figure.block != blocks[0]:
            x[i, len(names) + blocks.index(figure.block) - 1] = 1.0
        if covariate:
            x[i, -1] = math.log(figure.probes[covariate])
    y = np.array([math.log(f.value) for f in figures])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    df = len(figures) - int(np.linalg.matrix_rank(x))
    if df <= 0:
        return None
    residual = y - x @ beta
    return 100 * math.sqrt(float(residual @ residual) / df), df


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study")
    parser.add_argument("--journal", default="journal")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="the study's base changed as the sweep's --set changed it (repeat)")
    args = parser.parse_args()
    study = load_study(args.study, parse_overrides(args.set) or None)
    journal = Journal(args.journal).require()
    per_entry = {}
    for entry in study.expand():
        records = journal.find_all(entry.candidate.id, study.plan.id, statuses=("completed",))
        per_entry[entry.name] = baseline_evidence(run_cells(records))
    baseline = study.verdict.baseline_entry or "baseline"
    rules = study.verdict.rules or default_rules()
    deviations: dict[str, dict[str, float]] = {}  # cell -> the baseline's launch -> log deviation from its round
    print(f"{'cell':28} {'metric':16} {'launches':>8} {'raw CV':>7} {'in-round':>8} {'df':>3} {'ratio':>5}  "
          + " ".join(f"{'+ ' + c.removesuffix('_ms'):>20}" for c in COVARIATES))
    for rule in rules:
        by_cell: dict[str, list[Figure]] = {}
        for name, runs in per_entry.items():
            for position, cells in enumerate(runs):
                block = "/".join(run_block(cells, position))
                for row in select_cells(cells, rule).to_dict("records"):
                    value = row.get(rule.metric)
                    if not (value or 0) > 0:  # none, NaN or not a rate
                        continue
                    probes = {c: float(row[c]) for c in COVARIATES if (row.get(c) or 0) > 0}
                    by_cell.setdefault(row["cell_id"], []).append(
                        Figure(name, f"{name}#{position}", block, float(value), probes))
        for cell_id, found in by_cell.items():
            values = [f.value for f in found if f.candidate == baseline]
            if not values:
                continue
            raw = 100 * statistics.stdev(math.log(v) for v in values) if len(values) > 1 else float("nan")
            within, df = residual_cv(found) or (float("nan"), 0)
            ratio = raw / within if within == within and within > 0 else float("nan")
            covaried = []
            for covariate in COVARIATES:
                fitted = residual_cv(found, covariate)
                covaried.append(f"{fitted[0]:>13.1f}% (df {fitted[1]:>2})" if fitted else f"{'-':>20}")
            print(f"{cell_id:28} {rule.metric:16} {len(values):>8} {raw:>6.1f}% {within:>7.1f}% {df:>3} {ratio:>5.2f}  "
                  + " ".join(covaried))
            mine = pd.DataFrame([(f.launch, f.block, math.log(f.value)) for f in found if f.candidate == baseline],
                                columns=["launch", "block", "log"])
            mine["deviation"] = mine["log"] - mine.groupby("block")["log"].transform("mean")
            deviations[cell_id] = dict(zip(mine["launch"], mine["deviation"], strict=True))
    table = pd.DataFrame(deviations)
    if len(table) > 2 and table.shape[1] > 1:
        print(f"\nthe baseline's launches ({len(table)}), deviation from their round's mean, correlated across cells:")
        print(table.corr().round(2).to_string())


if __name__ == "__main__":
    main()
