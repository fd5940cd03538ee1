"""The agents cell's streams on asyncio's own transports: one connection per request, as the measuring client opens
(no keep-alive), HTTP/1.1 read by hand, each server-sent event's `data:` line handed back parsed.

Why not httpx: 256 sessions against an engine that batches them get a token each in one step, and the loop reads
them one after another while a turn due meanwhile waits. Through httpx a chunk cost about 0.25 ms of the loop
(h11's parser, anyio's stream re-arming the socket in epoll on every read, six async generators, the pool's walk
over every open connection on each request), so those bursts held turns 25 to 60 ms past their due times at the
p99; here a chunk is a buffer append, a find and a JSON parse. What it leaves out of httpx: proxies from the
environment (engines are reached directly) and content encodings (none is asked for).

Replicas without a router: the request goes to the replica `routing.Rotation` picks, as the httpx transport sends
it, and a replica that refuses the connection is taken out of rotation there too.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from .routing import Rotation, Route, session_key

#: as the measuring client's httpx.Timeout(timeout_s, connect=10)
CONNECT_TIMEOUT_S = 10.0


class DirectStatusError(Exception):
    """An engine's refusal of a request sent without the SDK (the status and the body the engine gave)."""


class _Connection(asyncio.Protocol):
    """A connection's bytes as they arrive, a wait for more, and a watchdog that ends the wait after `timeout_s`
    without a byte (httpx's read timeout): one timer a connection, re-armed when it fires, not one a read."""

    def __init__(self, timeout_s: float):
        self.loop = asyncio.get_running_loop()
        self.timeout_s = timeout_s
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.ended = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.heard = self.loop.time()
        self.watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.watch = self.loop.call_later(self.timeout_s, self._check)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.heard = self.loop.time()
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended, self.error = True, self.error or exc
        if self.watch is not None:
            self.watch.cancel()
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _check(self) -> None:
        idle = self.loop.time() - self.heard
        if idle < self.timeout_s:
            self.watch = self.loop.call_later(self.timeout_s - idle, self._check)
            return
        self.error = TimeoutError(f"the engine sent nothing for {self.timeout_s:g} s (ReadTimeout)")
        self.ended = True
        self._wake()
        if self.transport is not None:
            self.transport.abort()

    async def more(self) -> None:
        """Until more bytes have come; raises once the connection has ended with nothing left unread."""
        if self.ended:
            raise self.error or ConnectionError("the engine closed the connection before the response ended")
        self.waiter = self.loop.create_future()
        await self.waiter


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def _head(url: str, headers: dict[str, str], length: int) -> tuple[str, str, int, bytes]:
    """(scheme, host, port, the request's line and headers) of a POST of `length` JSON bytes to `url`."""
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc}", "Accept: */*", "Connection: close",
             "User-Agent: servebook", "Content-Type: application/json", f"Content-Length: {length}",
             *(f"{name}: {value}" for name, value in headers.items())]
    return scheme, host, port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _response_head(conn: _Connection) -> tuple[int, dict[str, str]]:
    """The status and the headers (names lowercased), once they are in; what follows stays in the buffer."""
    while (end := conn.buffer.find(b"\r\n\r\n")) < 0:
        await conn.more()
    lines = bytes(conn.buffer[:end]).decode("latin-1").split("\r\n")
    del conn.buffer[:end + 4]
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


class _Body:
    """The response's body as it arrives, out of its framing: chunked, of a stated length, or up to the close."""

    def __init__(self, headers: dict[str, str]):
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        self.left = int(length) if length is not None and not self.chunked else None
        self.done = self.left == 0

    def take(self, raw: bytearray, out: bytearray, ended: bool) -> None:
        """Move what `raw` holds of the body into `out`; `done` once the body is complete."""
        if not self.chunked:
            if self.left is not None:
                piece = raw[:self.left]
                self.left -= len(piece)
                self.done = self.left == 0
            else:
                piece, self.done = raw[:], ended
            out += piece
            del raw[:len(piece)]
            return
        while not self.done and (line := raw.find(b"\r\n")) >= 0:
            size = int(bytes(raw[:line]).split(b";", 1)[0], 16)
            if size == 0:
                self.done = True  # trailers, if any, are not read
            elif len(raw) < line + 4 + size:
                return
            out += raw[line + 2:line + 2 + size]
            del raw[:line + 4 + size]


class SseClient:
    """Streams of server-sent events, each request on a connection of its own. `route`: several replicas (as
    `Endpoint.route`): the router, or the next replica in turn, a conversation's turns on one."""

    def __init__(self, timeout_s: float, route: Route | None = None):
        self.timeout_s = timeout_s
        self.router = route.router if route is not None else None
        self.session_header = route.session_header if route is not None else None
        self.picker = Rotation(route.replicas) if route is not None and route.router is None else None

    def _target(self, url: str, record: Any) -> tuple[str, int | None]:
        if self.picker is None and self.router is None:
            return url, None
        path = urlsplit(url)
        if self.router is not None:
            return urlsplit(self.router)._replace(path=path.path, query=path.query).geturl(), None
        assert self.picker is not None
        index = self.picker.pick(record)
        if record is not None:
            record.replica = index
        base = urlsplit(self.picker.replicas[index])
        return base._replace(path=path.path, query=path.query).geturl(), index

    async def events(self, url: str, headers: dict[str, str], payload: bytes, record: Any = None
                     ) -> AsyncIterator[dict[str, Any]]:
        """POST `payload` (JSON) to `url`; each event's `data:` parsed, up to `[DONE]` or the end of the body. A
        status of 400 or more raises DirectStatusError with the engine's body; a stream's error event too."""
        url, index = self._target(url, record)
        key = session_key(record) if self.router is not None and self.session_header else None
        if key is not None:  # as the httpx transport keys a conversation's turns to a router (routing.RouteTransport)
            headers = {**headers, str(self.session_header): key}
        scheme, host, port, head = _head(url, headers, len(payload))
        try:
            transport, conn = await asyncio.wait_for(asyncio.get_running_loop().create_connection(
                lambda: _Connection(self.timeout_s), host, port, ssl=_tls() if scheme == "https" else None),
                CONNECT_TIMEOUT_S)
        except OSError:
            if index is not None and self.picker is not None:
                self.picker.down.add(index)
            raise
        try:
            transport.write(head + payload)
            conn.heard = conn.loop.time()
            status, response_headers = await _response_head(conn)
            body, out = _Body(response_headers), bytearray()
            if status >= 400:
                while not body.done:
                    body.take(conn.buffer, out, conn.ended)
                    if not body.done:
                        await conn.more()
                raise DirectStatusError(f"Error code: {status} - {out.decode('utf-8', 'replace')}")
            async for value in _data(conn, body, out):
                yield value
        finally:
            transport.close()


async def _data(conn: _Connection, body: _Body, out: bytearray) -> AsyncIterator[dict[str, Any]]:
    """Each `data:` line's JSON, as its line is complete, until `[DONE]` or the body's end."""
    while True:
        body.take(conn.buffer, out, conn.ended)
        while (end := out.find(b"\n")) >= 0:
            line = bytes(out[:end]).rstrip(b"\r")
            del out[:end + 1]
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return
            value = json.loads(data)
            if isinstance(value, dict) and value.get("error"):
                raise DirectStatusError(f"the stream reported an error: {value['error']}")
            yield value
        if body.done:
            return
        await conn.more()
