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
import signal
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from ..util.errors import ServebookError
from .client import PREPARE_AHEAD_S, RequestRecord, StreamRequest, measuring_clients, stream_request
from .routing import Route

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
    #: several replicas: where the measured requests go (Endpoint.route)
    route: Route | None = None


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
                                     connection.timeout_s, connection.route)
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


#: how long the sending processes may take to start and import (seconds on a busy 2-core host)
START_S = 120.0
#: how long past its last due time a share may take beyond the request timeout before its senders are stopped
SHARE_SLACK_S = 30.0


def _sender_started(lifeline: Any) -> None:
    """What each sending process does first: it leaves SIGINT to its parent, and exits when `lifeline` ends.

    SIGINT: a terminal's Ctrl-C reaches the whole foreground group, senders included, and the parent decides what an
    interrupt stops (a sender killed by it would break the pool in the middle of a share).

    `lifeline` is the read end of a pipe whose only write end the parent holds (pipes are not inherited, and spawn
    hands a child only the descriptors it names), so it reads EOF the moment the parent is gone by any means,
    kill -9 included, or closes it on purpose (Senders.close). Not PR_SET_PDEATHSIG: it fires when the *thread*
    that spawned the child ends, and the pool spawns from whichever thread submits first (in a Jupyter kernel, a
    thread that ends with each cell), and it is Linux only. Not a poll of os.getppid(): a sender would go on
    sending until its next poll, and the pipe also serves Senders.close."""
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked since the spawn (Senders._started)

    def watch() -> None:
        try:
            lifeline.recv_bytes()  # nothing is ever sent: this returns only at EOF, as EOFError
        except (EOFError, OSError):
            pass
        os._exit(1)  # now, in the middle of a share: its event loop and its requests are of no further use

    threading.Thread(target=watch, name="servebook-lifeline", daemon=True).start()


def _lost(share: list[Send]) -> list[RequestRecord]:
    """The records of a share whose sending process died before it returned them: what was sent is not known."""
    for item in share:
        record = item.record
        record.error = "the sending process died before it returned this request's record (BrokenProcessPool)"
        record.t_send = record.t_due or 0.0  # unknown: on schedule, so that no lag or order is made up
    return [item.record for item in share]


class Senders:
    """A pool of sending processes, started on first use and kept until `close`.

    concurrent.futures' process pool, not multiprocessing.Pool: a worker that dies fails its pending futures
    (BrokenProcessPool) where multiprocessing.Pool replaces the worker and waits for its result forever. Nothing
    here waits without a bound, and an interrupted send stops its senders before the interrupt goes on."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._size = 0
        self._lifeline: tuple[Any, Any] | None = None  # (read end, handed to each sender; write end, kept here)

    async def _started(self, size: int) -> ProcessPoolExecutor:
        import multiprocessing

        if self._pool is not None and self._size != size:
            self.close()
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._lifeline = context.Pipe(duplex=False)
            self._pool = ProcessPoolExecutor(size, mp_context=context, initializer=_sender_started,
                                             initargs=(self._lifeline[0],))
            self._size = size
            # Every process imports and answers before the schedule's clock starts, so start-up is not lag; the
            # pool spawns one process per call it cannot give to an idle one, so these start all `size`.
            # Spawned with SIGINT blocked, as the standard library spawns its resource tracker: a Ctrl-C while a
            # sender still imports would otherwise kill it with a traceback; it ignores SIGINT once started.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                ready = [self._pool.submit(_ready, k) for k in range(size)]
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            await self._settled(ready, START_S)
            if not all(f.done() and not f.cancelled() and f.exception() is None for f in ready):
                self.close()
                raise ServebookError(f"the {size} sending processes did not start within {START_S:g} s")
        assert self._pool is not None
        return self._pool

    async def _settled(self, futures: list[Future], timeout_s: float) -> None:
        """Until every future is done, `timeout_s` at most; on any interrupt, or past the bound, the senders are
        stopped, which fails the futures still running. The wait runs on a thread of its own and is never
        cancelled into the futures: a pending future cancelled there would fail the pool's own thread later."""
        try:
            _, running = await asyncio.to_thread(wait, futures, timeout_s)
        except BaseException:
            self.close()
            raise
        if running:
            self.close()

    async def send(self, connection: Connection, sends: list[Send], processes: int, lead_s: float = 0.25,
                   on_done: Callable[[], None] | None = None) -> list[RequestRecord]:
        """Send `sends` (their `t_due` counted from the schedule's start) from `processes` processes, dealt
        round-robin; the schedule starts `lead_s` after the processes are ready. A share whose sender died comes
        back as failed requests (the cell is then invalid, requests_failed), and the next send starts new senders."""
        pool = await self._started(processes)
        start = time.monotonic() + lead_s
        for item in sends:
            item.record.t_due = start + (item.record.t_due or 0.0)
        shares = [sends[k::processes] for k in range(processes)]
        futures = [pool.submit(_send_share, connection, share, k) for k, share in enumerate(shares)]
        last_due = max((item.record.t_due or start for item in sends), default=start)
        await self._settled(futures, last_due - time.monotonic() + connection.timeout_s + SHARE_SLACK_S)
        records: list[RequestRecord] = []
        for share, future in zip(shares, futures, strict=True):
            if future.cancelled() or isinstance(future.exception(), BrokenProcessPool):
                found = _lost(share)
                self.close()  # a broken pool takes no more work
            else:
                found = future.result()  # an error of servebook's own in the sender is raised here
            records += found
            for _ in found:
                if on_done is not None:
                    on_done()
        return records

    def close(self) -> None:
        """Stop every sender now, busy or not, and wait until the pool has reaped them."""
        if self._pool is not None and self._lifeline is not None:
            pool, (read_end, write_end) = self._pool, self._lifeline
            self._pool, self._lifeline = None, None
            write_end.close()  # each sender reads EOF and exits (_sender_started)
            pool.shutdown(wait=True, cancel_futures=True)
            read_end.close()
