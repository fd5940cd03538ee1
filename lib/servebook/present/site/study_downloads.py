"""A study's verdicts as files a reader can take away from its site page: JSON (each candidate's verdict, reasons
and typed comparisons), CSV (one row per candidate and judged cell) and JUnit XML (a case per candidate, failing
when rejected or failed, skipped when undecided), all from the recorded verdict events the page shows."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ...verdicts.labels import outcome_counts, outcome_label
from ...verdicts.left_out import LeftOut
from .summary import RunSummary

#: the comparison fields the CSV carries, in order (the typed fields of verdicts.Comparison): the interval the
#: decision used (decision_*, the rejecting bound at Holm's level), then the cell's own one-sided 5% bounds
CSV_FIELDS = ("candidate", "outcome", "metric", "cell_id", "value", "baseline", "change_pct", "decision_low_pct",
              "decision_high_pct", "holm_level", "change_low_pct", "change_high_pct", "limit_pct", "decision", "ok",
              "runs", "baseline_runs")
#: file suffix -> what the study page calls the download
STUDY_DOWNLOADS = {"verdicts.json": "JSON", "verdicts.csv": "CSV", "verdicts.junit.xml": "JUnit XML"}


def _baseline(chosen: list[RunSummary]) -> str | None:
    return next((s.rules.get("baseline") for s in chosen if s.rules), None)


def _verdict(s: RunSummary, baseline: str | None) -> dict[str, Any]:
    event = s.verdicts[-1] if s.verdicts else {}
    outcome = s.verdict or s.status
    return {"candidate": s.label, "run_id": s.run_id, "outcome": outcome,
            # as every output labels it (verdicts.ranking.outcome_label): the baseline's acceptance is "baseline"
            "label": outcome_label(outcome, s.label == baseline),
            "reasons": list(event.get("reasons") or s.reasons or []),
            # the cells left out as disturbed, typed, and as the one line every output says (verdicts.left_out)
            "left_out_cells": list(event.get("left_out_cells") or []),
            "left_out": LeftOut.of(event.get("left_out_cells")).text() or None,
            "method": event.get("method"),
            "comparisons": [c for c in event.get("comparisons") or [] if "decision" in c]}


def _verdicts(chosen: list[RunSummary]) -> list[dict[str, Any]]:
    baseline = _baseline(chosen)
    return [_verdict(s, baseline) for s in chosen]


def study_counts(chosen: list[RunSummary]) -> dict[str, int]:
    """outcome -> candidates with it, the baseline counted apart: the tally of `report` and the CI outputs."""
    baseline = _baseline(chosen)
    return outcome_counts((s.verdict or s.status, s.label == baseline) for s in chosen)


def study_json(name: str, chosen: list[RunSummary]) -> str:
    return json.dumps({"study": name, "baseline": _baseline(chosen), "counts": study_counts(chosen),
                       "candidates": _verdicts(chosen)}, indent=2, sort_keys=True, default=str) + "\n"


def study_csv(chosen: list[RunSummary]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for verdict in _verdicts(chosen):
        for comparison in verdict["comparisons"]:
            writer.writerow({**comparison, "candidate": verdict["candidate"], "outcome": verdict["label"]})
    return out.getvalue()


def study_junit(name: str, chosen: list[RunSummary]) -> str:
    from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

    suite = TestSuite(f"servebook.{name}")
    for outcome, n in study_counts(chosen).items():
        suite.add_property(outcome, str(n))
    for verdict in _verdicts(chosen):
        case = TestCase("verdict", classname=f"{name}.{verdict['candidate']}")
        case.system_out = ("baseline: " if verdict["label"] == "baseline" else "") + "\n".join(
            verdict["reasons"] + ([verdict["left_out"]] if verdict["left_out"] else [])
            + ([f"method: {verdict['method']}"] if verdict["method"] else []))
        if verdict["outcome"] in ("rejected", "failed"):
            case.result = [Failure(f"{verdict['candidate']}: {verdict['outcome']}", type_=verdict["outcome"])]
        elif verdict["outcome"] not in ("accepted", "completed"):
            case.result = [Skipped(f"{verdict['candidate']}: {verdict['outcome']}")]
        suite.add_testcase(case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    return xml.tostring().decode()


def study_files(name: str, chosen: list[RunSummary]) -> dict[str, str]:
    """suffix -> the file's text, for each of STUDY_DOWNLOADS."""
    return {"verdicts.json": study_json(name, chosen), "verdicts.csv": study_csv(chosen),
            "verdicts.junit.xml": study_junit(name, chosen)}
