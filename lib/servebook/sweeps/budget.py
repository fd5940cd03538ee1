"""The time budget of a sweep (`--time-budget`): a run, or a resident round, starts only when the time left holds
what it is expected to take, so a machine lent for a fixed time ends a sweep between runs, never inside one; the
journal is the state, and the next sweep resumes there.

What a run is expected to take is read from what was recorded (issue 56, item 6: the first run always started,
even on a journal holding a run of that study longer than the budget): the longest completed run of this candidate
under this plan, else of any candidate under this plan, else the plan's own floor (`plan_floor_s`); and never less
than the longest run this sweep has made. A round's seats are launched at once and measure in turn: the longest
recorded round of as many seats, else its seats' runs one after another."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ..config.parameters import Seat
from ..config.plan import Plan
from ..config.study import Study, StudyEntry
from ..journal import Journal
from ..util.progress import Reporter
from .pending import SweepResult
from .placement import Lane
from .runner import Interruptible, Runner

#: the least a launch, its warm-up requests and sealing take with nothing measured (the simulator's engine is up in
#: about a second; a real model loads for longer): the part of a plan's floor no field of the plan states
LAUNCH_FLOOR_S = 5.0


class OutOfTime(Exception):
    """The sweep's time budget cannot hold another run; what ran is in `results`."""

    def __init__(self, message: str, results: list[SweepResult]):
        super().__init__(message)
        self.results = results


def plan_floor_s(plan: Plan) -> float:
    """The least a run of `plan` takes, from what the plan fixes: a launch, and the windows it waits out whatever
    the engine's speed (load windows with their warm-up, cells held to a minimum length, a replay's span)."""
    floor = LAUNCH_FLOOR_S
    if plan.decode is not None and plan.decode.min_cell_s:
        floor += plan.decode.min_cell_s * len(plan.decode.concurrency) * len(plan.decode.categories)
    if plan.prefill is not None and plan.prefill.min_cell_s:
        floor += plan.prefill.min_cell_s * len(plan.prefill.prompt_tokens)
    if plan.load is not None:
        floor += (plan.load.warmup_s + plan.load.duration_s) * len(plan.load.rates_rps)
    if plan.replay is not None and plan.replay.max_duration_s:
        floor += plan.replay.max_duration_s
    return floor


@dataclass(frozen=True)
class _Recorded:
    candidate_id: str | None
    seats: int
    seconds: float


def _recorded(journal: Journal, plan_id: str) -> list[_Recorded]:
    """The completed runs of this plan in the journal, with how long each took (launch to seal) and its round's size
    (1: a run on its own)."""
    frame = journal.index()
    out = []
    for run_id in frame[(frame["plan_id"] == plan_id) & (frame["status"] == "completed")]["run_id"]:
        manifest = journal.run(run_id).manifest
        if manifest is None or not manifest.started_at or not manifest.finished_at:
            continue
        span = datetime.fromisoformat(manifest.finished_at) - datetime.fromisoformat(manifest.started_at)
        seats = manifest.resident.seats if manifest.resident is not None else 1
        out.append(_Recorded(manifest.candidate_id, seats, span.total_seconds()))
    return out


@dataclass
class TimeBudget:
    """A runner that starts a run only while the budget can still hold it, with a margin (module docstring)."""

    runner: Runner
    seconds: float
    margin: float = 1.2
    clock: Callable[[], float] = time.monotonic
    results: list[SweepResult] = field(default_factory=list)
    _deadline: float = field(default=0.0, init=False)
    _longest: float = field(default=0.0, init=False)
    _longest_round: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._deadline = self.clock() + self.seconds

    def run(self, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
            lane: Lane | None = None, seat: Seat | None = None) -> SweepResult:
        if seat is None:  # a resident round is admitted whole (admit_round), its runs not one by one
            self._admit(entry.name, "a run", *self.expected(study, entry, journal))
        result = self.runner.run(study, entry, journal, reporter, lane, seat) if seat is not None else \
            self.runner.run(study, entry, journal, reporter, lane)
        with self._lock:
            if seat is None:
                self._longest = max(self._longest, result.seconds)
            self.results.append(result)
        return result

    def expected(self, study: Study, entry: StudyEntry, journal: Journal) -> tuple[float, str]:
        """How long a run of `entry` is expected to take, and where that estimate comes from."""
        alone = [r for r in _recorded(journal, study.plan.id) if r.seats == 1]
        own = [r.seconds for r in alone if r.candidate_id == entry.candidate.id]
        if own:
            seconds, source = max(own), f"the longest of its {len(own)} recorded runs"
        elif alone:
            seconds, source = max(r.seconds for r in alone), "the longest recorded run of this plan"
        else:
            seconds, source = plan_floor_s(study.plan), "no run of this plan recorded yet: the plan's floor"
        if self._longest > seconds:
            return self._longest, "the longest run of this sweep"
        return seconds, source

    def admit_round(self, study: Study, entries: list[StudyEntry], journal: Journal) -> None:
        """Start a resident round only when the time left holds it whole."""
        rounds = [r.seconds for r in _recorded(journal, study.plan.id) if r.seats == len(entries)]
        if rounds:
            seconds, source = max(rounds), f"the longest recorded round of {len(entries)} seats"
        else:
            seconds = sum(self.expected(study, entry, journal)[0] for entry in entries)
            source = "its seats' runs one after another, none recorded in a round of as many seats"
        if self._longest_round > seconds:
            seconds, source = self._longest_round, "the longest round of this sweep"
        self._admit(", ".join(entry.name for entry in entries), "a resident round", seconds, source)

    def _admit(self, names: str, what: str, seconds: float, source: str) -> None:
        left = self._deadline - self.clock()
        if left <= 0 or left < seconds * self.margin:
            raise OutOfTime(f"time budget: {max(left, 0):.0f} s left, and {what} is expected to take {seconds:.0f} s "
                            f"({source}); {names} and what follows wait for the next sweep", self.results)

    def interrupt(self) -> None:
        if isinstance(self.runner, Interruptible):
            self.runner.interrupt()

    def round_took(self, seconds: float) -> None:
        self._longest_round = max(self._longest_round, seconds)

    def close(self) -> None:
        self.runner.close()
