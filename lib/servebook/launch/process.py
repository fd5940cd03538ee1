"""Starting an engine as a local process and making sure it goes away again.

The process gets its own process group (so stopping it stops its children too) and, on Linux,
a parent-death signal (so a servebook killed with SIGKILL does not leave a server behind).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..config.secrets import Scrubber
from ..engines import Diagnosis, EngineFailed
from ..engines.http_client import EngineClient
from ..util.files import tail_of
from .scrubbed_log import ScrubbedLog

if TYPE_CHECKING:
    import httpx

    from .roles import LaunchedEngine


class PortInUse(ValueError):
    pass


class Engine(Protocol):
    """What a run needs of an engine, however it is started (a process, compose services, nothing: attach)."""

    @property
    def pid(self) -> int | None: ...

    def start(self) -> "Engine": ...

    def wait_ready(self, timeout_s: float, on_poll: Callable[[float], None] | None = None) -> float: ...

    def exit_code(self) -> int | None: ...

    def wait_exit(self, timeout: float) -> bool: ...

    def check_alive(self) -> None: ...

    def failure(self, fallback: Diagnosis | None = None) -> EngineFailed: ...

    def stop(self, grace_s: float = ...) -> None: ...


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def ensure_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUse(
                f"launch.port: {host}:{port} is already in use; pick another port or leave "
                "launch.port empty to get a free one"
            ) from None


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        # PR_SET_PDEATHSIG. SIGKILL, not SIGTERM: an engine asked to stop may take its time or hang (llama-server
        # was seen ignoring SIGTERM for minutes), and one whose parent died must not outlive it.
        libc.prctl(1, signal.SIGKILL)
    except OSError:
        pass


@dataclass
class EngineProcess:
    argv: list[str]
    adapter: "LaunchedEngine"
    base_url: str
    log_path: Path
    env: dict[str, str] | None = None
    process: subprocess.Popen | None = None
    #: answers for the engine's HTTP endpoints in place of the network (httpx.MockTransport in tests)
    transport: "httpx.BaseTransport | None" = None
    #: the secrets to keep out of the log: with any, the engine's output reaches the log only scrubbed
    scrubber: Scrubber | None = None
    _log_writer: ScrubbedLog | None = None

    def start(self) -> "EngineProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        scrubbed = self.scrubber is not None and bool(self.scrubber.values)
        read_fd, log = os.pipe() if scrubbed else (-1, os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                                                0o666))  # as open(): the umask decides
        env = {**os.environ, **(self.env or {})}
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if os.name == "posix" else None,
            )
        except FileNotFoundError:
            os.close(log)
            if scrubbed:
                os.close(read_fd)
            raise EngineFailed("model_load", f"engine binary not found: {self.argv[0]} "
                               "(run `servebook engine install llamacpp`)") from None
        os.close(log)  # the engine holds its end; the pipe ends when the engine's last process does
        if scrubbed:
            assert self.scrubber is not None
            self._log_writer = ScrubbedLog(read_fd, self.log_path, self.scrubber)
            self._log_writer.start()
        return self

    def drain_log(self) -> None:
        if self._log_writer is not None:
            self._log_writer.drain()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def failure(self, fallback: Diagnosis | None = None) -> EngineFailed:
        code = self.exit_code()
        if code is not None:
            self.drain_log()  # an engine that ended: its last words name the cause
        tail = tail_of(self.log_path)
        context = tail_of(self.log_path, self.adapter.diagnosis_lines)
        diagnosis = self.adapter.classify_failure(context, code) if code is not None or fallback is None else fallback
        return diagnosis.failed(tail, code)

    def check_alive(self) -> None:
        if self.exit_code() is not None:
            raise self.failure()

    def wait_exit(self, timeout: float) -> bool:
        """True if the process ended within `timeout` (a dying engine needs a moment to be reaped)."""
        if self.process is None:
            return False
        try:
            self.process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def wait_ready(self, timeout_s: float, on_poll: Callable[[float], None] | None = None) -> float:
        """Block until the health endpoint answers 200; return the seconds it took."""
        started = time.monotonic()
        deadline = started + timeout_s
        path = self.adapter.health_path()
        client = EngineClient(self.base_url, timeout_s=2.0, transport=self.transport)
        while True:
            self.check_alive()
            if client.answers(path):  # not yet: the listener is not open, or closed while loading
                return time.monotonic() - started
            if time.monotonic() > deadline:
                raise self.failure(
                    Diagnosis("timeout", f"not ready after {timeout_s:g}s ({self.base_url}{path} never answered 200)")
                )
            if on_poll:
                on_poll(time.monotonic() - started)
            time.sleep(0.2)

    def stop(self, grace_s: float = 10.0) -> None:
        self._stop(grace_s)
        self.drain_log()  # every byte the engine wrote is in its log (scrubbed) before the run reads or seals it

    def _stop(self, grace_s: float) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def __enter__(self) -> "EngineProcess":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


class NoLocalProcess:
    """For engines servebook does not run as a child process: there is nothing to reap or poll."""

    pid: int | None = None

    def exit_code(self) -> int | None:
        return None

    def wait_exit(self, timeout: float) -> bool:
        return False

    def check_alive(self) -> None:
        return None


@dataclass
class AttachedEngine(NoLocalProcess):
    """A server servebook did not start (launch.mode: attach): nothing to start, stop or reap."""

    base_url: str
    adapter: "LaunchedEngine"
    log_path: Path
    transport: "httpx.BaseTransport | None" = None

    def start(self) -> "AttachedEngine":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text(f"attached to {self.base_url}; servebook did not start this server and has "
                                 "no access to its log\n")
        return self

    def failure(self, fallback: Diagnosis | None = None) -> EngineFailed:
        return (fallback or Diagnosis("crash", f"{self.base_url} stopped answering")).failed()

    wait_ready = EngineProcess.wait_ready

    def stop(self, grace_s: float = 0.0) -> None:
        return None
