"""A sweep: every study candidate's repeats, interleaved, through a runner; then, on request, more runs where
verdicts are undecided. The journal is the state, so an interrupted sweep resumes where it stopped.

`orchestration` is the one envelope of every way of running a study (serial, GPU lanes, resident rounds, Ray, a
search): the runner's capabilities checked against the options, placement, a time budget, release and index."""

from __future__ import annotations

import collections
import concurrent.futures
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..config.parameters import Seat
from ..config.study import Study, StudyEntry
from ..engines import get_engine
from ..journal import Journal
from ..util.errors import InputError
from ..util.progress import Reporter
from .budget import OutOfTime, TimeBudget
from .gpu_lanes import gpu_lanes_for
from .options import Placement, PlacesItself, SweepOptions, capabilities_of, refuse_unsupported
from .pending import SweepResult, interleaved, recorded
from .placement import Lane, lane_for, place
from .resident import Placed, rounds_of, run_round, seated_run
from .runner import PapermillRunner, Runner

T = TypeVar("T")

if TYPE_CHECKING:
    from ..verdicts import Judged


def check_study_fits(study: Study, entries: list[StudyEntry]) -> None:
    """Before any engine starts: a plan that cannot fit a candidate stops the sweep here."""
    for entry in entries:
        get_engine(entry.candidate.engine).check_plan_fits(entry.candidate, study.plan)


def sweep(study: Study, journal: Journal, options: SweepOptions | None = None, *, runner: Runner | None = None,
          reporter: Reporter | None = None, **flags: Any) -> list[SweepResult]:
    """`study.repeats` runs per candidate not yet recorded under the study's plan, interleaved; failures go on.
    With `max_repeats`, then add repeats where verdicts are undecided until decided. Every way of running a study
    comes through here: `runner` executes each run (default: papermill on kept kernels; distributed.RayRunner on a
    cluster; ModelledRunner in tests), and an option the runner cannot honour is refused by its flag.

    `options` (sweeps.options.SweepOptions; `flags` set its fields for short, as `max_repeats=6`):
    `parallel`: 1 runs one candidate at a time; "auto" (or a number) runs candidates at once on disjoint groups of
    the host's GPUs (`gpus`, default what nvidia-smi lists), each group as wide as the candidate's tensor
    parallel size times its replicas. A host without GPUs stays serial under "auto": two engines sharing CPU
    cores measure each other. `time_budget_s`: start no run the time left cannot hold (a lent machine's limit);
    the next sweep resumes. `resident`: each round's runs launched at once on this machine and measured in turn,
    cell by cell (sweeps.resident), so the host's drift falls on every candidate of a round alike; `seats`: engines
    resident at once (default: one of each candidate)."""
    options = replace(options or SweepOptions(), **flags)
    max_repeats = options.max_repeats
    if max_repeats is not None and study.verdict.max_runs != max_repeats:
        # A sequential design: its verdicts spend their error over the looks up to max_repeats runs.
        study = study.model_copy(update={"verdict": study.verdict.model_copy(update={"max_runs": max_repeats})})
    entries = study.expand()
    with orchestration(study, entries, journal, runner or PapermillRunner(), options, reporter) as run:
        try:
            results = run.pending(study, entries)
            if max_repeats is not None:
                results += run.until_decided(study, max_repeats)
        except OutOfTime as stop:
            run.reporter.log(str(stop))
            results = stop.results
    return results


@dataclass
class Orchestration:
    """One study's runs through one runner, placed: what a sweep and a search share; each decides what to run."""

    journal: Journal
    runner: Runner
    reporter: Reporter
    options: SweepOptions
    placement: Placement
    sealed_elsewhere: bool = False

    def pending(self, study: Study, entries: list[StudyEntry], title: str | None = None) -> list[SweepResult]:
        """Every (repeat, entry) of `study` not yet recorded (run_pending), on this orchestration's lanes."""
        return run_pending(study, entries, self.journal, self.runner, self.reporter, self.options.retry_failed,
                           lanes=self.placement.lanes, workers=self.placement.workers, title=title,
                           resident=self.options.residents, seats=self.options.seats)

    def placed(self, study: Study, placed: list[Placed], advance: Callable[[], None]) -> list[SweepResult]:
        """Runs already placed (a search's screening picks), `workers` at a time."""
        return run_placed(placed, lambda _, entry, lane: self.runner.run(study, entry, self.journal, self.reporter,
                                                                           lane), advance, self.placement.workers)

    def until_decided(self, study: Study, max_repeats: int) -> list[SweepResult]:
        return until_decided(study, self.journal, self.runner, self.reporter, max_repeats,
                             lanes=self.placement.lanes, resident=self.options.residents, seats=self.options.seats,
                             workers=self.placement.workers, pull=self.sealed_elsewhere)


@contextmanager
def orchestration(study: Study, entries: list[StudyEntry], journal: Journal, runner: Runner, options: SweepOptions,
                  reporter: Reporter | None = None, *, only: set[str] | None = None,
                  what: str = "") -> Iterator[Orchestration]:
    """Before any engine starts: the options checked against the runner (and against `only`, the flags this way of
    running takes), the journal writable, every candidate's fit to `study`'s plan, the runs placed (where the runner
    places them, else on this host's GPU lanes); then, once the caller's runs are done, the runner released, the
    journal pulled where runs were sealed on other hosts, and indexed."""
    refuse_unsupported(options, runner, only=only, what=what)
    reporter = reporter or Reporter()
    journal.ensure_writable()
    if options.residents:
        check_resident(journal, options.parallel)
    check_study_fits(study, entries)
    placement = runner.placement(entries, reporter) if isinstance(runner, PlacesItself) else \
        Placement(gpu_lanes_for(entries, options.parallel, options.gpus, reporter))
    elsewhere = capabilities_of(runner).sealed_elsewhere
    if options.time_budget_s is not None:
        runner = TimeBudget(runner, options.time_budget_s)
    try:
        yield Orchestration(journal, runner, reporter, options, placement, elsewhere)
    finally:
        runner.close()
    if elsewhere:
        journal.pull()  # what workers on other hosts sealed in a remote journal
    journal.index(write=True)


def run_pending(study: Study, entries: list[StudyEntry], journal: Journal, runner: Runner, reporter: Reporter,
                retry_failed: bool, *, lanes: list[Lane] | None = None, workers: int = 1,
                title: str | None = None, resident: bool = False, seats: int | None = None) -> list[SweepResult]:
    """Every (repeat, entry) not yet recorded, in interleaved order. On `lanes` (sweeps.placement): each run on
    the lane the cyclic design gives it, GPU lanes one run at a time each, node lanes `workers` at a time.
    `resident`: the runs still to make, round by round, each round's runs resident at once (sweeps.resident)."""
    order = interleaved(study, entries)
    placed: list[Placed] = list(place(order, entries, lanes)) if lanes else [(r, e, None) for r, e in order]

    def skipped(repeat: int, entry: StudyEntry) -> SweepResult | None:
        result = recorded(study, entry, journal, repeat, retry_failed)
        if result is not None:
            reporter.log(f"skip {entry.name} (repeat {repeat + 1}/{study.repeats}): {result.message}")
        return result

    def one(repeat: int, entry: StudyEntry, lane: Lane | None, seat: Seat | None = None) -> SweepResult:
        result = skipped(repeat, entry) if seat is None else None
        if result is None:
            where = f" on {lane.label}" if lane is not None else f", seat {seat.seat + 1} of {seat.seats}" if seat else ""
            count = f"repeat {repeat + 1} of {study.repeats}" if repeat < study.repeats else \
                f"run {repeat + 1} (the study plans {study.repeats})"
            reporter.log(f"{entry.name}: {count}{where}")
            return seated_run(runner, study, entry, journal, reporter, lane, seat)
        return result

    label = title or f"sweep {study.name}: {len(entries)} candidates x {study.repeats} repeats"
    with reporter.task(label, total=len(placed), unit="runs") as task:
        if not resident and (lanes or workers > 1):
            return run_placed(placed, one, task.advance, workers)
        if not resident:  # one run at a time: the verdicts so far after each round, not only at the end
            return _serial_rounds(study, journal, reporter, placed, one, task.advance)
        done = {i: result for i, (repeat, entry, _) in enumerate(placed)
                if (result := skipped(repeat, entry)) is not None}
        for _ in done:
            task.advance()
        todo = [i for i in range(len(placed)) if i not in done]
        seated = _round_indices(placed, todo, seats, study.verdict.baseline_entry)
        companions: list[SweepResult] = []
        for number, indices in enumerate(seated, 1):
            items = [placed[i] for i in indices]
            results = run_round(study, journal, with_companion(study, entries, journal, items, seats, reporter), one,
                                runner, planned_ticks(task.advance, len(indices)))
            done.update(zip(indices, results[:len(indices)], strict=True))
            companions += results[len(indices):]
            if number < len(seated):
                interim_verdicts(study, journal, reporter, f"after resident round {number} of {len(seated)}")
        return [done[i] for i in range(len(placed))] + companions


def baseline_companion(study: Study, entries: list[StudyEntry], journal: Journal, items: list[Placed],
                       seats: int | None) -> list[Placed]:
    """A baseline run for a resident round that holds none, where a seat is free: the round is a block of the verdict's
    model, and a block without the baseline holds no comparison (a candidate's run that failed in its round and is made
    again alone, 2026-12-06, was such a round: a launch spent for nothing)."""
    name = study.verdict.baseline_entry
    baseline = next((entry for entry in entries if entry.name == name), None)
    if baseline is None or any(entry.name == name for _, entry, _ in items) or (seats and len(items) >= seats):
        return []
    recorded_runs = sum(1 for record in journal.runs() if record.manifest is not None
                        and record.manifest.study == study.name and record.manifest.study_entry == name)
    return [(recorded_runs, baseline, items[0][2])]


def planned_ticks(advance: Callable[[], None], planned: int) -> Callable[[], None]:
    """`advance` for the first `planned` calls only: a round's companion run is beyond the sweep's planned total."""
    ticks = iter(range(planned))

    def tick() -> None:
        if next(ticks, None) is not None:
            advance()
    return tick


def with_companion(study: Study, entries: list[StudyEntry], journal: Journal, items: list[Placed],
                   seats: int | None, reporter: Reporter) -> list[Placed]:
    """A resident round's runs, with the baseline's companion run where it needs one (said in the log)."""
    companion = baseline_companion(study, entries, journal, items, seats)
    if companion:
        reporter.log(f"{companion[0][1].name}: one more run, seated beside "
                     f"{', '.join(entry.name for _, entry, _ in items)}: a round without the baseline compares nothing")
    return items + companion


def _serial_rounds(study: Study, journal: Journal, reporter: Reporter, placed: list[Placed],
                   one: Callable[[int, StudyEntry, Lane | None], SweepResult],
                   advance: Callable[[], None]) -> list[SweepResult]:
    """Round by round, one run at a time. In the first round each candidate's first look is said as soon as its run
    is sealed (a newcomer's demo shows a verdict within minutes, not after every candidate ran once); after each
    later round, every candidate's verdict so far."""
    rounds = rounds_of(placed)
    results: list[SweepResult] = []
    for number, items in enumerate(rounds, 1):
        if number == 1 and len(rounds) > 1:
            for item in items:
                results += run_placed([item], one, advance)
                if results[-1].status != "skipped":
                    interim_verdicts(study, journal, reporter, "so far, after its first run", only={item[1].name})
            continue
        results += run_placed(items, one, advance)
        if number < len(rounds) and any(r.status != "skipped" for r in results[-len(items):]):
            interim_verdicts(study, journal, reporter, f"after round {number} of {len(rounds)}")
    return results


def interim_verdicts(study: Study, journal: Journal, reporter: Reporter, when: str,
                     only: set[str] | None = None) -> None:
    """Each candidate's verdict on the runs so far (or those `only` names), one line each and nothing recorded: a
    reader of a long sweep sees where it is heading (the final verdicts, recorded, come when it ends)."""
    from ..verdicts import judge
    from ..verdicts.gate import deciding

    if study.verdict.baseline_entry is None:
        return
    lines = []
    for item in judge(study, journal, append=False):
        if item.verdict is None or item.entry.name == study.verdict.baseline_entry or \
                (only is not None and item.entry.name not in only):
            continue
        cell = deciding(item.verdict) if item.verdict.comparisons else None
        why = cell.text() if cell is not None else (item.verdict.reasons[0] if item.verdict.reasons else "")
        runs = len(item.records)
        lines.append(f"  {item.entry.name}: {item.verdict.outcome} ({runs} run{'s' if runs != 1 else ''})"
                     + (f": {why}" if why else ""))
    if lines:
        what = "verdict" if only is not None and len(lines) == 1 else "verdicts"
        reporter.log(f"{what} {when} (not recorded; the sweep records them at its end):\n" + "\n".join(lines))


def _round_indices(placed: list[Placed], todo: list[int], seats: int | None,
                   baseline: str | None) -> list[list[int]]:
    """The runs still to make, cut into resident rounds (a candidate once per round, or `seats` runs each, a seat
    kept for the baseline in a round that has none)."""
    rounds = rounds_of([placed[i] for i in todo], seats, baseline)
    it = iter(todo)
    return [[next(it) for _ in items] for items in rounds]


def check_resident(journal: Journal, parallel: str | int) -> None:
    """A resident round needs one machine and the journal on its disk (the round's turns live beside it)."""
    if journal.url:
        raise InputError("--resident: the journal must be a local directory (the round's seats meet in it)")
    if parallel not in (1, "1"):
        raise InputError("--resident runs each round's candidates side by side on one machine; "
                         "it cannot be combined with --parallel")


def run_placed(placed: list[Placed], one: Callable[[int, StudyEntry, Lane | None], SweepResult],
               advance: Callable[[], None], workers: int = 1) -> list[SweepResult]:
    """`one` for each placed run, results in `placed` order: on GPU lanes a worker per lane, each lane's runs in
    order; otherwise `workers` at a time (1: in order, in this thread)."""
    def done(item: Placed) -> SweepResult:
        result = one(*item)
        advance()
        return result

    gpu_lanes = sorted({lane for _, _, lane in placed if lane is not None and lane.gpus is not None},
                       key=lambda lane: lane.label)
    if gpu_lanes:
        def lane_queue(lane: Lane) -> list[tuple[int, SweepResult]]:
            return [(i, done(item)) for i, item in enumerate(placed) if item[2] == lane]

        with concurrent.futures.ThreadPoolExecutor(len(gpu_lanes), thread_name_prefix="servebook-lane") as executor:
            finished = dict(pair for future in [executor.submit(lane_queue, lane) for lane in gpu_lanes]
                            for pair in future.result())
        return [finished[i] for i in range(len(placed))]
    if workers <= 1:
        return [done(item) for item in placed]
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="servebook-sweep") as executor:
        return list(executor.map(done, placed))


def baseline_target(open_candidates: int, most_runs: int, max_repeats: int) -> int:
    """Runs the baseline should have once `open_candidates` undecided candidates have their next run (the most of
    them then `most_runs` + 1): every comparison uses the baseline, so it earns about sqrt(k) times the runs of
    one of k candidates (the many-to-one optimum), within twice the budget of a candidate."""
    return min(2 * max_repeats, math.ceil(math.sqrt(open_candidates) * (most_runs + 1)))


def spread(runs: list[T], extra: T, count: int) -> list[T]:
    """`count` copies of `extra` spread evenly through `runs` (the first leading): the baseline catches up with its
    target in one round, and its runs still interleave with the candidates'."""
    if not runs:
        return [extra] * count
    before = collections.Counter(k * len(runs) // count for k in range(count))
    return [x for i, run in enumerate(runs) for x in [extra] * before[i] + [run]]


def until_decided(study: Study, journal: Journal, runner: Runner, reporter: Reporter,
                  max_repeats: int, *, lanes: list[Lane] | None = None, resident: bool = False,
                  seats: int | None = None, workers: int = 1, pull: bool = False) -> list[SweepResult]:
    """One more run for every undecided candidate (and the baseline, more often than any one of them), interleaved,
    until every verdict is decided or `max_repeats` runs each are spent. The study's verdicts spend their error
    over these looks (verdict.max_runs), so looking after every run does not inflate it. `workers`: runs at once
    off GPU lanes (a cluster's); `pull`: the journal brought up to date before each look (runs sealed elsewhere)."""
    from ..verdicts import judge

    results: list[SweepResult] = []
    baseline = study.verdict.baseline_entry  # None: recorded runs are the baseline, none is added
    while True:
        if pull:
            journal.pull()
        judged = judge(study, journal, append=False)
        open_ = [j for j in judged if j.verdict is not None and j.verdict.undecided]
        undecided = [j for j in open_ if len(j.records) < max_repeats]
        if not undecided:
            reporter.log(f"undecided verdicts remain ({', '.join(j.entry.name for j in open_)}), but their candidates "
                         f"have {max_repeats} runs (--max-repeats)" if open_ else "every verdict is decided")
            return results
        names = {j.entry.name for j in undecided}
        index, base = next(((i, j) for i, j in enumerate(judged) if j.entry.name == baseline), (-1, None))
        short = 0 if base is None else \
            baseline_target(len(undecided), max(len(j.records) for j in undecided), max_repeats) - len(base.records)
        reporter.log(f"inconclusive: {', '.join(sorted(names))}; one more run of each"
                     + (f", {short} more of {baseline}" if short > 0 else ""))

        def placed(i: int, item: Judged, repeat: int) -> Placed:
            return repeat, item.entry, lane_for(i, repeat, lanes) if lanes else None

        # Study order, so the added runs interleave like the first ones; each on the lane that continues its cycle.
        candidates: list[Placed | None] = [placed(i, item, len(item.records)) for i, item in enumerate(judged)
                                           if item.entry.name in names]
        if base is None:
            added = [item for item in candidates if item is not None]
        else:
            baseline_repeats = iter(range(len(base.records), len(base.records) + max(short, 0)))
            added = [item or placed(index, base, next(baseline_repeats))
                     for item in spread(candidates, None, max(short, 0))]
        if resident:  # the added runs are the next rounds, each no larger than the study's first ones
            room = seats or len(study.expand())
            for items in rounds_of(added, room, baseline):
                # a lone undecided candidate's next run, the baseline's runs already enough, would be a round of
                # its own: a block that holds no comparison
                results += run_round(study, journal,
                                     with_companion(study, [j.entry for j in judged], journal, items, room, reporter),
                                     lambda _, entry, lane, seat: seated_run(runner, study, entry, journal, reporter,
                                                                             lane, seat), runner)
        else:
            results += run_placed(added, lambda _, entry, lane: runner.run(study, entry, journal, reporter, lane),
                                  lambda: None, workers)
