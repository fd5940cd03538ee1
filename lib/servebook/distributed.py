"""Studies across hosts through Ray: each (candidate, repeat) is a Ray task asking for as many GPUs as the
candidate's tensor parallel size times its replicas, so Ray sets its visible devices. With more than one node
that has the GPUs, each node is a lane of a balanced design (sweeps.placement): run r of entry i is pinned to
node (i + r) mod L, so every node holds a mix of candidates and the judge compares within nodes.

The task runs the same papermill notebook as a local sweep, on the worker, into the same journal: a
shared directory, or (across hosts) an object-store URL (`s3://...`), where each run is sealed by its
manifest arriving last. The driver judges once every run of the study is in. On Kubernetes, start the
cluster with KubeRay; on Slurm, with Ray's own `ray start` in the job script (see the README).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .config.candidate import Candidate
from .config.parameters import Seat
from .config.study import Study, StudyEntry
from .journal import Journal
from .sweeps import (
    QUALIFY_NOTEBOOK,
    PapermillRunner,
    SearchResult,
    SweepResult,
    check_study_fits,
    gpus_needed,
    run_pending,
    search,
)
from .sweeps.placement import Lane
from .util.errors import InputError
from .util.progress import Reporter


def _run_on_worker(study: dict[str, Any], entry_data: dict[str, Any], journal: str, kernel: dict[str, Any],
                   lane: str | None) -> dict[str, Any]:
    """Inside the Ray task: the candidate's notebook on the GPUs Ray gave this task, recorded on its lane. The entry
    travels whole: a search's configurations are not among the study's expanded candidates."""
    import ray

    loaded = Study.model_validate(study)
    entry = StudyEntry(entry_data["name"], Candidate.model_validate(entry_data["candidate"]), entry_data["overrides"])
    gpus = tuple(int(g) for g in ray.get_gpu_ids()) or None
    # One candidate per task: papermill owns its kernel (a kernel kept in a Ray worker would outlive the sweep).
    runner = PapermillRunner(**kernel, reuse=False)
    here = Lane(lane, gpus=gpus) if lane else (Lane("", gpus=gpus) if gpus else None)
    return asdict(runner.run(loaded, entry, Journal(journal), Reporter(quiet=True), here))


def node_lanes(nodes: list[dict[str, Any]], gpus: int) -> list[Lane]:
    """The live nodes with at least `gpus` GPUs (from `ray.nodes()`), one lane each, in a stable order."""
    usable = [n for n in nodes if n.get("Alive") and (n.get("Resources") or {}).get("GPU", 0) >= gpus]
    return [Lane(f"node {n.get('NodeManagerAddress') or n['NodeID'][:12]}", node=n["NodeID"])
            for n in sorted(usable, key=lambda n: n["NodeID"])]


@dataclass
class RayRunner:
    """A runner whose runs are Ray tasks: `run` submits one and waits for it, so a sweep's worker threads keep
    as many tasks in flight as it has workers, and Ray starts each where its GPUs are free."""

    kernel: dict[str, Any]
    _remote: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        import ray

        self._remote = ray.remote(_run_on_worker)  # once, before worker threads share it

    def run(self, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
            lane: Lane | None = None, seat: Seat | None = None) -> SweepResult:
        import ray

        if seat is not None:  # sweep() refuses --resident with Ray before this; kept so no caller drops it silently
            raise InputError("a resident round measures its runs in turn on one machine; Ray spreads runs over nodes")

        options: dict[str, Any] = {"num_gpus": gpus_needed(entry), "num_cpus": 1}
        if lane is not None and lane.node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(lane.node, soft=False)
        task = self._remote.options(**options).remote(
            study.model_dump(mode="json"), {"name": entry.name, "candidate": entry.candidate.model_dump(mode="json"),
                                            "overrides": entry.overrides}, journal.location, self.kernel,
            lane.label if lane is not None else None)
        try:
            result = SweepResult(**ray.get(task))
        except Exception as error:  # noqa: BLE001 - a lost worker is one failed entry, not a lost sweep
            result = SweepResult(entry.name, entry.candidate.id, None, "error", 0.0,
                                 f"{type(error).__name__}: {error}"[:600])
        reporter.log(f"candidate {result.name}: {result.status}" + (f" ({result.message})" if result.message else ""))
        return result

    def close(self) -> None:
        return None


def refuse_on_ray(given: dict[str, bool]) -> None:
    """Ray places a study's runs on its nodes at once, each on the GPUs Ray gives it: the sweep options that assume one
    machine, or a look at the verdicts between runs, are refused by name, never dropped."""
    dropped = [flag for flag, on in given.items() if on]
    if dropped:
        raise InputError(f"{', '.join(dropped)}: not with --ray (a cluster's runs are placed at once, each on the "
                         "GPUs Ray gives it); drop one of them")


def _connect(address: str | None, init: dict[str, Any] | None) -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install 'servebook[ray]' (or ray>=2.9) on the driver and the "
                         "workers") from None
    if not ray.is_initialized():
        ray.init(address=address, **(init or {}), log_to_driver=False)
    return ray


def search_on_ray(study: Study, journal: Journal, *, address: str | None = "auto", reporter: Reporter | None = None,
                  budget: int | None = None, kernel_name: str = "python3", start_timeout: int = 120,
                  execution_timeout: int | None = 3600, init: dict[str, Any] | None = None) -> "SearchResult":
    """A configuration search whose launches are Ray tasks: each screening round launches as many configurations
    as the cluster has GPUs for, and the confirmation's repeats run side by side."""
    ray = _connect(address, init)
    runner = RayRunner({"notebook": QUALIFY_NOTEBOOK, "kernel_name": kernel_name, "start_timeout": start_timeout,
                        "execution_timeout": execution_timeout})
    widest = max([gpus_needed(e) for e in study.expand()] or [1])
    width = max(1, int(ray.cluster_resources().get("GPU", 0)) // widest)
    result = search(study, journal, reporter=reporter, runner=runner, budget=budget, workers=width)
    journal.pull()
    return result


def sweep_on_ray(study: Study, journal: Journal, *, address: str | None = "auto", reporter: Reporter | None = None,
                 retry_failed: bool = False, kernel_name: str = "python3", start_timeout: int = 120,
                 execution_timeout: int | None = 3600, init: dict[str, Any] | None = None) -> list[SweepResult]:
    """Every (candidate, repeat) of `study` not yet recorded, as Ray tasks; the results once all are in.

    `address`: the cluster (`auto`, `ray://head:10001`); `init`: other `ray.init` arguments (a test starts a local
    cluster with `{"num_gpus": 4}` fake GPUs)."""
    reporter = reporter or Reporter()
    journal.ensure_writable()
    entries = study.expand()
    check_study_fits(study, entries)
    ray = _connect(address, init)
    runner = RayRunner({"notebook": QUALIFY_NOTEBOOK, "kernel_name": kernel_name, "start_timeout": start_timeout,
                        "execution_timeout": execution_timeout})
    reporter.log(f"ray: runs go to {ray.get_runtime_context().gcs_address}")
    started = time.monotonic()
    # Every pending run in flight at once (bounded): Ray queues them until GPUs are free.
    workers = max(1, min(64, len(entries) * study.repeats))
    lanes = node_lanes(ray.nodes(), max(gpus_needed(e) for e in entries))
    if len(lanes) > 1:
        reporter.log(f"ray: {len(lanes)} nodes as lanes ({'; '.join(lane.label for lane in lanes)}), each "
                     "candidate's runs placed on them in turn")
    results = run_pending(study, entries, journal, runner, reporter, retry_failed, workers=workers,
                          lanes=lanes if len(lanes) > 1 else None, title=f"sweep {study.name} on Ray")
    reporter.log(f"ray: {sum(r.status != 'skipped' for r in results)} runs in {time.monotonic() - started:.1f} s")
    journal.pull()  # what workers on other hosts sealed in a remote journal
    journal.index(write=True)
    return results
