"""Studies across hosts through Ray: each (candidate, repeat) is a Ray task asking for as many GPUs as the
candidate's tensor parallel size times its replicas, so Ray places it and sets its visible devices.

The task runs the same papermill notebook as a local sweep, on the worker, into the same journal: a
shared directory, or (across hosts) an object-store URL (`s3://...`), where each run is sealed by its
manifest arriving last. The driver judges once every run of the study is in. On Kubernetes, start the
cluster with KubeRay; on Slurm, with Ray's own `ray start` in the job script (see the README).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from .config.errors import InputError
from .config.study import Study, StudyEntry
from .engines import get_engine
from .journal.store import Journal
from .sweeps import QUALIFY_NOTEBOOK, SweepResult, _Kernel, _need, _run_entry
from .util.progress import Reporter


def _run_on_worker(study: dict, entry_name: str, journal: str, kernel: dict) -> dict:
    """Inside the Ray task: the candidate's notebook on the GPUs Ray gave this task."""
    import ray

    loaded = Study.model_validate(study)
    entry = next(e for e in loaded.expand() if e.name == entry_name)
    gpus = [int(g) for g in ray.get_gpu_ids()] or None
    # One candidate per task: papermill owns its kernel (a kernel kept in a Ray worker would outlive the sweep).
    result = _run_entry(loaded, entry, Journal(journal), _Kernel(**kernel, reuse=False), Reporter(quiet=True), gpus)
    return asdict(result)


def sweep_on_ray(study: Study, journal: Journal, *, address: str | None = "auto", reporter: Reporter | None = None,
                 retry_failed: bool = False, kernel_name: str = "python3", start_timeout: int = 120,
                 execution_timeout: int | None = 3600, init: dict[str, Any] | None = None) -> list[SweepResult]:
    """Every (candidate, repeat) of `study` not yet recorded, as Ray tasks; the results once all are in.

    `address`: the cluster (`auto`, `ray://head:10001`); `init`: other `ray.init` arguments (a test starts a local
    cluster with `{"num_gpus": 4}` fake GPUs)."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install 'servebook[ray]' (or ray>=2.9) on the driver and the "
                         "workers") from None
    reporter = reporter or Reporter()
    journal.ensure_writable()
    entries = study.expand()
    for entry in entries:
        get_engine(entry.candidate.engine).check_plan_fits(entry.candidate, study.plan)
    if not ray.is_initialized():
        ray.init(address=address, **(init or {}), log_to_driver=False)
    statuses = ("completed", "failed") if not retry_failed else ("completed",)
    kernel = {"notebook": QUALIFY_NOTEBOOK, "name": kernel_name, "start_timeout": start_timeout,
              "execution_timeout": execution_timeout}
    remote = ray.remote(_run_on_worker)
    results: list[SweepResult] = []
    pending: dict[Any, StudyEntry] = {}
    for repeat in range(study.repeats):  # submitted interleaved; Ray starts them as GPUs free up
        for entry in entries:
            found = journal.find_all(entry.candidate.id, study.plan.id, statuses=statuses)
            if len(found) > repeat or any(r.status == "failed" for r in found):
                results.append(SweepResult(entry.name, entry.candidate.id, None, "skipped", 0.0, "recorded"))
                continue
            task = remote.options(num_gpus=_need(entry), num_cpus=1).remote(
                study.model_dump(mode="json"), entry.name, journal.location, kernel)
            pending[task] = entry
    reporter.log(f"ray: {len(pending)} runs submitted to {ray.get_runtime_context().gcs_address}")
    started = time.monotonic()
    with reporter.task(f"sweep {study.name} on Ray", total=len(pending)) as progress:
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                try:
                    result = SweepResult(**ray.get(ref))
                except Exception as error:  # noqa: BLE001 - a lost worker is one failed entry, not a lost sweep
                    entry = pending[ref]
                    result = SweepResult(entry.name, entry.candidate.id, None, "error", 0.0,
                                         f"{type(error).__name__}: {error}"[:600])
                reporter.log(f"candidate {result.name}: {result.status}" +
                             (f" ({result.message})" if result.message else ""))
                results.append(result)
                progress.advance()
    reporter.log(f"ray: {len(pending)} runs in {time.monotonic() - started:.1f} s")
    journal.pull()  # what workers on other hosts sealed in a remote journal
    journal.index()
    return results
