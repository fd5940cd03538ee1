"""Sharing a host's GPUs between candidates that run at once, in disjoint groups."""

from __future__ import annotations

import threading

from ..config.study import StudyEntry
from ..util.errors import InputError
from ..util.progress import Reporter


def gpus_needed(entry: StudyEntry) -> int:
    """A candidate's GPUs: tensor parallel size times replicas."""
    return entry.candidate.knobs.tensor_parallel_size * entry.candidate.launch.replicas


class GpuPool:
    """GPUs handed out in disjoint groups: a candidate waits until enough of them are free."""

    def __init__(self, gpus: list[int], workers: int):
        self.free = sorted(gpus)
        self.workers = workers
        self._changed = threading.Condition()

    def acquire(self, count: int) -> list[int]:
        with self._changed:
            while True:
                group = self._contiguous(count)
                if group is not None:
                    self.free = [g for g in self.free if g not in group]
                    return group
                self._changed.wait()

    def _contiguous(self, count: int) -> list[int] | None:
        """Neighbouring indices first (they usually share a switch), else any free ones."""
        for start in range(len(self.free) - count + 1):
            window = self.free[start:start + count]
            if window[-1] - window[0] == count - 1:
                return window
        return self.free[:count] if len(self.free) >= count else None

    def release(self, group: list[int]) -> None:
        with self._changed:
            self.free = sorted(self.free + group)
            self._changed.notify_all()


def gpu_pool(entries: list[StudyEntry], parallel: str | int | None, gpus: list[int] | None,
             reporter: Reporter) -> GpuPool | None:
    """None for a serial sweep; else the GPUs to share out and how many candidates may run at once."""
    if parallel in (1, "1", None):
        return None
    if parallel != "auto" and (not str(parallel).isdigit() or int(parallel) < 1):
        raise InputError(f"--parallel {parallel!r}: auto, or a number of candidates at once")
    if gpus is None:
        from ..launch.gpus import inventory

        gpus = [g.index for g in inventory().gpus]
    if not gpus:
        reporter.log("parallel: no GPUs on this host, so candidates run one at a time (engines sharing CPU cores "
                     "measure each other)")
        return None
    widest = max(gpus_needed(e) for e in entries)
    if widest > len(gpus):
        raise InputError(f"parallel: a candidate needs {widest} GPUs (tensor_parallel_size x replicas), the host "
                         f"has {len(gpus)} ({gpus})")
    at_once = len(gpus) // min(gpus_needed(e) for e in entries)
    workers = at_once if parallel == "auto" else min(int(parallel), at_once)
    reporter.log(f"parallel: up to {workers} candidates at once on GPUs {gpus}")
    return GpuPool(gpus, workers)
