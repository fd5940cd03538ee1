"""Host interference: how much CPU other processes used while a cell was measured, read from /proc.

A cell shares the host with whatever else runs there. Before and after every cell servebook reads
the host's busy CPU time (/proc/stat) and the CPU time of its own processes (this one, where the
client runs, and the engine's process tree); the difference is what others used. A cell during
which others used more than a threshold of CPU cores is marked disturbed, and so invalid: on the
2-core development machine a second busy engine made decode about 30 times slower.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_FOREIGN_CORES = 0.5
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
