"""What does sampling the engine's gauges during a cell cost the measurement?

The sampler (measure.observers.gauges) polls /metrics on the measuring client's event loop. Against the real llama-server
(tiny model) this prints:

1. the client CPU the sampler alone takes (process CPU over wall time, idle server), per poll and in cores;
2. how long one poll's parsing holds the event loop, for llama.cpp's page and for a vLLM-sized page built from the
   recorded contract (every sample of vLLM 0.33 with its labels, histograms with 20 buckets), parsing only the
   gauges' samples (what the sampler does) against parsing the whole page;
3. decode at concurrency 3 with sampling off, at 250 ms (the default) and at 50 ms, interleaved in rounds: the
   ratio of ITL p50 / p99 and aggregate tok/s to the unsampled arm (1.00: no effect).

    .venv/bin/python benchmarks/gauge_sampling.py [--rounds 4] [--requests 12] [--tokens 96]   (--rounds 0: costs only)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from servebook.engines import get_engine  # noqa: E402
from servebook.engines.contracts import recorded_contracts  # noqa: E402
from servebook.engines.counters import gauge_names, parse_metrics, parse_only  # noqa: E402
from servebook.launch.preflight import preflight  # noqa: E402
from servebook.launch.process import EngineProcess, free_port  # noqa: E402
from servebook.measure.figures.itl import itl_figures  # noqa: E402
from servebook.measure.observers.gauges import GaugeSampler, gauge_client  # noqa: E402
from servebook.measure.prompts import decode_prompt  # noqa: E402
from servebook.measure.transport.client import RequestRecord, StreamRequest, measuring_clients, stream_request  # noqa: E402
from servebook.util.progress import Reporter  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.helpers.candidates import tiny_candidate  # noqa: E402


def vllm_page() -> str:
    """Every sample vLLM 0.33 exports, once per label set, histograms with 20 buckets: a page of its real size."""
    contract = recorded_contracts()[("vllm", "0.33.0")]
    lines = []
    for m in contract.metrics:
        labels = ",".join(f'{label}="0"' for label in m.labels)
        if m.type == "histogram" and m.name.endswith("_count"):
            base = m.name.removesuffix("_count")
            lines += [f'{base}_bucket{{{labels},le="{2 ** i / 1000:g}"}} {i}' for i in range(20)]
        lines.append(f"{m.name}{{{labels}}} 1.0")
    return "\n".join(lines) + "\n"


def hold_ms(text: str, names: frozenset[str] | None, repeats: int = 200) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        parse_only(text, names) if names is not None else parse_metrics(text)
    return 1000 * (time.perf_counter() - started) / repeats


async def sampler_cpu(base_url: str, interval_s: float, seconds: float) -> tuple[float, int]:
    http = gauge_client({})
    sampler = GaugeSampler(http, (base_url,), get_engine("llamacpp").gauges, interval_s)
    cpu, wall = time.process_time(), time.monotonic()
    async with sampler:
        await asyncio.sleep(seconds)
    used = (time.process_time() - cpu) / (time.monotonic() - wall)
    await http.aclose()
    return used, len(sampler.samples)


async def decode_arm(base_url: str, interval_s: float | None, requests: int, tokens: int, tag: str) -> dict:
    http, sdk = measuring_clients(base_url, "servebook", {}, 120.0)
    gauges = gauge_client({})
    adapter = get_engine("llamacpp")
    records: list[RequestRecord] = []

    async def stream() -> None:
        while len(records) < requests:
            i = len(records)
            record = RequestRecord(f"{tag}-{i}", "bench", 3, "prose", tokens, t_send=0.0)
            records.append(record)
            await stream_request(sdk, record, StreamRequest("default", tokens, messages=decode_prompt("prose", i, tag),
                                                            extra_body=adapter.request_extras(tokens)))

    async with GaugeSampler(gauges, (base_url,), adapter.gauges, interval_s):
        started = time.monotonic()
        await asyncio.gather(*(stream() for _ in range(3)))
        wall = time.monotonic() - started
    await http.aclose()
    await gauges.aclose()
    itl = itl_figures(records)
    return {"p50": itl["itl_p50_s"], "p99": itl["itl_p99_s"],
            "tok_s": sum(r.completion_tokens or 0 for r in records) / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()

    names = gauge_names(get_engine("vllm").gauges)
    page = vllm_page()
    print(f"vLLM-sized page ({len(page.splitlines())} lines): parse all {hold_ms(page, None):.2f} ms, "
          f"the gauges only {hold_ms(page, names):.3f} ms per poll")

    candidate = tiny_candidate(knobs={"chunk_size": 256, "max_running_requests": 4, "context_length": 8192})
    paths = preflight(candidate, Reporter(quiet=True))
    port = free_port()
    adapter = get_engine("llamacpp")
    argv = adapter.argv(candidate, port=port, model_path=paths.model_path, draft_path=None,
                        binary=paths.engine_binary, backend=paths.backend)
    with tempfile.TemporaryDirectory() as tmp, EngineProcess(argv, adapter, f"http://127.0.0.1:{port}",
                                                             Path(tmp) / "engine.log") as engine:
        engine.wait_ready(60)
        base = engine.base_url
        import httpx

        text = httpx.get(f"{base}/metrics").text
        llama = gauge_names(adapter.gauges)
        print(f"llama.cpp page ({len(text.splitlines())} lines): parse all {hold_ms(text, None):.3f} ms, "
              f"the gauges only {hold_ms(text, llama):.3f} ms per poll")
        for interval in (0.25, 0.05):
            cores, polls = asyncio.run(sampler_cpu(base, interval, 10.0))
            print(f"sampler alone at {1000 * interval:.0f} ms: {cores:.4f} cores of client CPU "
                  f"({polls} polls in 10 s, {1000 * cores * 10 / max(polls, 1):.2f} ms CPU per poll)")
        arms: dict[str, list[dict]] = {"off": [], "250 ms": [], "50 ms": []}
        intervals = {"off": None, "250 ms": 0.25, "50 ms": 0.05}
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for name in order:
                arms[name].append(asyncio.run(decode_arm(base, intervals[name], args.requests, args.tokens,
                                                         f"bench-{r}-{name}")))
    if not args.rounds:
        return
    base_arm = {k: statistics.median(a[k] for a in arms["off"]) for k in ("p50", "p99", "tok_s")}
    print(f"decode c3, {args.requests} x {args.tokens} tokens, {args.rounds} rounds; unsampled: ITL p50 "
          f"{1000 * base_arm['p50']:.2f} ms, p99 {1000 * base_arm['p99']:.2f} ms, {base_arm['tok_s']:.0f} tok/s")
    for name in arms:
        ratios = {k: statistics.median(a[k] for a in arms[name]) / base_arm[k] for k in base_arm}
        spread = {k: f"{min(a[k] for a in arms[name]) / base_arm[k]:.2f}-{max(a[k] for a in arms[name]) / base_arm[k]:.2f}"
                  for k in base_arm}
        print(f"  {name}: ITL p50 x{ratios['p50']:.3f} (rounds {spread['p50']}), p99 x{ratios['p99']:.3f} "
              f"({spread['p99']}), aggregate x{ratios['tok_s']:.3f} ({spread['tok_s']})")


if __name__ == "__main__":
    main()
