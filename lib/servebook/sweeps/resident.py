"""Resident rounds (`sweep --resident`): each interleaving round's runs launched at once on this machine, their
engines side by side, measuring in turn cell by cell (measure.turns), so the same cell of every candidate of the
round is measured within the same minute and the round, a block of the verdict's model, takes out the host's drift.

The engines must fit side by side: on a GPU, each candidate gives its engine a share of the memory (for vLLM,
`--kv-cache-memory-bytes` with a low `--gpu-memory-utilization`, which also spares concurrent starts vLLM's
device-wide memory profiling); a CPU engine's threads are idle while another seat measures."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Callable

from ..config.parameters import Seat
from ..config.study import Study, StudyEntry
from ..journal import Journal, utc_now
from ..measure.turns import release
from ..util.progress import Reporter
from .budget import TimeBudget
from .pending import SweepResult
from .placement import Lane
from .runner import Runner

Placed = tuple[int, StudyEntry, "Lane | None"]
#: one run of a round, given its seat: the sweep's skip check and the runner
RunSeated = Callable[[int, StudyEntry, "Lane | None", "Seat | None"], SweepResult]


def seated_run(runner: Runner, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
               lane: Lane | None, seat: Seat | None) -> SweepResult:
    """A run, seated only when it is in a resident round: a runner written before rounds takes no seat."""
    if seat is None:
        return runner.run(study, entry, journal, reporter, lane)
    return runner.run(study, entry, journal, reporter, lane, seat)


def rounds_of(placed: list[Placed], seats: int | None = None, baseline: str | None = None) -> list[list[Placed]]:
    """The interleaved order cut into rounds: a round ends where a candidate would come a second time, or, given
    `seats`, after that many runs (a candidate can then have several launches resident in one round, whose
    spread is the launch-to-launch noise within the round).

    With `seats` and the study's `baseline`, a round without a baseline run closes one seat early: the seat left is
    the baseline's (the sweep seats a companion run there). A round is a block of the verdict's model, and a round
    without the baseline compares its candidates with nothing: six 8B engines cut into rounds of the three an H100
    holds gave every other round no baseline (2026-12-06)."""
    if seats and baseline is not None:
        cut: list[list[Placed]] = []
        for item in placed:
            has_baseline = bool(cut) and any(entry.name == baseline for _, entry, _ in cut[-1])
            reserved = 0 if has_baseline or item[1].name == baseline else 1
            if not cut or len(cut[-1]) >= max(seats - reserved, 1):
                cut.append([])
            cut[-1].append(item)
        return cut
    if seats:
        return [placed[start:start + seats] for start in range(0, len(placed), seats)]
    out: list[list[Placed]] = []
    seen: set[str] = set()
    for item in placed:
        if not out or item[1].name in seen:
            out.append([])
            seen = set()
        out[-1].append(item)
        seen.add(item[1].name)
    return out


def round_id() -> str:
    return f"round-{utc_now().replace(':', '').replace('-', '')[:15]}-{uuid.uuid4().hex[:6]}"


def run_round(study: Study, journal: Journal, items: list[Placed], one: RunSeated, runner: Runner,
              advance: Callable[[], None] = lambda: None) -> list[SweepResult]:
    """One resident round: every run started at once in its own thread (a kernel each), seated in one round (its
    state in the journal's .sweeps folder). A seat is released when its run returns, however it ended, so no other
    seat waits for it."""
    if len(items) == 1:
        return [one(*items[0], None)]
    budget = runner if isinstance(runner, TimeBudget) else None
    if budget is not None:
        budget.admit_round(study, [entry for _, entry, _ in items], journal)
    name, directory = round_id(), journal.root / ".sweeps"
    seats = [Seat(round_id=name, directory=str(directory), seat=i, seats=len(items)) for i in range(len(items))]
    started = time.monotonic()

    def seated(index: int) -> SweepResult:
        try:
            return one(*items[index], seats[index])
        finally:
            release(seats[index])
            advance()

    with concurrent.futures.ThreadPoolExecutor(len(items), thread_name_prefix="servebook-seat") as executor:
        results = list(executor.map(seated, range(len(items))))
    if budget is not None:
        budget.round_took(time.monotonic() - started)
    return results
