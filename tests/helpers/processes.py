"""Processes the tests started or must prove gone: engines on a port, a process's descendants, senders."""

from pathlib import Path

import httpx


def servers_on_port(port: int) -> list[int]:
    """PIDs of processes whose command line carries `--port <port>` (to prove none is left behind)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = next((l for l in (entry / "status").read_text().splitlines() if l.startswith("State:")), "")
        except OSError:
            continue
        if b"--port" in argv and str(port).encode() in argv and "zombie" not in state:
            pids.append(int(entry.name))
    return pids


def requests_processing(base_url: str) -> float:
    try:
        text = httpx.get(f"{base_url}/metrics", timeout=1).text
    except httpx.HTTPError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("llamacpp:requests_processing"):
            return float(line.split()[-1])
    return 0.0


def wait_healthy(port: int, timeout_s: float = 60.0) -> bool:
    """Poll /health on loopback until it answers 200 (bounded: gives up after `timeout_s`)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now, from /proc (children of children included)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    """The ones of `pids` still running (a zombie has ended; it waits only for its parent to read its status)."""
    running = set()
    for pid in pids:
        try:
            state = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if "zombie" not in state:
            running.add(pid)
    return running


def left_running(pids: set[int], within_s: float = 10.0) -> set[int]:
    """The ones of `pids` still running after `within_s` seconds (bounded: polls every 0.1 s until none is)."""
    import time

    deadline = time.monotonic() + within_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def senders_of(pid: int) -> set[int]:
    """The sending processes (measure.transport.senders) below `pid`: multiprocessing's spawned children."""
    return {p for p in alive(descendants(pid)) if "spawn_main" in command_line(p)}


class Freezer:
    """A process group stopped (SIGSTOP) for `seconds` and let go on (SIGCONT), as a hung router or replica: on a
    thread, once `ready()` says the moment has come (polled every 50 ms, `within_s` at most). `find()` names the
    process whose group is stopped (None: not started yet). The group is always continued, also when the test
    fails, so that the run can stop it; one that never came to it gives up when the `with` block ends."""

    def __init__(self, find, ready, seconds: float, within_s: float = 120.0):
        import threading

        self.find, self.ready, self.seconds, self.within_s = find, ready, seconds, within_s
        self.stopped_pgid: int | None = None
        self.error: BaseException | None = None
        self._over = threading.Event()
        self._thread = threading.Thread(target=self._run, name="freezer", daemon=True)

    def __enter__(self) -> "Freezer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._over.set()
        self._thread.join(self.seconds + 1.0)

    def _run(self) -> None:
        import os
        import signal
        import time

        deadline = time.monotonic() + self.within_s
        try:
            while time.monotonic() < deadline and not self._over.is_set():
                pid = self.find()
                if pid is not None and self.ready():
                    pgid = os.getpgid(pid)
                    assert pgid != os.getpgrp(), "the frozen process must lead a group of its own"
                    os.killpg(pgid, signal.SIGSTOP)
                    self.stopped_pgid = pgid
                    try:
                        time.sleep(self.seconds)
                    finally:
                        os.killpg(pgid, signal.SIGCONT)
                    return
                time.sleep(0.05)
        except BaseException as error:  # noqa: BLE001 - reported by the test, not lost on the thread
            self.error = error


def metric(base_url: str, name: str) -> float:
    """A sample's value from a server's /metrics (0 where it does not answer or has no such sample)."""
    try:
        text = httpx.get(f"{base_url}/metrics", timeout=1).text
    except httpx.HTTPError:
        return 0.0
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name)), 0.0)


def router_below(pid: int) -> int | None:
    """The router process (launch.replicas) started below `pid`: `python -m sglang_router.launch_router` until it
    names itself `sglang::router`."""
    return next((p for p in sorted(alive(descendants(pid))) if "router" in command_line(p)), None)
def started_until(argv: list[str], ready, *, cwd, env, terminal, within_s: float = 180.0):
    """`argv` started in a session of its own, as a terminal starts a command (so a Ctrl-C is a signal to its group),
    with its output into `terminal`; returned once `ready()` holds, or it ended, or `within_s` passed."""
    import subprocess
    import time

    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=terminal, stderr=subprocess.STDOUT,
                               start_new_session=True)
    deadline = time.monotonic() + within_s
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return process


def ended_with_nothing_left(process, within_s: float, tree: set[int], terminal, late: str, left: str) -> str:
    """Wait up to `within_s` for `process` (AssertionError `late` if it still runs), check nothing of `tree` outlived
    it (AssertionError `left`), and return what it wrote to `terminal` (a file it printed to)."""
    import subprocess

    try:
        process.wait(within_s)
    except subprocess.TimeoutExpired:
        raise AssertionError(late) from None
    assert left_running(tree, 10) == set(), left
    terminal.seek(0)
    return terminal.read()
