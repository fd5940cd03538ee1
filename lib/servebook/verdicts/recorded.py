"""A baseline from the journal: the accepted runs of a configuration on this machine, instead of running it again.

The runs are chosen by fields of the index, never by a run's prose. A baseline recorded on another machine
or too long ago is refused with its reason, not used: a verdict against it would compare machines or months.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ..config.rules import RecordedBaseline
from ..config.slices import JournalSlice
from ..journal import Journal, RunRecord
from ..util.errors import InputError


@dataclass
class ChosenBaseline:
    records: list[RunRecord]
    machine: str
    engine_versions: list[str]

    def describe(self, spec: RecordedBaseline) -> str:
        ids = ", ".join(r.run_id for r in self.records)
        versions = ", ".join(self.engine_versions) or "not recorded"
        first, last = ((r.identity.started_at or "?")[:10] for r in (self.records[0], self.records[-1]))
        return (f"baseline: {len(self.records)} recorded run(s) of {spec.candidate} (engine {versions}; machine "
                f"{self.machine}; {first} to {last}), not interleaved with these runs, so any drift since then counts "
                f"as change: {ids}")


def _accepted_ids(records: list[RunRecord]) -> set[str]:
    """Runs some verdict accepted: each verdict event lists every run it judged."""
    accepted: set[str] = set()
    for record in records:
        event = record.latest_verdict
        if event and event.get("outcome") == "accepted":
            accepted.update(event.get("run_ids") or [record.run_id])
    return accepted


def _age_days(started_at: str | None, now: datetime) -> float:
    if not started_at:
        return float("inf")  # a run that does not say when it ran is as good as stale
    started = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    if started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    return (now - started).total_seconds() / 86400


def recorded_baseline(journal: Journal, spec: RecordedBaseline, plan_id: str, machine: str,
                      exclude: set[str], now: datetime | None = None) -> ChosenBaseline:
    """The recorded runs `spec` names under `plan_id` on `machine` (a host identity), leaving out the study's own
    runs (`exclude`). Raises InputError, with the reason, when none qualify."""
    now = now or datetime.now(timezone.utc)
    where = JournalSlice(candidate=spec.candidate, study=spec.study, plan_id=plan_id,
                         engine_version=spec.engine_version)
    rows = where.select(journal.index())
    rows = rows[~rows["run_id"].isin(exclude)]
    if rows.empty:
        raise InputError(f"verdict.baseline_from: no completed run of {where.describe()} in {journal.location}")
    here = rows[rows["machine"] == machine]
    if here.empty:
        elsewhere = ", ".join(sorted({str(m) for m in rows["machine"]}))
        raise InputError(f"verdict.baseline_from: {len(rows)} run(s) of {spec.candidate} are recorded, but on other "
                         f"machines ({elsewhere}), not on {machine}; a baseline from another machine would compare "
                         "machines, so it is refused: run the baseline here")
    records = [journal.run(run_id) for run_id in here["run_id"]]
    if spec.accepted_only:
        accepted = _accepted_ids(records)
        records = [r for r in records if r.run_id in accepted]
        if not records:
            raise InputError(f"verdict.baseline_from: no verdict accepted a run of {spec.candidate} on {machine} "
                             "(set accepted_only: false to use its runs anyway)")
    if spec.max_runs:
        records = records[-spec.max_runs:]
    age = _age_days(records[-1].identity.started_at, now)
    if age > spec.max_age_days:
        raise InputError(f"verdict.baseline_from: the newest accepted run of {spec.candidate} on this machine is "
                         f"{age:.0f} days old ({records[-1].run_id}), beyond max_age_days {spec.max_age_days:g}: "
                         "a stale baseline is refused; run the baseline again")
    versions = sorted({r.manifest.environment.engine_version for r in records
                       if r.manifest and r.manifest.environment.engine_version})
    return ChosenBaseline(records, machine, versions)
