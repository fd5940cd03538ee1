from pathlib import Path

import httpx

from servebook.config import Candidate
from servebook.config import DecodePlan, Plan, PrefillPlan

SMALL_PLAN = Plan(
    name="small",
    decode=DecodePlan(concurrency=[1, 2], categories=["prose", "code"], output_tokens=16, rounds=1),
    prefill=PrefillPlan(prompt_tokens=[256, 1024], requests=1),
    warmup_requests=1,
)


def tiny_candidate(**overrides) -> Candidate:
    data = {"name": "tiny-test", "engine": "llamacpp", "model": {"path": "tiny:target"},
            "knobs": {"chunk_size": 256, "max_running_requests": 2, "context_length": 8192}}
    data.update(overrides)
    return Candidate.model_validate(data)


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
