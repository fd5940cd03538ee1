"""Open-loop load from several client processes.

One process's event loop sustains 50 to 150 requests/s against an engine that answers at once
(benchmarks/client_ceiling.py, 2-core machines); asked for more, it falls behind its schedule, and the cell measures
the client's pace instead of the engine's (client_lag). Beyond that, the arrivals are dealt round-robin to processes of their
own, each sending its share on the one schedule: CLOCK_MONOTONIC is the machine's, so a due time set here means
the same instant in every process, and the records come back with times on the same clock.

The processes are spawned (a fork of a process that runs an event loop and threads is not safe) once per run and
kept, so a capacity search's probes do not pay the start-up each time.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .client import PREPARE_AHEAD_S, RequestRecord, StreamRequest, measuring_clients, stream_request

#: what one sending process is given at most when the plan leaves the count to servebook: requests/s, below the
#: ceilings measured against the simulator on 2-core machines (50/s on a busy one, 150/s on a quiet one, 16-token
#: outputs), and streamed chunks/s: one process fell behind at 32 requests/s of 128 tokens each (4,096 chunks/s, on
#: an H200 host) where 150 of 16 (2,400 chunks/s) kept its schedule
RATE_PER_PROCESS = 40.0
CHUNKS_PER_PROCESS = 1500.0


def processes_for(rate: float, asked: int | None, cores: int | None = None, output_tokens: float = 16.0) -> int:
    """How many processes send a load of `rate` requests/s of `output_tokens` each: as many as the plan asks
    (`asked`), or enough that none is given more than RATE_PER_PROCESS requests or CHUNKS_PER_PROCESS streamed
    chunks a second, on at most half the machine's cores (the rest serve the engine, when it runs here too)."""
    if asked is not None:
        return asked
    cores = cores if cores is not None else (os.cpu_count() or 1)
    needed = max(rate / RATE_PER_PROCESS, rate * output_tokens / CHUNKS_PER_PROCESS)
    return max(1, min(math.ceil(needed), cores // 2))


@dataclass(frozen=True)
class Connection:
    """What a sending process needs to reach the engine (picklable)."""

    base_url: str
    api_key: str
    headers: dict[str, str]
    timeout_s: float


@dataclass
class Send:
    """One request of a share: its record (t_due already on the machine's monotonic clock) and what to send."""

    record: RequestRecord
    request: StreamRequest


def _ready(_: int) -> int:
    """Imported and warm: the SDK builds its request types on first use (tens of milliseconds), which would make
    the first sends late. One request is prepared in full and sent to a port where nothing listens."""
    import socket

    async def rehearse() -> None:
        from openai import AsyncOpenAI

        with socket.socket() as probe:  # a free port, closed again: the connection is refused at once
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        client = AsyncOpenAI(api_key="servebook", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=2)
        try:
            await client.completions.create(model="m", prompt=[1, 2, 3], max_tokens=2, stream=True,
                                            stream_options={"include_usage": True})
        except Exception:  # noqa: BLE001 - refused, as meant
            pass
        finally:
            await client.close()

    asyncio.run(rehearse())
    return os.getpid()


def _send_share(connection: Connection, share: list[Send], process: int) -> list[RequestRecord]:
    return asyncio.run(_send(connection, share, process))


async def _send(connection: Connection, share: list[Send], process: int) -> list[RequestRecord]:
    http, client = measuring_clients(connection.base_url, connection.api_key, connection.headers,
                                     connection.timeout_s)
    try:
        await send_on_schedule(client, share, process)
    finally:
        await http.aclose()
    return [item.record for item in share]


async def send_on_schedule(client: Any, sends: list[Send], process: int | None = None,
                           on_done: Callable[[], None] | None = None) -> None:
    """Each request through `client` at its `t_due`: started PREPARE_AHEAD_S early, so that the SDK's work on it is
    done by then, and held by the send hook until it is due."""

    async def one(item: Send) -> None:
        await asyncio.sleep(max(0.0, (item.record.t_due or 0.0) - PREPARE_AHEAD_S - time.monotonic()))
        item.record.client_process = process
        await stream_request(client, item.record, item.request)
        if on_done is not None:
            on_done()

    await asyncio.gather(*(one(item) for item in sends))


class Senders:
    """A pool of sending processes, started on first use and kept until `close`."""

    def __init__(self) -> None:
        self._pool: Any = None
        self._size = 0

    async def _started(self, size: int) -> Any:
        import multiprocessing

        if self._pool is not None and self._size != size:
            self.close()
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(size)
            self._size = size
            # Every process imports and answers before the schedule's clock starts, so start-up is not lag.
            await asyncio.to_thread(self._pool.map, _ready, range(size), 1)
        return self._pool

    async def send(self, connection: Connection, sends: list[Send], processes: int, lead_s: float = 0.25,
                   on_done: Callable[[], None] | None = None) -> list[RequestRecord]:
        """Send `sends` (their `t_due` counted from the schedule's start) from `processes` processes, dealt
        round-robin; the schedule starts `lead_s` after the processes are ready."""
        pool = await self._started(processes)
        start = time.monotonic() + lead_s
        for item in sends:
            item.record.t_due = start + (item.record.t_due or 0.0)
        shares = [sends[k::processes] for k in range(processes)]
        pending = [pool.apply_async(_send_share, (connection, share, k)) for k, share in enumerate(shares)]
        records: list[RequestRecord] = []
        for result in pending:
            found = await asyncio.to_thread(result.get)
            records += found
            for _ in found:
                if on_done is not None:
                    on_done()
        return records

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
