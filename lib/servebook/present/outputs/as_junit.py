"""JUnit XML: a suite per study (its properties the tally every output gives); per candidate one case for its
verdict and one per judged cell.

A rejection and a failure are failures whatever the gate (`--fail-on` sets the exit code, not what a cell beyond its
limit is); an undecided verdict or cell is a failure where the gate fails on inconclusive verdicts, else skipped; a
candidate never run is skipped unless the gate fails on missing ones. Each verdict case's output says everything its
reader is told (reasons, cells left out, method, drafter evidence); the baseline's starts "baseline: "."""

from __future__ import annotations

from ...verdicts.comparisons import UNDECIDED
from ...verdicts.output import evidence_words
from .registry import VerdictOutput, register_output
from .report import CandidateVerdict, VerdictReport


def _verdict_case(report: VerdictReport, c: CandidateVerdict):
    from junitparser import Failure, Skipped, TestCase

    case = TestCase("verdict", classname=f"{report.study}.{c.name}")
    if c.outcome in report.gate.fail_on or c.outcome in ("rejected", "failed"):
        case.result = [Failure(f"{c.name}: {c.outcome}", type_=c.outcome)]
    elif c.outcome in ("inconclusive", "missing"):
        case.result = [Skipped(f"{c.name}: {c.outcome}")]
    evidence = evidence_words(c.evidence)
    said = (["never run"] if c.outcome == "missing" else []) + c.lines() + (
        [] if evidence == "-" else [f"drafter and output: {evidence}"])
    case.system_out = ("baseline: " if c.label == "baseline" else "") + "\n".join(said)
    return case


def _cell_cases(report: VerdictReport, c: CandidateVerdict) -> list:
    from junitparser import Failure, Skipped, TestCase

    cases = []
    for cell in c.comparisons:
        case = TestCase(f"{cell.metric} {cell.where}", classname=f"{report.study}.{c.name}")
        if cell.decision == "fail":
            case.result = [Failure(cell.text(), type_="beyond_limit")]
        elif cell.decision in UNDECIDED:
            undecided = f"{cell.text()} ({cell.decision})"
            case.result = [Failure(undecided, type_="undecided") if "inconclusive" in report.gate.fail_on
                           else Skipped(undecided)]
        cases.append(case)
    return cases


def write(report: VerdictReport, site_url: str | None = None) -> str:
    from junitparser import JUnitXml, TestSuite

    suite = TestSuite(f"servebook.{report.study}")
    for outcome, n in report.counts.items():
        suite.add_property(outcome, str(n))
    for c in report.candidates:
        suite.add_testcase(_verdict_case(report, c))
        for case in _cell_cases(report, c):
            suite.add_testcase(case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    return xml.tostring().decode() + "\n"


register_output(VerdictOutput("junit", write, 30, download="verdicts.junit.xml", title="JUnit XML"))
