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
from ..measure.turns import release, stop_round
from ..util.errors import RunInterrupted
from ..util.progress import Reporter
from .budget import TimeBudget
from .pending import SweepResult
from .placement import Lane
from .runner import Interruptible, Runner, what_became

Placed = tuple[int, StudyEntry, "Lane | None"]
#: how long the seats of a round stopped by Ctrl-C may take to stop their engines and seal their runs
STOP_S = 30.0
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
    seat waits for it. Ctrl-C stops every seat's run (RunInterrupted, saying what became of each)."""
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

    executor = concurrent.futures.ThreadPoolExecutor(len(items), thread_name_prefix="servebook-seat")
    futures = [executor.submit(seated, index) for index in range(len(items))]
    stopped = False
    try:
        results = [future.result() for future in futures]
    except KeyboardInterrupt:
        stopped = True
        raise _stopped(seats[0], runner, journal, futures, [entry.name for _, entry, _ in items]) from None
    finally:
        executor.shutdown(wait=not stopped)  # a seat that raised: the others end their runs, as they always did
    if budget is not None:
        budget.round_took(time.monotonic() - started)
    return results


def _stopped(seat: Seat, runner: Runner, journal: Journal, futures: list[concurrent.futures.Future[SweepResult]],
             names: list[str]) -> RunInterrupted:
    """Ctrl-C in a round. It reaches the sweep's thread only: the seats' kernels are processes of their own, out of
    the terminal's reach. So the round is marked stopped (no seat takes another step, or launches), every kernel
    in a cell is interrupted (its run stops its engine and is sealed `interrupted`), and the seats are waited for,
    STOP_S at most; what became of each run is said."""
    stop_round(seat)
    if isinstance(runner, Interruptible):
        runner.interrupt()
    try:
        concurrent.futures.wait(futures, timeout=STOP_S)
    except KeyboardInterrupt:  # a second Ctrl-C: what has not stopped yet is stopped with the sweep's kernels
        pass
    said = []
    for future, name in zip(futures, names, strict=True):
        if not future.done():
            said.append(f"{name}: still stopping; its kernel and engine are stopped with the sweep")
        elif (error := future.exception()) is not None:
            said.append(f"{name}: {type(error).__name__}: {error}")
        else:
            said.append(what_became(journal, name, future.result().run_id))
    return RunInterrupted("resident round stopped: " + "; ".join(said))
