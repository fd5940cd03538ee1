"""What a sweep still has to run: the one skip policy every runner and orchestration shares."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.study import Study, StudyEntry
from ..journal import Journal


@dataclass
class SweepResult:
    name: str
    candidate_id: str
    run_id: str | None
    status: str  # completed | failed | incomplete | skipped | error
    seconds: float
    message: str = ""


def counted_statuses(retry_failed: bool) -> tuple[str, ...]:
    """The runs that count as done: completed ones, and failed ones unless the user asks to retry them
    (a failed load is a record, not repeated)."""
    return ("completed",) if retry_failed else ("completed", "failed")


def recorded(study: Study, entry: StudyEntry, journal: Journal, repeat: int,
             retry_failed: bool) -> SweepResult | None:
    """The skip result for repeat `repeat` (0-based) of `entry`, or None when that repeat still has to run."""
    found = journal.find_all(entry.candidate.id, study.plan.id, statuses=counted_statuses(retry_failed))
    failed = [r for r in found if r.status == "failed"]
    if len(found) <= repeat and not failed:
        return None
    existing = failed[0] if failed else found[repeat]
    why = "a failed load is a record, not repeated" if failed else f"repeat {repeat + 1} recorded"
    return SweepResult(entry.name, entry.candidate.id, existing.run_id, "skipped", 0.0,
                       f"{why}: {existing.status} run {existing.run_id}")


def interleaved(study: Study, entries: list[StudyEntry]) -> list[tuple[int, StudyEntry]]:
    """(repeat, entry) in the order runs are made: A B C A B C ..., baseline included, so slow drift hits every
    candidate alike."""
    return [(repeat, entry) for repeat in range(study.repeats) for entry in entries]
