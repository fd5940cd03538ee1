"""Sharing a host's GPUs between candidates that run at once: disjoint groups, each a lane of the design."""

from __future__ import annotations

from ..config.study import StudyEntry
from ..util.errors import InputError
from ..util.progress import Reporter
from .placement import Lane, gpu_lanes


def gpus_needed(entry: StudyEntry) -> int:
    """A candidate's GPUs: tensor parallel size times replicas."""
    return entry.candidate.knobs.tensor_parallel_size * entry.candidate.launch.replicas


def gpu_lanes_for(entries: list[StudyEntry], parallel: str | int | None, gpus: list[int] | None,
                  reporter: Reporter) -> list[Lane] | None:
    """None for a serial sweep; else the lanes: disjoint groups of neighbouring GPUs, each as wide as the widest
    candidate, as many as `parallel` allows (sweeps.placement says which run goes where)."""
    if parallel in (1, "1", None):
        return None
    if parallel != "auto" and (not str(parallel).isdigit() or int(parallel) < 1):
        raise InputError(f"--parallel {parallel!r}: auto, or a number of candidates at once")
    if gpus is None:
        from ..launch.gpu_inventory import inventory

        gpus = [g.index for g in inventory().gpus]
    if not gpus:
        reporter.log("parallel: no GPUs on this host, so candidates run one at a time (engines sharing CPU cores "
                     "measure each other)")
        return None
    widest = max(gpus_needed(e) for e in entries)
    if widest > len(gpus):
        raise InputError(f"parallel: a candidate needs {widest} GPUs (tensor_parallel_size x replicas), the host "
                         f"has {len(gpus)} ({gpus})")
    at_once = len(gpus) // widest
    lanes = gpu_lanes(gpus, widest, at_once if parallel == "auto" else min(int(parallel), at_once))
    reporter.log(f"parallel: {len(lanes)} lanes ({'; '.join(lane.label for lane in lanes)}), each candidate's "
                 "runs placed on them in turn")
    return lanes
