"""Where each measured request goes when several replicas serve: the router, or every replica in turn.

Without a router servebook is the load balancer: each measured request goes to the next replica in turn, and a
conversation's turns (reuse cells) stay on one replica, as a cache-aware router keeps them near their cached
prefix. A replica that refuses a connection is taken out of rotation; the request that found it dead is lost (it
is recorded with its error, not retried). With a router, every measured request goes to the router and the router
decides; where the candidate names the router's session header, every turn of a conversation carries its session's
key in it (`session_key`), so that a router that pins keys keeps the conversation where its prefix is cached.

What every replica answers alike (the tokenizer, the model list: one engine configuration) is asked of the replica
it was addressed to (the first), and of the next one still serving when that one refuses: a run whose first
replica died measures on with the others. A replica's /metrics is never asked of another, as that would count the
other's tokens twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

#: the requests a router or servebook spreads: the measured ones
ROUTED_PATHS = ("/v1/chat/completions", "/v1/completions")
#: what any replica answers as the first would
SHARED_PATHS = ("/tokenize", "/detokenize", "/v1/models")


@dataclass(frozen=True)
class Route:
    """Where the measured requests go instead of the endpoint's base URL (picklable, for the sending processes)."""

    #: every replica's URL; servebook picks one per measured request where there is no router
    replicas: tuple[str, ...]
    #: the router every measured request goes through (None: servebook spreads them)
    router: str | None = None
    #: the header a conversation's turns carry their session's key in to the router (launch.router.session_header)
    session_header: str | None = None

    @classmethod
    def of(cls, replica_urls: Sequence[str], router_url: str | None,
           session_header: str | None = None) -> "Route | None":
        """None for one engine."""
        return cls(tuple(replica_urls), router_url, session_header if router_url else None) if replica_urls else None

    def transport(self, inner: httpx.AsyncBaseTransport, current: Callable[[], Any]) -> "RouteTransport":
        return RouteTransport(inner, self, current=current)


def session_key(record: Any) -> str | None:
    """The key of the session a request belongs to: its cell's and its root conversation's (a sub-agent's turns are
    its parent's, whose history they start from); None outside conversations (single requests, trace replay)."""
    if record is None or record.conversation is None:
        return None
    root = record.parent_conversation if record.parent_conversation is not None else record.conversation
    return f"{record.cell_id}/{root}"


class Rotation:
    """The replicas measured requests go to in turn, a conversation's turns to one, never one that refused: the
    httpx transport's choice (RouteTransport) and the agents cell's streams' (measure.transport.sse)."""

    def __init__(self, replicas: Sequence[Any]):
        self.replicas = list(replicas)
        self.down: set[int] = set()
        self._next = 0

    def pick(self, record: Any) -> int:
        """The next replica in rotation; a conversation's replica for its turns; never one that refused."""
        n = len(self.replicas)
        serving = [i for i in range(n) if i not in self.down] or list(range(n))  # all refused: this one finds out
        if record is not None and record.conversation is not None:
            home = record.conversation % n
            return home if home in serving else serving[record.conversation % len(serving)]
        self._next += 1
        return serving[(self._next - 1) % len(serving)]


class RouteTransport(Rotation, httpx.AsyncBaseTransport):
    """Sends each measured request to the router or to one replica in turn, recording the replica it chose on the
    request's record; shared requests fail over to a replica still serving; every other request goes where it was
    addressed."""

    def __init__(self, inner: httpx.AsyncBaseTransport, route: Route, *, current: Callable[[], Any] = lambda: None):
        super().__init__([httpx.URL(u) for u in route.replicas])
        self.inner = inner
        self.current = current  # the record of the request being sent (measure.transport.client.sending_record)
        self.router = httpx.URL(route.router) if route.router else None
        self.session_header = route.session_header

    def _index(self, url: httpx.URL) -> int | None:
        return next((i for i, r in enumerate(self.replicas) if (r.host, r.port) == (url.host, url.port)), None)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in ROUTED_PATHS:
            return await self._routed(request)
        if path in SHARED_PATHS:
            return await self._shared(request)
        return await self.inner.handle_async_request(request)

    async def _routed(self, request: httpx.Request) -> httpx.Response:
        record = self.current()
        if self.router is not None:
            header, key = self.session_header, session_key(record)
            if header and key:
                request.headers[header] = key
            return await self._send_to(request, self.router, None)
        index = self.pick(record)
        if record is not None:
            record.replica = index
        return await self._send_to(request, self.replicas[index], index)

    async def _shared(self, request: httpx.Request) -> httpx.Response:
        first = self._index(request.url)
        if first is None:
            return await self.inner.handle_async_request(request)
        order = [first] + [i for i in range(len(self.replicas)) if i != first and i not in self.down]
        for i in order[:-1]:
            try:
                return await self._send_to(request, self.replicas[i], i)
            except httpx.ConnectError:
                continue  # the next replica still serving answers the same
        return await self._send_to(request, self.replicas[order[-1]], order[-1])

    async def _send_to(self, request: httpx.Request, target: httpx.URL, index: int | None) -> httpx.Response:
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        request.headers["Host"] = request.url.netloc.decode()
        try:
            return await self.inner.handle_async_request(request)
        except httpx.ConnectError:
            if index is not None:
                self.down.add(index)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()
