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

from ...util.errors import EngineFailed, ServebookError
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


class EngineWatch:
    """Stops an open-loop schedule once its engine is gone. A failed request has the engine's liveness checked
    (`alive_check`, which raises EngineFailed for a dead engine, on a thread: it may wait a moment for a dying one to
    be reaped), one check at a time; a check that finds it dead stops every request not yet sent. A schedule sent on
    into a dead engine has each request refused at its due time, and the death was told when the schedule was over:
    34.9 s after a crash 1 s into a capacity probe of 124 requests at 4 requests/s."""

    def __init__(self, alive_check: Callable[[], None]):
        self._alive_check = alive_check
        self.stopped = asyncio.Event()
        self._checking: asyncio.Task | None = None

    def failed(self) -> None:
        if not self.stopped.is_set() and (self._checking is None or self._checking.done()):
            self._checking = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        try:
            await asyncio.to_thread(self._alive_check)
        except EngineFailed:  # raised again where the cell's failed requests are read (Measurement.run_cell)
            self.stopped.set()

    async def waited(self, seconds: float) -> bool:
        """Wait `seconds`, or less if the schedule is stopped meanwhile; whether it goes on."""
        if seconds > 0 and not self.stopped.is_set():
            try:
                await asyncio.wait_for(self.stopped.wait(), seconds)
            except TimeoutError:
                pass
        return not self.stopped.is_set()

    def close(self) -> None:
        if self._checking is not None:
            self._checking.cancel()


async def send_on_schedule(client: Any, sends: list[Send], process: int | None = None,
                           on_done: Callable[[], None] | None = None,
                           watch: EngineWatch | None = None) -> list[RequestRecord]:
    """Each request through `client` at its `t_due`: started PREPARE_AHEAD_S early, so that the SDK's work on it is
    done by then, and held by the send hook until it is due. Returns the records of the requests sent: all of them,
    unless `watch` found the engine dead and stopped the rest."""
    sent: set[int] = set()

    async def one(i: int, item: Send) -> None:
        delay = max(0.0, (item.record.t_due or 0.0) - PREPARE_AHEAD_S - time.monotonic())
        if watch is None:
            await asyncio.sleep(delay)
        elif not await watch.waited(delay):
            return
        sent.add(i)
        item.record.client_process = process
        await stream_request(client, item.record, item.request)
        if item.record.error and watch is not None:
            watch.failed()
        if on_done is not None:
            on_done()

    try:
        await asyncio.gather(*(one(i, item) for i, item in enumerate(sends)))
    finally:
        if watch is not None:
            watch.close()
    return [item.record for i, item in enumerate(sends) if i in sent]


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


#: how often the senders' parent checks the engine while they send (its check itself waits up to 2 s for a dying
#: engine to be reaped): the parent hears nothing of their requests, so it cannot wait for a failed one
WATCH_S = 1.0
#: why a share's records did not come back: its sender died, or the engine did and the senders were stopped
SENDER_DIED = "the sending process died before it returned this request's record (BrokenProcessPool)"
ENGINE_DIED = "the engine died while this request's share was sent; its senders were stopped"


async def _until_dead(alive_check: Callable[[], None]) -> None:
    """Returns once `alive_check` finds the engine dead (it raises EngineFailed then)."""
    while True:
        try:
            await asyncio.to_thread(alive_check)
        except EngineFailed:
            return
        await asyncio.sleep(WATCH_S)


def _lost(share: list[Send], why: str = SENDER_DIED) -> list[RequestRecord]:
    """The records of a share whose sending process died before it returned them: what was sent is not known."""
    for item in share:
        record = item.record
        record.error = why
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

    async def _settled(self, futures: list[Future], timeout_s: float,
                       alive_check: Callable[[], None] | None = None) -> bool:
        """Until every future is done, `timeout_s` at most; on any interrupt, past the bound, or once `alive_check`
        finds the engine dead, the senders are stopped, which fails the futures still running. The wait runs on a
        thread of its own and is never cancelled into the futures: a pending future cancelled there would fail the
        pool's own thread later. Whether the engine died."""
        waiting = asyncio.ensure_future(asyncio.to_thread(wait, futures, timeout_s))
        watching = asyncio.ensure_future(_until_dead(alive_check)) if alive_check is not None else None
        died = False
        try:
            if watching is not None:
                await asyncio.wait({waiting, watching}, return_when=asyncio.FIRST_COMPLETED)
                if watching.done() and not waiting.done():
                    watching.result()  # an error of the check's own is raised, not lost
                    died = True
                    self.close()
            _, running = await waiting
        except BaseException:
            self.close()
            raise
        finally:
            if watching is not None:
                watching.cancel()
        if running:
            self.close()
        return died

    async def send(self, connection: Connection, sends: list[Send], processes: int, lead_s: float = 0.25,
                   on_done: Callable[[], None] | None = None,
                   alive_check: Callable[[], None] | None = None) -> list[RequestRecord]:
        """Send `sends` (their `t_due` counted from the schedule's start) from `processes` processes, dealt
        round-robin; the schedule starts `lead_s` after the processes are ready. A share whose sender died comes
        back as failed requests (the cell is then invalid, requests_failed), and the next send starts new senders.
        `alive_check` is run every WATCH_S while they send: an engine it finds dead stops the senders at once, and
        their shares come back failed as well."""
        pool = await self._started(processes)
        start = time.monotonic() + lead_s
        for item in sends:
            item.record.t_due = start + (item.record.t_due or 0.0)
        shares = [sends[k::processes] for k in range(processes)]
        futures = [pool.submit(_send_share, connection, share, k) for k, share in enumerate(shares)]
        last_due = max((item.record.t_due or start for item in sends), default=start)
        died = await self._settled(futures, last_due - time.monotonic() + connection.timeout_s + SHARE_SLACK_S,
                                   alive_check)
        records: list[RequestRecord] = []
        for share, future in zip(shares, futures, strict=True):
            if future.cancelled() or isinstance(future.exception(), BrokenProcessPool):
                found = _lost(share, ENGINE_DIED if died else SENDER_DIED)
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
