"""servebook's one error vocabulary, at the bottom layer so every layer raises the same kinds.

Callers decide on the type and on `cause` (a closed set of codes), never on the message, which is
prose for the reader. The CLI and the notebooks catch `ServebookError` once and print one line.
"""

from __future__ import annotations

import errno
import os
from typing import Literal, get_args

#: Why a run has no numbers. One closed list: adapters classify into it, the manifest stores it.
FailureCause = Literal["bad_flag", "out_of_memory", "model_load", "model_not_served", "port_in_use", "timeout",
                       "crash", "warmup_failed", "drafter_inactive", "version_mismatch",
                       # not a failure of the engine: the user stopped the run (it is sealed `interrupted`)
                       "interrupted",
                       # one replica of several died (launch.replicas): the run is sealed `degraded`, its cells kept
                       "replica_lost",
                       # not the engine's either: the run's disk filled (or its quota), so its tables stop where they
                       # were last written whole
                       "disk_full",
                       # the notebook kernel running the run died (a sweep's): the sweep seals the run `failed`
                       "kernel_died"]
FAILURE_CAUSES: tuple[str, ...] = get_args(FailureCause)

#: The stage a failed run stopped in.
FailureStage = Literal["launch", "warmup", "measure"]


class ServebookError(Exception):
    """Anything servebook reports to the user as one message instead of a traceback."""


class InputError(ServebookError, ValueError):
    """Bad user input; the message names the file, the field and the fix."""


class EngineFailed(ServebookError):
    """The engine did not become ready, did not serve the plan, or died: a failed run, with its classified cause,
    the stage it stopped in (set where the run knows it) and the engine's log tail."""

    def __init__(self, cause: FailureCause, message: str, *, log_tail: str = "", exit_code: int | None = None,
                 stage: FailureStage | None = None):
        if cause not in FAILURE_CAUSES:
            raise ValueError(f"unknown failure cause {cause!r}; one of {', '.join(FAILURE_CAUSES)}")
        super().__init__(f"{cause}: {message}")
        self.cause: FailureCause = cause
        self.message = message
        self.log_tail = log_tail
        self.exit_code = exit_code
        self.stage = stage

    def at(self, stage: FailureStage) -> "EngineFailed":
        """This failure, placed in `stage` unless an inner layer already knew better."""
        if self.stage is None:
            self.stage = stage
        return self


class DiskFull(EngineFailed, OSError):
    """A write found its disk full (ENOSPC) or its quota used up (EDQUOT): the path it wrote and the bytes left there.
    A run it happens in is sealed `failed` with this cause; a command says it in one line (exit 2). Still an OSError,
    so what handles a failed write handles this one too."""

    def __init__(self, path: str, free: int | None, *, quota: bool = False, leaving: str = ""):
        what = "the disk quota is used up" if quota else "the disk is full"
        super().__init__("disk_full", f"{path}: {what}" + (f" ({free:,} bytes free)" if free is not None else "")
                         + (f"; {leaving}" if leaving else ""))
        self.errno = errno.EDQUOT if quota else errno.ENOSPC  # an OSError like the one it stands for
        self.strerror, self.filename, self.free, self.quota = os.strerror(self.errno), path, free, quota

    def __str__(self) -> str:  # not OSError's "[Errno 28] ...": the path, what is full and the bytes left
        return self.message

    def leaving(self, what: str) -> "DiskFull":
        """The same full disk, saying what it left behind ("run X is left incomplete")."""
        return DiskFull(self.filename, self.free, quota=self.quota, leaving=what)


class GateFailed(ServebookError):
    """A verdict the caller asked to fail on (`--fail-on`, or a notebook's `fail_on`): not an error of servebook's,
    a result; `exit_code` is the gate's code for that outcome."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or Kernel > Interrupt stopped a run: the engine was stopped and the run sealed `interrupted` with the
    cells it finished. A KeyboardInterrupt, so that nothing catching Exception swallows it; shown as one line."""

    def __init__(self, message: str, run_id: str | None = None):
        super().__init__(message)
        self.run_id = run_id
