"""A study's verdicts for machines and reviewers: JSON with the typed fields, Markdown for a pull request or
`$GITHUB_STEP_SUMMARY`, and JUnit XML (one test case per candidate and per judged cell)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..config.study import Study
from ..verdicts import GateResult, Judged, deciding, gate_outcome
from ..verdicts.comparisons import UNDECIDED
from ..verdicts.labels import counts_text, outcome_counts, outcome_label
from ..verdicts.left_out import left_out_reasons
from ..verdicts.output import evidence_words
from ..verdicts.ranking import study_answer
from .report import answer_markdown
from .site.pages import page_slug

FORMATS = ("text", "json", "markdown", "junit")


def _is_baseline(study: Study, item: Judged) -> bool:
    return item.entry.name == study.verdict.baseline_entry


def labels(study: Study, judged: list[Judged]) -> dict[str, str]:
    """name -> the candidate's outcome as every output labels it (verdicts.ranking.outcome_label: "baseline")."""
    return {item.entry.name: outcome_label(gate_outcome(item), _is_baseline(study, item)) for item in judged}


def counts(study: Study, judged: list[Judged]) -> dict[str, int]:
    """outcome -> candidates with it, the baseline counted apart: the tally every output gives."""
    return outcome_counts((gate_outcome(item), _is_baseline(study, item)) for item in judged)


def verdicts_json(study: Study, judged: list[Judged], result: GateResult) -> dict[str, Any]:
    """Every candidate's verdict with its typed fields, the runs behind it and the gate's result."""
    candidates = []
    shown = labels(study, judged)
    for item in judged:
        verdict = item.verdict
        cell = deciding(verdict) if verdict else None
        candidates.append({
            "name": item.entry.name, "candidate_id": item.entry.candidate.id, "outcome": gate_outcome(item),
            # as the other outputs say it: the baseline's acceptance is "baseline", never counted as accepted
            "label": shown[item.entry.name],
            "undecided": None if verdict is None else verdict.undecided,
            "settled": None if verdict is None else verdict.settled,
            "run_ids": [r.run_id for r in item.records],
            "reasons": left_out_reasons(item.left_out) if verdict is None else verdict.reasons,
            "method": None if verdict is None else verdict.method,
            # damaged runs left out of the verdict, typed: a job reads the code, not the reason's words
            "left_out": [{"run_id": r.run_id, "status": r.status, "code": r.damage.code if r.damage else None,
                          "file": r.damage.file if r.damage else None} for r in item.left_out],
            "deciding_cell": None if cell is None else {**cell.to_dict(), "text": cell.text()},
            "comparisons": [] if verdict is None else [c.to_dict() for c in verdict.comparisons],
            # what its gains were earned on: drafter evidence and output realism, and the gains they cast doubt on
            "evidence": None if verdict is None else verdict.evidence,
            "caveats": [] if verdict is None else [asdict(c) for c in verdict.caveats],
            # changes beyond the noise where no rule looks, worse first (verdicts.side_effects); only where some are
            **({"side_effects": [e.to_dict() for e in verdict.side_effects]} if verdict and verdict.side_effects else {}),
            # cells left out as disturbed, each with its run and codes (verdicts.left_out); only where some were
            **({"left_out_cells": [c.to_dict() for c in verdict.left_out_cells]}
               if verdict and verdict.left_out_cells else {}),
        })
    return {"study": study.name, "plan_id": study.plan.id, "rules_hash": study.verdict.hash,
            "baseline": study.verdict.baseline, "counts": counts(study, judged),
            "gate": {"fail_on": sorted(result.fail_on), "exit_code": result.exit_code, "passed": result.passed,
                     "failing": result.failing},
            "candidates": candidates}


def verdicts_markdown(study: Study, judged: list[Judged], result: GateResult, site_url: str | None = None) -> str:
    """The study's answer with one row per candidate (the cell that decided it with its interval, the best gain, the
    worst side effect, the cells left out); candidates link to the site when its URL is known, and an outcome the
    gate fails on is bold. Fits a pull-request comment."""
    # the same tally as `servebook report` and the site: candidates only, the baseline named apart
    tally = f"{counts_text(counts(study, judged))} (baseline: {study.verdict.baseline})"
    base = site_url.rstrip("/") if site_url else None
    title = f"[{study.name}]({base}/studies/{page_slug(study.name)}.html)" if base else study.name
    # The answer first, in the very words of `servebook report` and the study page; its ranking is the verdicts.
    lines = [f"### servebook: study {title}: {tally}", ""] + ([result.describe(), ""] if result.fail_on else [])
    return "\n".join(lines + [answer_markdown(study_answer(study, judged), site_url=base, bold=result.fail_on)])


def verdicts_junit(study: Study, judged: list[Judged], result: GateResult) -> str:
    """JUnit XML: a suite per study (its properties the tally every output gives); per candidate one case for its
    verdict and one per judged cell. A rejection and a failure are failures whatever the gate's exit code (`--fail-on`
    sets the exit code, not what a cell beyond its limit is); an undecided verdict or cell is a failure where the gate
    fails on inconclusive verdicts, else skipped with its reason; the baseline's case says it is the baseline."""
    from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

    suite = TestSuite(f"servebook.{study.name}")
    for outcome, n in counts(study, judged).items():
        suite.add_property(outcome, str(n))
    shown = labels(study, judged)
    for item in judged:
        outcome = gate_outcome(item)
        classname = f"{study.name}.{item.entry.name}"
        case = TestCase("verdict", classname=classname)
        reasons = "\n".join(item.verdict.lines()) if item.verdict else "never run"
        evidence = evidence_words(item.verdict.evidence) if item.verdict else "-"
        failing = outcome in result.fail_on or outcome in ("rejected", "failed")
        if failing:
            case.result = [Failure(f"{item.entry.name}: {outcome}", type_=outcome)]
        elif outcome in ("inconclusive", "missing"):
            case.result = [Skipped(f"{item.entry.name}: {outcome}")]
        baseline = shown[item.entry.name] == "baseline"
        if failing or evidence != "-" or baseline:
            case.system_out = ("baseline: " if baseline else "") + reasons + (
                "" if evidence == "-" else f"\ndrafter and output: {evidence}")
        suite.add_testcase(case)
        for cell in item.verdict.comparisons if item.verdict else []:
            cell_case = TestCase(f"{cell.metric} {cell.where}", classname=classname)
            if cell.decision == "fail":
                cell_case.result = [Failure(cell.text(), type_="beyond_limit")]
            elif cell.decision in UNDECIDED:
                undecided = f"{cell.text()} ({cell.decision})"
                cell_case.result = [Failure(undecided, type_="undecided") if "inconclusive" in result.fail_on
                                    else Skipped(undecided)]
            suite.add_testcase(cell_case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    return xml.tostring().decode()


def write_step_summary(markdown: Callable[[], str]) -> Path | None:
    """Append the Markdown (rendered only then) to `$GITHUB_STEP_SUMMARY` when a GitHub Actions step set it
    (several steps may write there)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown() + "\n")
    return path
