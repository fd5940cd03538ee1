from pathlib import Path

import httpx

from tests.conftest import SMALL_PLAN, tiny_candidate  # noqa: F401  (shared factories)


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
