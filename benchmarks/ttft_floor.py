"""What servebook's own client adds to a measured time to first token: the TTFT of a server that answers at once.

A server in another process reads each request whole and writes its first token the moment it has; it stamps both
instants on the same monotonic clock the client stamps with (CLOCK_MONOTONIC, one per host). Whatever TTFT the
client then measures is the client's and the loopback's: sending the body after `t_send`, and reading and parsing
the first chunk. Two paths send the same 8K-token completion: the SDK on httpx (what decode, prefill and reuse cells
use) and the asyncio stream of measure/transport/sse.py (what the agents cell uses). On the slow lent H200, 12-19 ms of an 8K
prefill's client TTFT lay outside vLLM's own TTFT histogram; this measures how much of that a client can own.

    .venv/bin/python benchmarks/ttft_floor.py [--prompt-tokens 8192] [--requests 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from servebook.launch.process import free_port  # noqa: E402
from servebook.measure.transport.client import RequestRecord, StreamRequest, measuring_clients, stream_request  # noqa: E402
from servebook.measure.transport.direct import stream_direct  # noqa: E402
from servebook.measure.transport.sse import SseClient  # noqa: E402

FIRST = {"id": "c", "object": "text_completion", "model": "m", "choices": [{"index": 0, "text": "a", "finish_reason": None}]}
LAST = {"id": "c", "object": "text_completion", "model": "m",
        "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1}}


async def serve(port: int, stamps: Path, requests: int) -> None:
    """Answer `requests` completions, each on its connection, then stop; one line of stamps per request."""
    done = asyncio.Event()
    served = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # the probe that waited for the server to listen
            writer.close()
            return
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        received = time.monotonic()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                     + b"data: " + json.dumps(FIRST).encode() + b"\n\n")
        await writer.drain()
        written = time.monotonic()
        with stamps.open("a") as f:
            f.write(f"{received} {written}\n")
        try:  # a client may close once it has read [DONE]
            writer.write(b"data: " + json.dumps(LAST).encode() + b"\n\ndata: [DONE]\n\n")
            await writer.drain()
            writer.close()
        except ConnectionError:
            pass
        served += 1
        if served >= requests:
            done.set()

    server = await asyncio.start_server(answer, "127.0.0.1", port)
    async with server:
        await asyncio.wait_for(done.wait(), timeout=600)


def listening(port: int, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the server did not listen on {port} within {within_s:g} s")


def record(i: int) -> RequestRecord:
    return RequestRecord(request_id=f"r{i}", cell_id="prefill", concurrency=1, category="prose",
                         expected_completion_tokens=1, t_send=0.0)


async def measure(port: int, path: str, prompt: list[int], requests: int) -> list[RequestRecord]:
    request = StreamRequest(model="m", max_tokens=1, prompt=prompt)
    base = f"http://127.0.0.1:{port}"
    out = []
    if path == "sdk":
        http, sdk = measuring_clients(base, "none", {}, 60.0)
        async with http:
            for i in range(requests):
                out.append(await stream_request(sdk, record(i), request))
    else:
        streams = SseClient(60.0)
        for i in range(requests):
            out.append(await stream_direct(streams, base, {}, record(i), request))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=8192)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stamps", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.stamps, args.requests))
        return
    prompt = [(i * 7919) % 150000 + 10 for i in range(args.prompt_tokens)]
    print(f"TTFT of a server that answers at once, {args.prompt_tokens}-token prompts as ids, {args.requests} "
          "requests a path, one at a time (ms, medians)")
    print(f"{'path':<8} {'client TTFT':>12} {'send leg':>9} {'first-token leg':>16} {'p90 TTFT':>9}")
    medians = {}
    for path in ("sdk", "direct", "sdk", "direct"):  # twice each, interleaved: the host drifts
        port = free_port()
        with tempfile.TemporaryDirectory() as folder:
            stamps = Path(folder) / "stamps"
            server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--stamps", str(stamps),
                                       "--requests", str(args.requests)])
            try:
                listening(port)
                records = asyncio.run(measure(port, path, prompt, args.requests))
                server.wait(timeout=60)
            finally:
                server.kill()
            served = [tuple(map(float, line.split())) for line in stamps.read_text().splitlines()]
        errors = [r.error for r in records if r.error]
        if errors:
            raise SystemExit(f"{path}: {errors[0]}")
        ttft = [1e3 * (r.t_first - r.t_send) for r in records]
        send = [1e3 * (received - r.t_send) for r, (received, _) in zip(records, served, strict=True)]
        back = [1e3 * (r.t_first - written) for r, (_, written) in zip(records, served, strict=True)]
        p90 = statistics.quantiles(ttft, n=10)[-1]
        print(f"{path:<8} {statistics.median(ttft):>12.2f} {statistics.median(send):>9.2f} "
              f"{statistics.median(back):>16.2f} {p90:>9.2f}")
        medians.setdefault(path, []).append(statistics.median(ttft))
    sdk, direct = statistics.mean(medians["sdk"]), statistics.mean(medians["direct"])
    print(f"sdk / direct client TTFT: x{sdk / direct:.2f} ({sdk - direct:+.2f} ms a request)")


if __name__ == "__main__":
    main()
