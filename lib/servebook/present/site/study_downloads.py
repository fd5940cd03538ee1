"""A study's verdicts as files a reader can take away from its site page: JSON (each candidate's verdict, reasons
and typed comparisons), CSV (one row per candidate and judged cell) and JUnit XML (a case per candidate, failing
when rejected or failed, skipped when undecided), all from the recorded verdict events the page shows."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from .summary import RunSummary

#: the comparison fields the CSV carries, in order (the typed fields of verdicts.Comparison): the interval the
#: decision used (decision_*, the rejecting bound at Holm's level), then the cell's own one-sided 5% bounds
CSV_FIELDS = ("candidate", "outcome", "metric", "cell_id", "value", "baseline", "change_pct", "decision_low_pct",
              "decision_high_pct", "holm_level", "change_low_pct", "change_high_pct", "limit_pct", "decision", "ok",
              "runs", "baseline_runs")
#: file suffix -> what the study page calls the download
STUDY_DOWNLOADS = {"verdicts.json": "JSON", "verdicts.csv": "CSV", "verdicts.junit.xml": "JUnit XML"}


def _verdict(s: RunSummary) -> dict[str, Any]:
    event = s.verdicts[-1] if s.verdicts else {}
    return {"candidate": s.label, "run_id": s.run_id, "outcome": s.verdict or s.status,
            "reasons": list(event.get("reasons") or s.reasons or []),
            "method": event.get("method"),
            "comparisons": [c for c in event.get("comparisons") or [] if "decision" in c]}


def study_json(name: str, chosen: list[RunSummary]) -> str:
    return json.dumps({"study": name, "candidates": [_verdict(s) for s in chosen]}, indent=2, sort_keys=True,
                      default=str) + "\n"


def study_csv(chosen: list[RunSummary]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for verdict in map(_verdict, chosen):
        for comparison in verdict["comparisons"]:
            writer.writerow({**comparison, "candidate": verdict["candidate"], "outcome": verdict["outcome"]})
    return out.getvalue()


def study_junit(name: str, chosen: list[RunSummary]) -> str:
    from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

    suite = TestSuite(f"servebook.{name}")
    for verdict in map(_verdict, chosen):
        case = TestCase("verdict", classname=f"{name}.{verdict['candidate']}")
        case.system_out = "\n".join(verdict["reasons"] + ([f"method: {verdict['method']}"] if verdict["method"] else []))
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
