"""The Jupyter kernels the papermill runner keeps (sweeps.runner): the papermill engine that runs a notebook on a kept
kernel and tells the runner while its cells run, and how a kept kernel is stopped, after an interrupt or when it
died under a run."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any


class KernelDied(RuntimeError):
    """The notebook's kernel died mid-run (killed, out of memory): the run's failure, not the sweep's."""

    def __init__(self, exit_code: int | None):
        how = f"killed by signal {-exit_code}" if exit_code is not None and exit_code < 0 else \
            f"exit code {exit_code}" if exit_code is not None else "its exit status unknown"
        super().__init__(f"the notebook kernel running the run died ({how}); the engine it started ended with it")
        self.exit_code = exit_code


def exit_code(km: Any) -> int | None:
    process = getattr(getattr(km, "provisioner", None), "process", None)
    return process.poll() if process is not None else None


def settle_left_tasks() -> None:
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


KEPT_KERNEL_ENGINE = "servebook-kept-kernel"


def register_kept_kernel_engine() -> None:
    """A papermill engine that runs a notebook on a kernel it is handed and leaves that kernel running, but
    closes the client it opened: papermill's own keeps a kept kernel's client sockets open, a dozen file
    descriptors per candidate."""
    import logging

    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines

    if KEPT_KERNEL_ENGINE in papermill_engines._engines:
        return

    class KeptKernelClient(PapermillNotebookClient):
        #: the runner's record of the kernels running cells now (what an interrupt reaches)
        running_cells: Callable[[Any], AbstractContextManager[None]] = staticmethod(lambda km: nullcontext())

        def papermill_execute_cells(self) -> None:
            with self.running_cells(self.km):
                super().papermill_execute_cells()

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
            running_cells = kwargs.pop("running_cells", None)
            client = KeptKernelClient(nb_man, timeout=execution_timeout, startup_timeout=start_timeout,
                                      kernel_name=kernel_name, log=logging.getLogger("papermill"),
                                      log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                                      **kwargs)
            if running_cells is not None:
                client.running_cells = running_cells
            return client.execute()

    papermill_engines.register(KEPT_KERNEL_ENGINE, KeptKernelEngine)


#: how long a kernel interrupted mid-cell may take to end the cell (a run stops its engine, 10 s at most, and seals)
CELL_END_S = 20.0


def shutdown(km: Any) -> None:
    """Ask the kernel to stop, as papermill does with its own, once a cell still running has ended: interrupted (a
    run then stops its engine and is sealed `interrupted`), the cell is waited for, at most CELL_END_S. A shutdown
    asked of a kernel inside a cell closes its sockets under the cell, whose reply then fails as a ZMQError
    traceback on the terminal. A kernel that does not stop is killed."""
    from jupyter_core.utils import run_sync

    process = getattr(getattr(km, "provisioner", None), "process", None)
    try:
        if km.has_kernel:
            run_sync(km.interrupt_kernel)()
            run_sync(_cell_ended)(km)
            run_sync(km.shutdown_kernel)(now=False)
    except BaseException:  # noqa: BLE001 - a kernel that is already gone needs no shutdown
        pass
    if process is not None and process.poll() is None:
        process.kill()


async def _cell_ended(km: Any) -> None:
    """Once the kernel answers on its shell channel: it does so only after the cell it is running has ended."""
    client = km.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=CELL_END_S)
    except RuntimeError:  # it did not answer in time, or died: the shutdown that follows deals with it
        pass
    finally:
        client.stop_channels()
