"""CSV: one row per candidate and judged cell, the cell's typed comparison (verdicts.Comparison) in columns."""

from __future__ import annotations

import csv
import io

from .registry import VerdictOutput, register_output
from .report import VerdictReport

#: the comparison fields the CSV carries, in order: the interval the decision used (decision_*, the rejecting bound
#: at Holm's level), then the cell's own one-sided 5% bounds
FIELDS = ("candidate", "outcome", "metric", "cell_id", "value", "baseline", "change_pct", "decision_low_pct",
          "decision_high_pct", "holm_level", "change_low_pct", "change_high_pct", "limit_pct", "decision", "ok",
          "runs", "baseline_runs")


def write(report: VerdictReport, site_url: str | None = None) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, FIELDS, extrasaction="ignore")
    writer.writeheader()
    for candidate in report.candidates:
        for comparison in candidate.comparisons:
            writer.writerow({**comparison.to_dict(), "candidate": candidate.name, "outcome": candidate.label})
    return out.getvalue()


register_output(VerdictOutput("csv", write, 20, download="verdicts.csv", title="CSV"))
