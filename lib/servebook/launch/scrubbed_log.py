"""An engine's output written into its log with every secret servebook knows of replaced, as it arrives.

Scrubbing the log when the run is sealed is not enough: a run killed before it is sealed (SIGKILL, a lost machine)
keeps the key an engine printed (SGLang and vLLM print their arguments, `--api-key` among them). So when there is
a secret to hide, the engine writes into a pipe, and only scrubbed bytes reach the file: whatever ends the run,
nothing else was ever on disk. With no secret known the engine writes the file itself, as before.
"""

from __future__ import annotations

import os
import threading
from io import FileIO
from pathlib import Path

from ..config.secrets import Scrubber
from ..util.errors import DiskFull
from ..util.files import disk_full

_READ_BYTES = 1 << 16
#: how long a stopped engine's last output may take to reach the log (a grandchild may hold the pipe open)
DRAIN_S = 5.0


class ScrubbedLog(threading.Thread):
    """Copies the pipe `fd` into `path`, scrubbed; ends at end of file, when every writer has closed the pipe."""

    def __init__(self, fd: int, path: Path, scrubber: Scrubber):
        super().__init__(daemon=True, name=f"servebook-log-{path.name}")
        self.fd, self.path, self.scrubber = fd, path, scrubber
        # a secret split between two reads must be whole before it is scrubbed: this many of the last bytes wait
        self.hold = max(len(v.encode()) for v in scrubber.values) - 1 if scrubber.values else 0
        #: the full disk the log stopped at (its output since then dropped), if it did
        self.lost_to: DiskFull | None = None

    def run(self) -> None:
        pending = b""
        try:
            with open(self.path, "ab", buffering=0) as log:
                while chunk := os.read(self.fd, _READ_BYTES):
                    pending = self.scrubber.bytes(pending + chunk)
                    # Output that ends a line is written whole (no secret holds a newline); only a partial line
                    # keeps its last bytes back, since a secret may begin there and end in the next read.
                    cut = len(pending) if pending.endswith(b"\n") else max(0, len(pending) - self.hold)
                    if cut:
                        self._write(log, pending[:cut])
                        pending = pending[cut:]
                if pending:
                    self._write(log, self.scrubber.bytes(pending))
        finally:
            os.close(self.fd)

    def _write(self, log: FileIO, data: bytes) -> None:
        """Output the disk has no room for is dropped, and the pipe still read: an engine whose output is not read
        blocks on its next line, and a run's own next write meets the full disk and fails the run, saying why."""
        if self.lost_to is not None:
            return
        try:
            log.write(data)
        except OSError as error:
            self.lost_to = disk_full(error, self.path)
            if self.lost_to is None:
                raise

    def drain(self, timeout_s: float = DRAIN_S) -> None:
        """Wait for the engine's last output to be in the log (its tail names a failure's cause)."""
        if self.is_alive():
            self.join(timeout_s)
