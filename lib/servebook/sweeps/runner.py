"""Runners: what executes one (study candidate, repeat) and returns its result. The sweep decides what to run and
in which order; a runner only runs it. The papermill runner keeps one Jupyter kernel per worker thread; the Ray
runner (servebook.distributed) sends the same work to a cluster; tests hand in a fake."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..config.parameters import Seat
from ..config.secrets import Scrubber
from ..config.study import Study, StudyEntry
from ..journal import Failure, Journal, RunRecord
from ..util.errors import RunInterrupted
from ..util.progress import Reporter
from ..util.resources import shipped_file
from .gpu_lanes import gpus_needed
from .kernels import KEPT_KERNEL_ENGINE, KernelDied, exit_code, register_kept_kernel_engine, settle_left_tasks, shutdown
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


@runtime_checkable
class Interruptible(Protocol):
    """A runner whose runs can be interrupted from another thread (a resident round's seats, on Ctrl-C)."""

    def interrupt(self) -> None:
        """Interrupt every run going now, as Ctrl-C interrupts one: each stops its engine and is sealed
        `interrupted`, and its `run` call returns."""
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
    #: the kernels running a notebook's cells now (a kernel still starting is not one: a signal would end it)
    _busy: list[Any] = field(default_factory=list, init=False, repr=False)
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
            shutdown(km)
            with self._lock:
                if km in self._all:
                    self._all.remove(km)

    def close(self) -> None:
        with self._lock:
            kernels, self._all = list(self._all), []
        for km in kernels:
            shutdown(km)

    def interrupt(self) -> None:
        """Kernel > Interrupt for every kernel running cells now, from another thread (the sweep's, on Ctrl-C in a
        resident round): each run in one stops its engine and is sealed `interrupted`, and its notebook returns."""
        from jupyter_core.utils import run_sync

        with self._lock:
            kernels = list(self._busy)
        for km in kernels:
            try:
                run_sync(km.interrupt_kernel)()
            except Exception:  # noqa: BLE001 - a kernel that ended meanwhile needs no interrupt
                pass

    @contextmanager
    def _running_cells(self, km: Any) -> Iterator[None]:
        with self._lock:
            self._busy.append(km)
        try:
            yield
        finally:
            with self._lock:
                self._busy.remove(km)

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
        died: KernelDied | None = None
        try:
            message = self._execute(output, parameters, _ProgressStream(reporter, f"  [{entry.name}] "))
            if not message and not ran_a_cell(output):
                # Seen once in a Ray worker under load: papermill returned with no cell run and no error. Nothing was
                # measured, so one more try on a fresh kernel is safe.
                self._discard()
                message = self._execute(output, parameters, _ProgressStream(reporter, f"  [{entry.name}] "))
                if not message and not ran_a_cell(output):
                    message = "the notebook's kernel ran no cell (twice)"
        except KernelDied as error:
            died, message = error, str(error)
        except KeyboardInterrupt:  # the kernel was stopped (_execute): the run is as its kernel left it
            output.unlink(missing_ok=True)
            journal.release_run(run_id)
            raise RunInterrupted(f"{what_became(journal, entry.name, run_id)}; nothing after it was started",
                                 run_id) from None
        record = journal.run(run_id) if journal.has_run(run_id) else None
        if record is not None and record.status == "incomplete":
            record = self._unsealed(journal, entry, run_id, died)
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

    @staticmethod
    def _unsealed(journal: Journal, entry: StudyEntry, run_id: str, died: KernelDied | None) -> RunRecord | None:
        """A run its notebook left unsealed: a reservation never started is given back; a run whose kernel died
        is sealed `failed` with that cause (the engine died with the kernel), so the sweep records it and goes on.
        Any other stays `incomplete`, as the kernel left it."""
        if journal.release_run(run_id):
            return None
        if died is None:
            return journal.run(run_id)
        record = journal.run(run_id)
        failure = Failure(stage="measure" if record.table_path("requests").is_file() else "launch",
                          cause="kernel_died", message=str(died), exit_code=died.exit_code,
                          log_tail=record.log_tail() or None)
        return journal.seal_abandoned(run_id, failure, Scrubber.from_environment(entry.candidate.launch.api_key_env))

    def _execute(self, output: Path, parameters: dict[str, Any], progress: _ProgressStream) -> str:
        """Run the notebook; the failing cell's error as one line ("" when it ran through). KernelDied when the
        kernel died under it."""
        import papermill
        from nbclient.exceptions import DeadKernelError

        km = self._manager()
        kept = {"km": km, "engine_name": KEPT_KERNEL_ENGINE, "running_cells": self._running_cells} \
            if km is not None else {}
        if km is not None:
            register_kept_kernel_engine()
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
        except DeadKernelError:
            settle_left_tasks()
            code = exit_code(km)
            self._discard()
            raise KernelDied(code) from None
        except BaseException:
            settle_left_tasks()
            self._discard()  # a timeout or an interrupt may leave the kernel busy: the next candidate gets a new one
            raise
        finally:
            progress.flush()
        return ""


def what_became(journal: Journal, name: str, run_id: str | None) -> str:
    """What became of a run that was going when the sweep was interrupted, as one clause."""
    record = journal.run(run_id) if run_id and journal.has_run(run_id) else None
    if record is None:
        return f"{name}: not started"
    if record.status == "interrupted":
        cells = record.manifest.summary.cells if record.manifest and record.manifest.summary else 0
        return f"{name}: run {run_id} sealed interrupted after {cells} cell{'s' if cells != 1 else ''}, its engine " \
               "stopped"
    if record.status == "incomplete":
        return f"{name}: run {run_id} left incomplete, its kernel and engine stopped"
    return f"{name}: run {run_id} sealed {record.status} before the interrupt"


def ran_a_cell(output: Path) -> bool:
    """Whether an executed notebook ran any code cell (papermill can return without running one)."""
    import nbformat

    if not output.is_file():
        return False
    notebook = nbformat.read(output, as_version=4)
    return any(cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code")


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
