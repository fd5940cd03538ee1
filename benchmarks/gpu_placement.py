"""Where a GPU engine's launch-to-launch noise comes from: the speed of each CPU, the engine's processes moved from
CPU to CPU inside one launch, and the first token at 8K split by the engine's own histograms. Prints ratios.

A 1B model on one H200 is CPU-bound: vLLM's engine core steps in Python, its API server streams every token in
Python, so a launch whose processes land on a slow CPU runs slow in every cell, while its requests agree with each
other. This probe launches the engine once per `--launches`, and inside each launch

1. times a fixed pure-Python loop on every CPU, three rounds apart (which CPUs are slow, and whether it stays so);
2. measures decode at 1 and 16 requests where the scheduler put the processes (natural), then with the engine
   core pinned to each CPU in turn (1 request) and the API server pinned to each CPU in turn (16 requests);
3. sends cold prefills of `--ttft-tokens` one at a time and splits the client's first token into vLLM's own
   queue, prefill, time-to-first-token and end-to-end histograms, through the openai SDK and through bare httpx.

    python benchmarks/gpu_placement.py --port 8123 --out placement.json -- vllm serve MODEL --port 8123 ...

Only 127.0.0.1 is spoken to; every loop is bounded by its seconds or its count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from servebook.measure.observers.host import busiest_thread
from servebook.measure.transport.client import RequestRecord, StreamRequest, measuring_clients, stream_request

PROC = Path("/proc")


def probe_ms(rounds: int = 200_000) -> float:
    started = time.perf_counter()
    total = 0
    for i in range(rounds):
        total += i * i % 7
    return (time.perf_counter() - started) * 1000


def cpu_table(cpus: list[int], rounds: int = 3) -> dict[int, list[float]]:
    """The probe on each CPU, `rounds` passes apart, in a child pinned there (the parent's own CPU stays free)."""
    table: dict[int, list[float]] = {cpu: [] for cpu in cpus}
    # the loop of probe_ms, inline: the child imports nothing, so it starts in milliseconds
    code = ("import os,sys,time\nos.sched_setaffinity(0,{int(sys.argv[1])})\n"
            "def probe():\n t=time.perf_counter();s=0\n for i in range(200000): s+=i*i%7\n"
            " return (time.perf_counter()-t)*1000\nprobe()\nprint(min(probe() for _ in range(3)))")
    for _ in range(rounds):
        for cpu in cpus:
            out = subprocess.run([sys.executable, "-c", code, str(cpu)],
                                 capture_output=True, text=True, timeout=60)
            table[cpu].append(float(out.stdout.strip()))
    return table


def topology(cpus: list[int]) -> dict[str, str]:
    def read(path: Path) -> str:
        try:
            return path.read_text().strip()
        except OSError:
            return "?"
    return {str(c): read(PROC.parent / f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") for c in cpus}


def tree(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            parents[int(stat.parent.name)] = int(text[text.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def comm(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of the process onto `cpus` (threads started later inherit the main thread's mask)."""
    for task in (PROC / str(pid) / "task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except OSError:
            pass


def scrape(base: str) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith(("_sum", "_count", "_total")):
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


def histogram_mean(before: dict[str, float], after: dict[str, float], name: str) -> float | None:
    count = after.get(f"{name}_count", 0.0) - before.get(f"{name}_count", 0.0)
    return (after.get(f"{name}_sum", 0.0) - before.get(f"{name}_sum", 0.0)) / count if count else None


async def decode(sdk, model: str, concurrency: int, seconds: float, vocab: int) -> dict[str, float]:
    """`concurrency` closed-loop streams of 512-token random prompts and 128 forced tokens for `seconds`."""
    records: list[RequestRecord] = []
    stop = time.monotonic() + seconds

    async def stream(worker: int) -> None:
        while time.monotonic() < stop:
            prompt = [random.randrange(1000, vocab) for _ in range(512)]
            record = RequestRecord(f"{worker}-{len(records)}", "probe", concurrency, "random", 128, 0.0)
            records.append(record)
            await stream_request(sdk, record, StreamRequest(model=model, max_tokens=128, prompt=prompt,
                                                            extra_body={"ignore_eos": True}, keep_chunk_times=False))

    started = time.monotonic()
    await asyncio.gather(*(stream(w) for w in range(concurrency)))
    wall = time.monotonic() - started
    rates = [r.decode_rate for r in records if r.decode_rate]
    tokens = sum(r.completion_tokens or 0 for r in records if r.ok)
    return {"per_request_tok_s": statistics.median(rates) if rates else float("nan"),
            "aggregate_tok_s": tokens / wall, "errors": float(sum(not r.ok for r in records))}


async def raw_prefill(http: httpx.AsyncClient, base: str, model: str, prompt: list[int]) -> float:
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "stream": True, "temperature": 0}
    sent = time.monotonic()
    async with http.stream("POST", f"{base}/v1/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and '"text"' in line:
                return time.monotonic() - sent
    return float("nan")


async def ttft_split(base: str, model: str, tokens: int, count: int, vocab: int) -> dict[str, dict]:
    """First token at `tokens` prompt tokens, sequential, through the SDK then bare httpx, with vLLM's histograms."""
    http, sdk = measuring_clients(base, "none", {}, 300)
    raw = httpx.AsyncClient(timeout=300)
    out: dict[str, dict] = {}
    for client in ("sdk", "httpx"):
        before = scrape(base)
        ttfts = []
        for _ in range(count):
            prompt = [random.randrange(1000, vocab) for _ in range(tokens)]
            if client == "sdk":
                record = RequestRecord("p", "prefill", 1, "random", 1, 0.0)
                await stream_request(sdk, record, StreamRequest(model=model, max_tokens=1, prompt=prompt))
                ttfts.append(record.ttft or float("nan"))
            else:
                ttfts.append(await raw_prefill(raw, base, model, prompt))
        after = scrape(base)
        out[client] = {"client_ttft_s": statistics.fmean(ttfts)} | {
            short: histogram_mean(before, after, f"vllm:{name}") for short, name in (
                ("engine_ttft_s", "time_to_first_token_seconds"), ("queue_s", "request_queue_time_seconds"),
                ("prefill_s", "request_prefill_time_seconds"), ("e2e_s", "e2e_request_latency_seconds"),
                ("inference_s", "request_inference_time_seconds"))}
    await http.aclose()
    await raw.aclose()
    return out


def gpu_clocks() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "no nvidia-smi"


def wait_ready(base: str, process: subprocess.Popen, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the engine exited with {process.returncode} before it was ready")
        try:
            models = httpx.get(f"{base}/v1/models", timeout=5)
            if models.status_code == 200:
                return models.json()["data"][0]["id"]
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"not ready in {timeout_s:.0f} s")


async def one_launch(args, command: list[str], cpus: list[int]) -> dict:
    base = f"http://127.0.0.1:{args.port}"
    log = open(args.log, "ab")
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        model = wait_ready(base, process, args.ready_timeout_s)
        result: dict = {"ready_s": time.monotonic() - started, "gpu_at_ready": gpu_clocks()}
        procs = {pid: comm(pid) for pid in tree(process.pid)}
        # vLLM names its engine core process VLLM::EngineCore; a one-process engine is its own core
        core = next((pid for pid, name in procs.items() if "EngineCor" in name), process.pid)
        result["processes"] = {str(pid): name for pid, name in procs.items()}
        http, sdk = measuring_clients(base, "none", {}, 300)
        await decode(sdk, model, 16, args.seconds, args.vocab)  # warm-up
        for c in (1, 16):
            result[f"natural_c{c}"] = await decode(sdk, model, c, args.seconds, args.vocab)
        result["natural_cpus"] = {procs[pid]: busiest_thread(pid) for pid in procs}
        result["gpu_under_load"] = gpu_clocks()
        result["probe_before"] = cpu_table(cpus, rounds=1)
        everything = set(cpus)
        if args.sweep:
            sweep_core, sweep_api = {}, {}
            for cpu in cpus:
                pin(core, {cpu})
                pin(process.pid, everything - {cpu})
                os.sched_setaffinity(0, everything - {cpu})
                sweep_core[cpu] = (await decode(sdk, model, 1, args.seconds, args.vocab))["per_request_tok_s"]
            pin(core, everything)
            for cpu in (cpus if core != process.pid else []):
                pin(process.pid, {cpu})
                pin(core, everything - {cpu})
                os.sched_setaffinity(0, everything - {cpu})
                sweep_api[cpu] = (await decode(sdk, model, 16, args.seconds, args.vocab))["aggregate_tok_s"]
            for pid in procs:
                pin(pid, everything)
            os.sched_setaffinity(0, everything)
            result["core_on_cpu_c1"], result["api_on_cpu_c16"] = sweep_core, sweep_api
        await http.aclose()
        result["ttft"] = await ttft_split(base, model, args.ttft_tokens, args.ttft_requests, args.vocab)
        result["probe_after"] = cpu_table(cpus, rounds=1)
        return result
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def spread(values: list[float]) -> str:
    good = [v for v in values if v == v]
    if len(good) < 2:
        return "n/a"
    return f"min {min(good):.1f}  max {max(good):.1f}  max/min {max(good) / min(good):.3f}  " \
           f"CV {100 * statistics.stdev(good) / statistics.fmean(good):.1f}%"


def report(results: dict) -> None:
    table = results["cpu_probe_ms"]
    print("pure-Python probe per CPU (ms, 3 rounds):", json.dumps(table))
    per_cpu = [min(v) for v in table.values()]
    print("  across CPUs:", spread(per_cpu))
    print("  across rounds, worst CPU:", max((max(v) / min(v) for v in table.values()), default=float("nan")))
    for i, launch in enumerate(results["launches"]):
        print(f"launch {i + 1}: ready in {launch['ready_s']:.0f} s; {launch['gpu_under_load']}")
        print(f"  natural: c1 {launch['natural_c1']['per_request_tok_s']:.0f} tok/s per request, "
              f"c16 {launch['natural_c16']['aggregate_tok_s']:.0f} tok/s; busiest threads {launch['natural_cpus']}")
        if "core_on_cpu_c1" in launch:
            print("  engine core per CPU, c1 tok/s:", spread(list(launch["core_on_cpu_c1"].values())))
            print("  API server per CPU, c16 tok/s:", spread(list(launch["api_on_cpu_c16"].values())))
        for client, split in launch["ttft"].items():
            ratio = split["client_ttft_s"] / split["prefill_s"] if split.get("prefill_s") else float("nan")
            parts = ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in split.items() if v is not None)
            print(f"  first token via {client}: {parts}; client / engine prefill {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=Path("/tmp/placement-engine.log"))
    parser.add_argument("--launches", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--ttft-tokens", type=int, default=8192)
    parser.add_argument("--ttft-requests", type=int, default=12)
    parser.add_argument("--ready-timeout-s", type=float, default=600)
    parser.add_argument("--no-sweep", dest="sweep", action="store_false")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    cpus = sorted(os.sched_getaffinity(0))
    results: dict = {"cpus": cpus, "siblings": topology(cpus), "cpu_probe_ms": cpu_table(cpus), "launches": []}
    for _ in range(args.launches):
        results["launches"].append(asyncio.run(one_launch(args, command, cpus)))
        args.out.write_text(json.dumps(results, indent=1))
    report(results)


if __name__ == "__main__":
    main()
