"""Host interference: how much CPU other processes used while a cell was measured, read from /proc.

A cell shares the host with whatever else runs there. Before and after every cell servebook reads
the host's busy CPU time (/proc/stat) and the CPU time of its own processes (this one, where the
client runs, and the engine's process tree); the difference is what others used. A cell during
which others used more than a threshold of CPU cores is marked disturbed, and so invalid: on the
2-core development machine a second busy engine made decode about 30 times slower.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_FOREIGN_CORES = 0.5
#: the least foreign CPU a cell tolerates however little the run leaves idle: a quiet host's own housekeeping
#: (kernel threads, the shell, the journal's writes) and the error of reading it as the host's busy time less the
#: run's own: quiet cells of the sample journals read 0.0-0.33 cores beside a run using 1.2-2.2 (on 16 cores)
MIN_FOREIGN_CORES = 0.2
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuSample:
    t: float
    host_busy_s: float | None  # all CPUs, all processes (None where /proc/stat is not there)
    own_s: float  # this process and the engine's process tree
    #: time the hypervisor gave this machine's CPUs to someone else (a virtual machine's noisy neighbours)
    steal_s: float | None = None
    #: of own_s, the processes whose load is expected beside the run's own (a resident round's other seats);
    #: None where there are none
    seated_s: float | None = None


def _host_busy_s(proc: Path) -> tuple[float, float] | None:
    """(busy, steal) CPU seconds of all CPUs since boot."""
    try:
        fields = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    # user nice system idle iowait irq softirq steal ...: busy is everything but idle and iowait
    values = [int(v) for v in fields[1:9]]
    return (sum(values) - values[3] - values[4]) / _TICK, values[7] / _TICK


def cpu_probe_ms(rounds: int = 20_000) -> float:
    """The time of a fixed piece of pure-Python work on this process's CPU: the same work takes longer where the
    CPU runs slower (frequency, a busy sibling thread, a neighbour on the host), so beside each cell it is a
    covariate of every CPU-bound figure (a small model's decode is, on any GPU)."""
    started = time.perf_counter()
    total = 0
    for i in range(rounds):
        total += i * i % 7
    return (time.perf_counter() - started) * 1000


def engine_cpu_probe_ms(engine_pid: int | None, rounds: int = 20_000) -> float | None:
    """`cpu_probe_ms` run on the CPUs the engine is held to, one probe on each, their median (None: the engine is
    not held to fewer CPUs than this host has). The client is not held anywhere, so the plain probe times whichever
    CPU the client had, not the ones whose speed a CPU-bound engine step pays: on a lent H100 the plain probe
    explained part of vLLM's drift between rounds and none of its spread within one (2026-12-06)."""
    if engine_pid is None:
        return None
    try:
        held, mine = os.sched_getaffinity(engine_pid), os.sched_getaffinity(0)
    except OSError:  # the engine has gone
        return None
    if not held or held >= mine:
        return None
    times = []
    try:
        for cpu in sorted(held):
            os.sched_setaffinity(0, {cpu})  # this thread alone, for the probe's 2 ms
            times.append(cpu_probe_ms(rounds))
    except OSError:  # a CPU this client may not use, or one taken offline meanwhile
        return None
    finally:
        os.sched_setaffinity(0, mine)
    return statistics.median(times)


def _stat(proc: Path, pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of one process, or None if it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _tree(proc: Path, roots: set[int]) -> set[int]:
    """`roots` and all their descendants."""
    parents: dict[int, int] = {}
    for entry in proc.iterdir() if proc.is_dir() else []:
        if entry.name.isdigit():
            stat = _stat(proc, int(entry.name))
            if stat is not None:
                parents[int(entry.name)] = stat[0]
    members = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return members


def process_trees(roots: set[int], proc: Path = Path("/proc")) -> set[int]:
    """`roots` and every process below them (a resident round's other kernels and the engines they started)."""
    return _tree(proc, roots) if roots else set()


def own_processes(engine_pid: int | None, proc: Path = Path("/proc")) -> set[int]:
    """This process (the client, its threads included) and the engine's process tree. Not this process's other
    children: whatever else it started is someone else's load as far as the cell is concerned."""
    return {os.getpid()} | (_tree(proc, {engine_pid}) if engine_pid else set())


def pin_engine(engine_pid: int, cpus: list[int], proc: Path = Path("/proc")) -> int:
    """Hold every thread of the engine's process tree to `cpus` (threads started later inherit it); returns how many
    threads were pinned. Done once the engine serves, so its start still has every CPU."""
    pinned = 0
    for pid in _tree(proc, {engine_pid}):
        for task in (proc / str(pid) / "task").glob("*"):
            try:
                os.sched_setaffinity(int(task.name), cpus)
                pinned += 1
            except (OSError, ValueError):  # a thread that ended meanwhile
                continue
    return pinned


def cpu_sample(engine_pid: int | None, proc: Path = Path("/proc"), *,
               also_own: set[int] | frozenset[int] = frozenset()) -> CpuSample:
    """The host's busy CPU and this run's own (client, engine, and `also_own`: processes whose load is expected)."""
    own = seated = 0.0
    mine = own_processes(engine_pid, proc)
    for pid in mine | also_own:
        stat = _stat(proc, pid)
        used = stat[1] if stat else 0.0
        own += used
        seated += used if pid not in mine else 0.0
    host = _host_busy_s(proc)
    return CpuSample(time.monotonic(), host[0] if host else None, own, host[1] if host else None,
                     seated if also_own else None)


def foreign_cores(before: CpuSample, after: CpuSample) -> float | None:
    """CPU cores that other processes kept busy, on average, between two samples."""
    wall = after.t - before.t
    if before.host_busy_s is None or after.host_busy_s is None or wall <= 0:
        return None
    foreign = (after.host_busy_s - before.host_busy_s) - (after.own_s - before.own_s)
    return max(0.0, foreign) / wall


def own_cores(before: CpuSample, after: CpuSample) -> float | None:
    """CPU cores the run's own processes (client, engine, a round's other seats) kept busy between two samples."""
    wall = after.t - before.t
    return max(0.0, after.own_s - before.own_s) / wall if wall > 0 else None


@dataclass(frozen=True)
class ForeignLimit:
    """How much CPU other processes may use during a cell before it counts as disturbed, and why that much."""

    cores: float
    basis: str

    @classmethod
    def of(cls, configured: float | None, own: float | None, host: int | None) -> "ForeignLimit":
        """The plan's limit where it sets one; else half the cores the run left idle, within [MIN_FOREIGN_CORES,
        DEFAULT_MAX_FOREIGN_CORES]. What disturbs a run is foreign load competing for the CPUs it needs, so the
        same 0.4 foreign cores are harmless beside an engine using one core of sixteen and take a CPU from one
        using 1.7 of two: on the 2-core machine a baseline run whose cells saw 0.39-0.47 foreign cores, under a
        fixed 0.5, decoded at 142-154 tok/s against its clean sibling's 262-269 (2026-12-07, issue 55). Half the
        idle cores, since the load is bursty: an average of half means peaks that took the rest."""
        if configured is not None:
            return cls(configured, "the plan's max_foreign_cpu_cores")
        if own is None or not host:
            return cls(DEFAULT_MAX_FOREIGN_CORES, "the default")
        idle = max(0.0, host - own)
        cores = min(DEFAULT_MAX_FOREIGN_CORES, max(MIN_FOREIGN_CORES, idle / 2))
        return cls(cores, f"half the {idle:.2f} of {host} cores this run left idle, within "
                          f"[{MIN_FOREIGN_CORES:g}, {DEFAULT_MAX_FOREIGN_CORES:g}]")


def thread_ticks(engine_pid: int | None, proc: Path = Path("/proc")) -> dict[int, tuple[int, int, int]]:
    """Every thread of the engine's process tree: tid -> (its process, CPU ticks used, CPU last run on)."""
    out: dict[int, tuple[int, int, int]] = {}
    for pid in _tree(proc, {engine_pid}) if engine_pid else ():
        for task in (proc / str(pid) / "task").glob("*/stat"):
            try:
                text = task.read_text()
                fields = text[text.rindex(")") + 2:].split()
                out[int(task.parent.name)] = (pid, int(fields[11]) + int(fields[12]), int(fields[36]))
            except (OSError, ValueError, IndexError):
                continue
    return out


def busiest_thread_cpus(engine_pid: int | None, proc: Path = Path("/proc"),
                        since: dict[int, tuple[int, int, int]] | None = None) -> str | None:
    """The CPU each of the engine's processes ran its busiest thread on ("3,11"), read at a cell's end: where the
    engine's CPU-bound step runs, beside the covariates (None where servebook does not know the engine). `since`
    (thread_ticks at the cell's start): busiest by the ticks used during the cell, and a process none of whose
    threads ran is left out, since the CPU it last ran on dates from before the cell (before a pin, say)."""
    if not engine_pid:
        return None
    busiest: dict[int, tuple[int, int]] = {}
    for tid, (pid, ticks, cpu) in thread_ticks(engine_pid, proc).items():
        used = ticks - since[tid][1] if since is not None and tid in since else ticks
        if (since is None or used > 0) and (pid not in busiest or used > busiest[pid][0]):
            busiest[pid] = (used, cpu)
    return ",".join(str(c) for c in sorted({cpu for _, cpu in busiest.values()})) or None


def _cpu_list(text: str) -> frozenset[int]:
    """ "0-3,8,10-11" (the kernel's list format) -> {0, 1, 2, 3, 8, 10, 11}."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if low:
            cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def allowed_cpus(pid: int, proc: Path = Path("/proc")) -> frozenset[int] | None:
    """The CPUs a process may run on (its affinity, as the kernel lists it); None if it is gone."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return _cpu_list(line.partition(":")[2])
    except (OSError, ValueError):
        return None
    return None


def host_cpus(proc: Path = Path("/proc")) -> int | None:
    """How many CPUs the host has online (the per-CPU lines of /proc/stat)."""
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    return sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit()) or None


class SeatContention:
    """How many cores a resident round's other seats kept busy on the CPUs the measured engine is held to, counted
    only while this engine measures: between a sliced cell's slices the others measure, on their own turn.

    Seats held to the same CPUs as the measured engine take those CPUs from it: idle SGLang 0.5.17 engines poll
    about a core each, and six of them held to the measured engine's three CPUs left it a third of its decode
    (2026-12-06). A seat that may also run elsewhere counts with the share of its CPUs that are the engine's (its
    load taken as spread evenly over them); none counts where the engine is not held (it may run on any CPU)."""

    def __init__(self, engine_pid: int | None, seated: set[int], proc: Path = Path("/proc"),
                 clock: Callable[[], float] = time.monotonic):
        self.proc, self.clock = proc, clock
        self.weights: dict[int, float] = {}
        held = allowed_cpus(engine_pid, proc) if engine_pid and seated else None
        # not checked where there are no other seats, or the engine's processes are not servebook's to read
        self.checked = held is not None
        total = host_cpus(proc)
        if held and total and len(held) < total:
            for pid in seated:
                theirs = allowed_cpus(pid, proc)
                if theirs and theirs & held:
                    self.weights[pid] = len(theirs & held) / len(theirs)
        self.busy_s = self.wall_s = 0.0
        self._mark: tuple[float, dict[int, float]] | None = None

    def _used(self) -> dict[int, float]:
        used = {}
        for pid in self.weights:
            stat = _stat(self.proc, pid)
            if stat is not None:
                used[pid] = stat[1]
        return used

    def resume(self) -> None:
        """This engine measures again."""
        self._mark = (self.clock(), self._used())

    def pause(self) -> None:
        """This engine stops measuring (a slice ended, or the cell): the interval since `resume` counts."""
        if self._mark is None:
            return
        started, before = self._mark
        after = self._used()
        self.wall_s += self.clock() - started
        # a seat that ended meanwhile drops out: never below 0
        self.busy_s += sum(self.weights[pid] * max(0.0, after[pid] - before[pid]) for pid in after if pid in before)
        self._mark = None

    def cores(self) -> float | None:
        """None where not checked (no other seats, or an engine servebook did not start)."""
        if not self.checked:
            return None
        return self.busy_s / self.wall_s if self.wall_s > 0 else 0.0


def seated_cores(before: CpuSample, after: CpuSample) -> float | None:
    """CPU cores the expected neighbours (a resident round's other seats) kept busy, on average, between two
    samples; None where there were none. A neighbour that ended meanwhile drops out of `after`: never below 0."""
    wall = after.t - before.t
    if wall <= 0 or before.seated_s is None or after.seated_s is None:
        return None
    return max(0.0, after.seated_s - before.seated_s) / wall


def steal_cores(before: CpuSample, after: CpuSample) -> float | None:
    """CPU cores the hypervisor took from this machine, on average, between two samples."""
    wall = after.t - before.t
    if before.steal_s is None or after.steal_s is None or wall <= 0:
        return None
    return max(0.0, after.steal_s - before.steal_s) / wall


def telemetry_rows(cell_id: str, before: CpuSample, after: CpuSample) -> list[dict]:
    return [{"cell_id": cell_id, "phase": phase, "t": s.t, "source": "host", "host_busy_cpu_s": s.host_busy_s,
             "own_cpu_s": s.own_s, "host_steal_cpu_s": s.steal_s} for phase, s in (("before", before), ("after", after))]
