"""Studies across hosts through Ray: each (candidate, repeat) is a Ray task asking for as many GPUs as the
candidate's tensor parallel size times its replicas, so Ray sets its visible devices. With more than one node
that has the GPUs, each node is a lane of a balanced design (sweeps.placement): run r of entry i is pinned to
node (i + r) mod L, so every node holds a mix of candidates and the judge compares within nodes.

The task runs the same papermill notebook as a local sweep, on the worker, into the same journal: a
shared directory, or (across hosts) an object-store URL (`s3://...`), where each run is sealed by its
manifest arriving last. The runner is one of the sweep's (sweeps.orchestrate): `sweep` and `search` run through it
like any other, the driver pulls the journal before it reads verdicts (`--until-decided` looks between rounds) and
judges once every run of the study is in; what Ray cannot honour (one machine's GPU groups, resident rounds, a time
budget) is refused by its flag, from the capabilities it declares. On Kubernetes, start the
cluster with KubeRay; on Slurm, with Ray's own `ray start` in the job script (see docs/guide/scale.md).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from .config.candidate import Candidate
from .config.parameters import Seat
from .config.study import Study, StudyEntry
from .journal import Journal
from .sweeps import PapermillRunner, SweepResult, gpus_needed
from .sweeps.options import Capabilities, Placement
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
    """A runner whose runs are Ray tasks: `run` submits one and waits for it, so the sweep's worker threads keep as
    many tasks in flight as the cluster can run at once, in the study's interleaved order, and Ray starts each where
    its GPUs are free. `address`: the cluster (`auto`, `ray://head:10001`); `init`: other `ray.init` arguments (a
    test starts a local cluster with `{"num_gpus": 4}` fake GPUs); `kernel`: PapermillRunner's settings on the
    workers (kernel_name, execution_timeout, ...)."""

    kernel: dict[str, Any] = field(default_factory=dict)
    address: str | None = "auto"
    init: dict[str, Any] | None = None
    #: what the orchestration may ask of a cluster: the verdicts between runs, yes; one machine's options, no
    capabilities: ClassVar[Capabilities] = Capabilities(
        flag="--ray", why="a cluster's runs are placed at once, each on the GPUs Ray gives it", gpu_lanes=False,
        resident=False, time_budget=False, sealed_elsewhere=True)
    _remote: Any = field(default=None, init=False, repr=False)
    _started: float = field(default=0.0, init=False, repr=False)
    _runs: int = field(default=0, init=False, repr=False)
    _reporter: Reporter | None = field(default=None, init=False, repr=False)

    def _connected(self) -> Any:
        ray = _connect(self.address, self.init)
        if self._remote is None:
            self._remote = ray.remote(_run_on_worker)  # once, before worker threads share it
            self._started = time.monotonic()
        return ray

    def placement(self, entries: list[StudyEntry], reporter: Reporter) -> Placement:
        """Connect; each node with the GPUs a lane where there are several; as many runs at once as the cluster's
        GPUs hold of the widest candidate."""
        ray = self._connected()
        self._reporter = reporter
        reporter.log(f"ray: runs go to {ray.get_runtime_context().gcs_address}")
        widest = max([gpus_needed(e) for e in entries] or [1])
        lanes = node_lanes(ray.nodes(), widest)
        if len(lanes) > 1:
            reporter.log(f"ray: {len(lanes)} nodes as lanes ({'; '.join(lane.label for lane in lanes)}), each "
                         "candidate's runs placed on them in turn")
        width = max(1, int(ray.cluster_resources().get("GPU", 0)) // widest)
        return Placement(lanes if len(lanes) > 1 else None, workers=width)

    def run(self, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
            lane: Lane | None = None, seat: Seat | None = None) -> SweepResult:
        import ray

        if seat is not None:  # the orchestration refuses --resident with Ray before this; no caller drops it silently
            raise InputError("a resident round measures its runs in turn on one machine; Ray spreads runs over nodes")
        self._connected()
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
        self._runs += 1
        reporter.log(f"candidate {result.name}: {result.status}" + (f" ({result.message})" if result.message else ""))
        return result

    def close(self) -> None:
        if self._runs and self._reporter is not None:
            self._reporter.log(f"ray: {self._runs} runs in {time.monotonic() - self._started:.1f} s")
        self._runs = 0


def _connect(address: str | None, init: dict[str, Any] | None) -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install 'servebook[ray]' (or ray>=2.9) on the driver and the "
                         "workers") from None
    if not ray.is_initialized():
        ray.init(address=address, **(init or {}), log_to_driver=False)
    return ray
