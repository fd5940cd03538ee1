"""Sweeps: one papermill execution of notebooks/qualify.ipynb per candidate of a study.

The sweep validates the whole study before anything launches, skips candidates already
recorded under the same candidate and plan hashes, keeps going past failed candidates, and
judges every run of the study at the end. The executed notebook is stored in its run.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .config.errors import InputError
from .config.study import Study, StudyEntry
from .engines import get_engine
from .journal.store import Journal
from .config.secrets import Scrubber, redact_argv
from .util.paths import repo_data_dir
from .util.progress import Reporter

QUALIFY_NOTEBOOK = repo_data_dir().parent / "notebooks" / "qualify.ipynb"


@dataclass
class SweepResult:
    name: str
    candidate_id: str
    run_id: str | None
    status: str  # completed | failed | incomplete | skipped | error
    seconds: float
    message: str = ""


@dataclass
class DryRunEntry:
    entry: StudyEntry
    preflight: list[str]
    argv: list[str]
    compose_yaml: str | None = None
    compose_commands: list[list[str]] | None = None


def dry_run(study: Study) -> list[DryRunEntry]:
    """Every step and command of the study, without building, generating, probing or launching anything."""
    from .engines.random_models import model_file_name
    from .launch.compose import render
    from .launch.preflight import describe

    out = []
    for entry in study.expand():
        candidate = entry.candidate
        adapter = get_engine(candidate.engine)
        model = model_file_name(candidate.model.path or candidate.model.id)
        draft = model_file_name(candidate.knobs.drafter.model)
        steps = describe(candidate)
        if candidate.launch.mode == "compose":
            plan = render(candidate, adapter, model_path=model, draft_path=draft,
                          first_port=candidate.launch.port or 30000)
            if not candidate.pins.image_digest:
                steps.append("W_UNPINNED: the image is not pinned by digest (set pins.image_digest)")
            out.append(DryRunEntry(entry, steps, plan.commands("compose.yaml")[1], plan.yaml(),
                                   plan.commands("compose.yaml")))
            continue
        if candidate.launch.mode == "attach":
            out.append(DryRunEntry(entry, steps, [f"(attach to {candidate.launch.url}; nothing is launched)"]))
            continue
        argv = adapter.argv(candidate, port=candidate.launch.port or 0, model_path=model, draft_path=draft)
        argv = ["<port: free>" if a == "0" and i and argv[i - 1] == "--port" else a for i, a in enumerate(argv)]
        out.append(DryRunEntry(entry, steps, redact_argv(argv)))
    return out


class _ProgressStream:
    """The kernel's stderr (where the run's progress lines go), passed on line by line."""

    def __init__(self, reporter: Reporter, prefix: str):
        self.reporter, self.prefix, self._pending = reporter, prefix, ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if line.strip():
                self.reporter.log(f"{self.prefix}{line.rstrip()}")
        return len(text)

    def flush(self) -> None:
        if self._pending.strip():
            self.reporter.log(f"{self.prefix}{self._pending.rstrip()}")
        self._pending = ""


@dataclass
class _Kernel:
    """How papermill runs the qualify notebook (and, in a parallel sweep, on which GPUs).

    One Jupyter kernel serves a sweep's candidates one after another (one per worker in a parallel sweep):
    starting a kernel and importing servebook, pandas and plotly in it was most of the harness's cost per
    candidate. Each candidate still gets its own executed notebook; a kernel that died or timed out is
    replaced, and kernels are renewed every `renew_after` candidates so nothing accumulates in them."""

    notebook: Path
    name: str
    start_timeout: int
    execution_timeout: int | None
    pool: "GpuPool | None" = None
    reuse: bool = True
    renew_after: int = 25

    def __post_init__(self) -> None:
        self._local = threading.local()
        self._all: list = []
        self._lock = threading.Lock()

    def manager(self):
        """This thread's kernel manager (None: papermill starts and stops a kernel of its own)."""
        if not self.reuse:
            return None
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        km = getattr(self._local, "km", None)
        used = getattr(self._local, "used", 0)
        if km is not None and (used >= self.renew_after or (km.has_kernel and not run_sync(km.is_alive)())):
            self.discard()
            km = None
        if km is None:
            # Longer than a run takes to stop its engine (10 s), so a kernel asked to stop after Ctrl-C finishes that.
            km = AsyncKernelManager(kernel_name=self.name, shutdown_wait_time=20.0)
            self._local.km, self._local.used = km, 0
            with self._lock:
                self._all.append(km)
        self._local.used += 1
        return km

    def discard(self) -> None:
        """Shut this thread's kernel down (after a failure that may have left it busy or broken)."""
        km = getattr(self._local, "km", None)
        self._local.km = None
        if km is not None:
            _shutdown(km)
            with self._lock:
                if km in self._all:
                    self._all.remove(km)

    def close(self) -> None:
        with self._lock:
            kernels, self._all = list(self._all), []
        for km in kernels:
            _shutdown(km)


_KEPT_KERNEL_ENGINE = "servebook-kept-kernel"


def _register_kept_kernel_engine() -> None:
    """A papermill engine that runs a notebook on a kernel it is handed and leaves that kernel running, but
    closes the client it opened: papermill's own keeps a kept kernel's client sockets open, a dozen file
    descriptors per candidate."""
    import logging

    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines

    if _KEPT_KERNEL_ENGINE in papermill_engines._engines:
        return

    class KeptKernelClient(PapermillNotebookClient):
        def execute(self, **kwargs):
            try:
                return super().execute(**kwargs)
            finally:
                if self.kc is not None:
                    self.kc.stop_channels()
                    self.kc = None

    class KeptKernelEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None,
                                     stderr_file=None, start_timeout=60, execution_timeout=None, **kwargs):
            for unused in ("input_path", "timeout", "startup_timeout"):
                kwargs.pop(unused, None)
            return KeptKernelClient(nb_man, timeout=execution_timeout, startup_timeout=start_timeout,
                                    kernel_name=kernel_name, log=logging.getLogger("papermill"),
                                    log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                                    **kwargs).execute()

    papermill_engines.register(_KEPT_KERNEL_ENGINE, KeptKernelEngine)


def _shutdown(km) -> None:
    """Ask the kernel to stop, as papermill does with its own: a cell still running (a run stopping its engine
    after Ctrl-C) gets the kernel's grace period to finish; a kernel that does not stop is killed."""
    from jupyter_core.utils import run_sync

    process = getattr(getattr(km, "provisioner", None), "process", None)
    try:
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=False)
    except BaseException:  # noqa: BLE001 - a kernel that is already gone needs no shutdown
        pass
    if process is not None and process.poll() is None:
        process.kill()


def _need(entry: StudyEntry) -> int:
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


def _gpu_pool(entries: list[StudyEntry], parallel: str | int, gpus: list[int] | None,
              reporter: Reporter) -> GpuPool | None:
    """None for a serial sweep; else the GPUs to share out and how many candidates may run at once."""
    if parallel in (1, "1", None):
        return None
    if parallel != "auto" and (not str(parallel).isdigit() or int(parallel) < 1):
        raise InputError(f"--parallel {parallel!r}: auto, or a number of candidates at once")
    if gpus is None:
        from .launch.gpus import inventory

        gpus = [g.index for g in inventory().gpus]
    if not gpus:
        reporter.log("parallel: no GPUs on this host, so candidates run one at a time (engines sharing CPU cores "
                     "measure each other)")
        return None
    widest = max(_need(e) for e in entries)
    if widest > len(gpus):
        raise InputError(f"parallel: a candidate needs {widest} GPUs (tensor_parallel_size x replicas), the host "
                         f"has {len(gpus)} ({gpus})")
    at_once = len(gpus) // min(_need(e) for e in entries)
    workers = at_once if parallel == "auto" else min(int(parallel), at_once)
    reporter.log(f"parallel: up to {workers} candidates at once on GPUs {gpus}")
    return GpuPool(gpus, workers)


def sweep(
    study: Study,
    journal: Journal,
    *,
    reporter: Reporter | None = None,
    retry_failed: bool = False,
    kernel_name: str = "python3",
    start_timeout: int = 120,
    execution_timeout: int | None = 3600,
    notebook: Path = QUALIFY_NOTEBOOK,
    max_repeats: int | None = None,
    parallel: str | int = 1,
    gpus: list[int] | None = None,
    reuse_kernel: bool = True,
) -> list[SweepResult]:
    """`study.repeats` papermill executions per candidate not yet recorded under the study's plan, interleaved;
    failures go on. With `max_repeats`, then add repeats where verdicts are inconclusive until decided.

    `parallel`: 1 runs one candidate at a time; "auto" (or a number) runs candidates at once on disjoint groups of
    the host's GPUs (`gpus`, default what nvidia-smi lists), each group as wide as the candidate's tensor
    parallel size times its replicas. A host without GPUs stays serial under "auto": two engines sharing CPU
    cores measure each other."""
    reporter = reporter or Reporter()
    journal.ensure_writable()
    entries = study.expand()
    for entry in entries:  # before any engine starts: a plan that cannot fit a candidate stops the sweep here
        get_engine(entry.candidate.engine).check_plan_fits(entry.candidate, study.plan)
    kernel = _Kernel(notebook, kernel_name, start_timeout, execution_timeout, reuse=reuse_kernel)
    kernel.pool = _gpu_pool(entries, parallel, gpus, reporter)
    try:
        results = _sweep_repeats(study, entries, journal, kernel, reporter, retry_failed)
        if max_repeats is not None:
            results += _until_decided(study, journal, kernel, reporter, max_repeats)
    finally:
        kernel.close()
    journal.index()
    return results


def _until_decided(study: Study, journal: Journal, kernel: "_Kernel", reporter: Reporter,
                   max_repeats: int) -> list[SweepResult]:
    """One more run for every inconclusive candidate (and the baseline, so it keeps pace), interleaved,
    until no verdict is inconclusive or `max_repeats` runs each are spent. The journal is the state, so an
    interrupted sweep resumes where it stopped."""
    from .verdicts import judge

    results: list[SweepResult] = []
    baseline = study.verdict.baseline
    while True:
        judged = judge(study, journal, append=False)
        open_ = [j for j in judged if j.verdict is not None and j.verdict.undecided]
        undecided = [j for j in open_ if len(j.records) < max_repeats]
        if not undecided:
            reporter.log(f"undecided verdicts remain ({', '.join(j.entry.name for j in open_)}), but their candidates "
                         f"have {max_repeats} runs (--max-repeats)" if open_ else "every verdict is decided")
            return results
        most = max(len(j.records) for j in undecided)
        names = {j.entry.name for j in undecided}
        base = next(j for j in judged if j.entry.name == baseline)
        if len(base.records) <= most and len(base.records) < max_repeats:
            names.add(baseline)
        reporter.log(f"inconclusive: {', '.join(sorted(names - {baseline}))}; one more run of "
                     f"{', '.join(sorted(names))}")
        for item in judged:  # study order, so the added runs interleave like the first ones
            if item.entry.name in names:
                results.append(_run_entry(study, item.entry, journal, kernel, reporter))


def _sweep_repeats(study: Study, entries: list[StudyEntry], journal: Journal, kernel: "_Kernel",
                   reporter: Reporter, retry_failed: bool) -> list[SweepResult]:
    statuses = ("completed", "failed") if not retry_failed else ("completed",)
    total = len(entries) * study.repeats
    # Repeats are interleaved (A B C A B C ...), baseline included, so slow drift hits every candidate alike.
    order = [(repeat, entry) for repeat in range(study.repeats) for entry in entries]

    def recorded(repeat: int, entry: StudyEntry) -> SweepResult | None:
        found = journal.find_all(entry.candidate.id, study.plan.id, statuses=statuses)
        failed = [r for r in found if r.status == "failed"]
        if len(found) <= repeat and not failed:
            return None
        existing = failed[0] if failed else found[repeat]
        why = "a failed load is a record, not repeated" if failed else f"repeat {repeat + 1} recorded"
        reporter.log(f"skip {entry.name} (repeat {repeat + 1}/{study.repeats}): {why} ({existing.run_id})")
        return SweepResult(entry.name, entry.candidate.id, existing.run_id, "skipped", 0.0,
                           f"{why}: {existing.status} run {existing.run_id}")

    def one(repeat: int, entry: StudyEntry, task) -> SweepResult:
        result = recorded(repeat, entry)
        if result is None:
            group = kernel.pool.acquire(_need(entry)) if kernel.pool else None
            try:
                # checked again with the GPUs in hand: a parallel repeat may have failed meanwhile
                result = recorded(repeat, entry) if group is not None else None
                if result is None:
                    where = f" on GPUs {group}" if group is not None else ""
                    reporter.log(f"{entry.name}: repeat {repeat + 1} of {study.repeats}{where}")
                    result = _run_entry(study, entry, journal, kernel, reporter, group)
            finally:
                if group is not None:
                    kernel.pool.release(group)
        task.advance()
        return result

    with reporter.task(f"sweep {study.name}: {len(entries)} candidates x {study.repeats} repeats", total=total) as task:
        if kernel.pool is None:
            return [one(repeat, entry, task) for repeat, entry in order]
        with concurrent.futures.ThreadPoolExecutor(kernel.pool.workers, thread_name_prefix="servebook-sweep") as pool:
            futures = [pool.submit(one, repeat, entry, task) for repeat, entry in order]
            return [future.result() for future in futures]


def _run_entry(study: Study, entry: StudyEntry, journal: Journal, kernel: _Kernel,
               reporter: Reporter, visible_gpus: list[int] | None = None) -> SweepResult:
    import papermill

    started = time.monotonic()
    run_id = journal.reserve_run(entry.candidate.id)
    # One working notebook per run: two sweeps of one study in one journal never share a file.
    work = journal.root / ".sweeps"
    work.mkdir(parents=True, exist_ok=True)
    output = work / f"{run_id}.ipynb"
    parameters = {"candidate": entry.candidate.model_dump(mode="json"), "plan": study.plan.model_dump(mode="json"),
                  "journal": journal.url or str(journal.root.resolve()), "run_id": run_id, "study": study.name,
                  "study_entry": entry.name, "visible_gpus": visible_gpus}
    reporter.log(f"candidate {entry.name} ({entry.candidate.id}) -> run {run_id}")
    progress = _ProgressStream(reporter, f"  [{entry.name}] ")
    message = ""
    km = kernel.manager()
    kept = {"km": km, "engine_name": _KEPT_KERNEL_ENGINE} if km is not None else {}
    if km is not None:
        _register_kept_kernel_engine()
    try:
        papermill.execute_notebook(
            str(kernel.notebook), str(output), parameters=parameters, kernel_name=kernel.name,
            start_timeout=kernel.start_timeout, execution_timeout=kernel.execution_timeout,
            progress_bar=False, log_output=False, stderr_file=progress, cwd=str(Path.cwd()),
            # The kernel only listens on loopback; its warning about TCP transport is noise in CI logs.
            extra_arguments=["--IPKernelApp.log_level=ERROR"], **kept,
        )
    except papermill.PapermillExecutionError as error:
        message = f"notebook failed in cell {error.exec_count}: {error.ename}: {error.evalue}"[:600]
    except BaseException:
        kernel.discard()  # a timeout or an interrupt may leave the kernel busy: the next candidate gets a new one
        raise
    finally:
        progress.flush()
    record = journal.run(run_id) if (journal.runs_dir / run_id).is_dir() else None
    if output.is_file():
        if record is not None:
            journal.add_notebook(run_id, output.read_bytes(), Scrubber.from_environment(entry.candidate.launch.api_key_env))
        output.unlink()
    status = record.status if record is not None else "error"
    if record is not None and record.manifest is not None and record.manifest.failure is not None:
        message = message or record.manifest.failure.text
    reporter.log(f"candidate {entry.name}: {status}" + (f" ({message})" if message else ""))
    return SweepResult(entry.name, entry.candidate.id, record.run_id if record else None, status,
                       time.monotonic() - started, message)
