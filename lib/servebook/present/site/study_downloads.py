"""A study's verdicts as files a reader can take away from its site page: every verdict output that offers a download
(present/outputs: JSON, CSV, JUnit XML), written from the recorded verdict events the page shows by the same writers
as `servebook judge --format`, so the CI file and the download of one study are the same bytes."""

from __future__ import annotations

from typing import Any

from ..outputs import VerdictReport, candidate_of, downloads
from .summary import RunSummary


def _event(s: RunSummary) -> dict[str, Any] | None:
    return s.verdicts[-1] if s.verdicts else None


def _position(s: RunSummary) -> tuple[bool, int]:
    """The candidate's place in its study, as its verdict recorded it (events before 2026-12-07 did not: those
    follow, in the order their runs began)."""
    index = (_event(s) or {}).get("entry_index")
    return (not isinstance(index, int), index if isinstance(index, int) else 0)


def study_report(name: str, chosen: list[RunSummary]) -> VerdictReport:
    """The report of a study from each candidate's newest verdict (`chosen`: one summary per candidate); no gate is
    set, as the site judges nothing. The baseline is the study candidate the rules name, none where the baseline is
    recorded runs (verdict.baseline_from), as judge() counts it."""
    rules = next((s.rules for s in chosen if s.rules), None) or {}
    recorded = rules.get("baseline_from") is not None
    baseline_entry = None if recorded else rules.get("baseline")
    events = [e for e in map(_event, chosen) if e]
    candidates = tuple(
        candidate_of(s.label, _event(s), is_baseline=s.label == baseline_entry, candidate_id=s.candidate_id,
                     run_ids=(s.run_id,), unjudged="failed" if s.status == "failed" else "missing")
        for s in sorted(chosen, key=_position))
    return VerdictReport(name, str(rules.get("baseline")), candidates,
                         plan_id=next((s.plan_id for s in chosen if s.plan_id), None),
                         rules_hash=next((e.get("rules_hash") for e in events if e.get("rules_hash")), None),
                         question=next((e.get("question") for e in events if e.get("question")), None),
                         baseline_recorded=recorded)


def study_files(name: str, chosen: list[RunSummary]) -> dict[str, str]:
    """suffix -> the file's text, for each verdict output the study page offers."""
    report = study_report(name, chosen)
    return {output.download: output.text(report) for output in downloads() if output.download}


def study_downloads() -> list[dict[str, str]]:
    """suffix and title of each download, as the study page lists them."""
    return [{"suffix": o.download, "label": o.title} for o in downloads() if o.download]
