"""Runners: what executes one (study candidate, repeat) and returns its result. The sweep decides what to run and
in which order; a runner only runs it. The papermill runner keeps one Jupyter kernel per worker thread; the Ray
runner (servebook.distributed) sends the same work to a cluster; tests hand in a fake."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..config.parameters import Seat
from ..config.secrets import Scrubber
from ..config.study import Study, StudyEntry
from ..journal import Journal
from ..util.progress import Reporter
from ..util.resources import shipped_file
from .gpus import gpus_needed
from .parameters import check_declared, qualify_parameters
from .pending import SweepResult
from .placement import Lane

QUALIFY_NOTEBOOK = shipped_file("notebooks", "qualify.ipynb")  # notebooks/qualify.ipynb in a checkout links to it


class Runner(Protocol):
    """What executes runs. A runner may also declare `capabilities` (sweeps.options.Capabilities: the options it
    can honour; none declared is a local runner, which honours all) and a `placement` (options.PlacesItself: where
    its runs go, for a runner that knows better than this host's GPU list)."""

    def run(self, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
            lane: Lane | None = None, seat: Seat | None = None) -> SweepResult:
        """Run `entry` once under the study's plan into `journal` (on `lane`, when the sweep placed it; in `seat`
        of a resident round, whose runs measure in turn)."""
        ...

    def close(self) -> None:
        """Release what the runner holds (kernels, connections)."""
        ...


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
class PapermillRunner:
    """One papermill execution of the qualify notebook per run.

    One Jupyter kernel serves a sweep's candidates one after another (one per worker thread in a parallel sweep):
    starting a kernel and importing servebook, pandas and plotly in it was most of the harness's cost per
    candidate. Each candidate still gets its own executed notebook; a kernel that died or timed out is
    replaced, and kernels are renewed every `renew_after` candidates so nothing accumulates in them."""

    notebook: Path = QUALIFY_NOTEBOOK
    kernel_name: str = "python3"
    start_timeout: int = 120
    execution_timeout: int | None = 3600
    reuse: bool = True
    renew_after: int = 25
    _local: threading.local = field(default_factory=threading.local, init=False, repr=False)
    _all: list[Any] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _checked: bool = field(default=False, init=False, repr=False)

    def _manager(self) -> Any:
        """This thread's kernel manager (None: papermill starts and stops a kernel of its own)."""
        if not self.reuse:
            return None
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        km = getattr(self._local, "km", None)
        used = getattr(self._local, "used", 0)
        if km is not None and (used >= self.renew_after or (km.has_kernel and not run_sync(km.is_alive)())):
            self._discard()
            km = None
        if km is None:
            # Longer than a run takes to stop its engine (10 s), so a kernel asked to stop after Ctrl-C finishes that.
            km = AsyncKernelManager(kernel_name=self.kernel_name, shutdown_wait_time=20.0)
            self._local.km, self._local.used = km, 0
            with self._lock:
                self._all.append(km)
        self._local.used += 1
        return km

    def _discard(self) -> None:
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

    def run(self, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
            lane: Lane | None = None, seat: Seat | None = None) -> SweepResult:
        started = time.monotonic()
        # A lane as wide as the widest candidate: a narrower one takes its first GPUs, and the lane stays the block.
        gpus = list(lane.gpus[:gpus_needed(entry)]) if lane is not None and lane.gpus is not None else None
        if not self._checked:  # before a run id is reserved: a template refused leaves nothing in the journal
            check_declared(self.notebook, qualify_parameters(study, entry, "", ""))
            self._checked = True
        run_id = journal.reserve_run(entry.candidate.id)
        # One working notebook per run: two sweeps of one study in one journal never share a file.
        work = journal.root / ".sweeps"
        work.mkdir(parents=True, exist_ok=True)
        output = work / f"{run_id}.ipynb"
        parameters = qualify_parameters(study, entry, journal.url or str(journal.root.resolve()), run_id, gpus,
                                        lane.label if lane is not None else None, seat)
        reporter.log(f"candidate {entry.name} ({entry.candidate.id}) -> run {run_id}")
        message = self._execute(output, parameters, _ProgressStream(reporter, f"  [{entry.name}] "))
        if not message and not ran_a_cell(output):
            # Seen once in a Ray worker under load: papermill returned with no cell run and no error. Nothing was
            # measured, so one more try on a fresh kernel is safe.
            self._discard()
            message = self._execute(output, parameters, _ProgressStream(reporter, f"  [{entry.name}] "))
            if not message and not ran_a_cell(output):
                message = "the notebook's kernel ran no cell (twice)"
        record = journal.run(run_id) if journal.has_run(run_id) else None
        if output.is_file():
            if record is not None:
                journal.add_notebook(run_id, output.read_bytes(),
                                     Scrubber.from_environment(entry.candidate.launch.api_key_env))
            output.unlink()
        status = record.status if record is not None else "error"
        if record is not None and record.manifest is not None and record.manifest.failure is not None:
            message = message or record.manifest.failure.text
        reporter.log(f"candidate {entry.name}: {status}" + (f" ({message})" if message else ""))
        return SweepResult(entry.name, entry.candidate.id, record.run_id if record else None, status,
                           time.monotonic() - started, message)

    def _execute(self, output: Path, parameters: dict[str, Any], progress: _ProgressStream) -> str:
        """Run the notebook; the failing cell's error as one line ("" when it ran through)."""
        import papermill

        km = self._manager()
        kept = {"km": km, "engine_name": _KEPT_KERNEL_ENGINE} if km is not None else {}
        if km is not None:
            _register_kept_kernel_engine()
        try:
            papermill.execute_notebook(
                str(self.notebook), str(output), parameters=parameters, kernel_name=self.kernel_name,
                start_timeout=self.start_timeout, execution_timeout=self.execution_timeout,
                progress_bar=False, log_output=False, stderr_file=progress, cwd=str(Path.cwd()),
                # The kernel only listens on loopback; its warning about TCP transport is noise in CI logs.
                extra_arguments=["--IPKernelApp.log_level=ERROR"], **kept,
            )
        except papermill.PapermillExecutionError as error:
            return f"notebook failed in cell {error.exec_count}: {error.ename}: {error.evalue}"[:600]
        except BaseException:
            _settle_left_tasks()
            self._discard()  # a timeout or an interrupt may leave the kernel busy: the next candidate gets a new one
            raise
        finally:
            progress.flush()
        return ""


def _settle_left_tasks() -> None:
    """An interrupt stops nbclient's event loop in the middle of a cell and leaves the cell's tasks (the reply, the
    outputs, the kernel's liveness) pending on it. The kernel's shutdown runs on that loop next and wakes them into
    errors (DeadKernelError, a client already closed) that asyncio prints as "Task exception was never retrieved"
    tracebacks after servebook's own one-line message. They are cancelled and their outcomes taken here."""
    import asyncio

    from jupyter_core.utils import ensure_event_loop

    loop = ensure_event_loop()  # the loop jupyter_core's run_sync ran nbclient on, in this thread
    if loop.is_running():
        return
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.wait(left, timeout=5))
    for task in left:
        if task.done() and not task.cancelled():
            task.exception()  # taken: nothing is printed when the task is collected


def ran_a_cell(output: Path) -> bool:
    """Whether an executed notebook ran any code cell (papermill can return without running one)."""
    import nbformat

    if not output.is_file():
        return False
    notebook = nbformat.read(output, as_version=4)
    return any(cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code")


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
        def execute(self, **kwargs: Any) -> Any:
            try:
                return super().execute(**kwargs)
            finally:
                client: Any = getattr(self, "kc", None)
                if client is not None:
                    client.stop_channels()
                    self.kc = None

    class KeptKernelEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                     stdout_file: Any = None, stderr_file: Any = None, start_timeout: int = 60,
                                     execution_timeout: int | None = None, **kwargs: Any) -> Any:
            for unused in ("input_path", "timeout", "startup_timeout"):
                kwargs.pop(unused, None)
            return KeptKernelClient(nb_man, timeout=execution_timeout, startup_timeout=start_timeout,
                                    kernel_name=kernel_name, log=logging.getLogger("papermill"),
                                    log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                                    **kwargs).execute()

    papermill_engines.register(_KEPT_KERNEL_ENGINE, KeptKernelEngine)


def _shutdown(km: Any) -> None:
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


@dataclass
class ModelledRunner:
    """A runner that launches nothing: each run is sealed at once with the simulator's timing model for the
    candidate, with launch-to-launch noise (journal/synthetic.py). Beside the real runners, as httpx keeps a mock
    transport beside its transports: tests and benchmarks of orchestration and statistics use it."""

    seed: int = 0
    launch_cv: float = 0.03
    launches: list[str] = field(default_factory=list)
    _rng: Any = field(default=None, init=False, repr=False)

    def run(self, study: Study, entry: StudyEntry, journal: Journal, reporter: Reporter,
            lane: Lane | None = None, seat: Seat | None = None) -> SweepResult:
        import numpy as np

        from ..journal.synthetic import write_modelled_run

        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        self.launches.append(entry.name)
        record = write_modelled_run(journal, entry.candidate, study.plan, study=study.name, entry=entry.name,
                                    rng=self._rng, launch_cv=self.launch_cv)
        return SweepResult(entry.name, entry.candidate.id, record.run_id, record.status, 0.0)

    def close(self) -> None:
        return None
