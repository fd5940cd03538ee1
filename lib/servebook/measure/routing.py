"""Where each measured request goes when several replicas serve: the router, or every replica in turn.

Without a router servebook is the load balancer: each measured request goes to the next replica in turn, and a
conversation's turns (reuse cells) stay on one replica, as a cache-aware router keeps them near their cached
prefix. A replica that refuses a connection is taken out of rotation; the request that found it dead is lost (it
is recorded with its error, not retried). With a router, every request goes to the router and the router decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

#: the requests a router or servebook spreads: the measured ones (tokenizer and self-report calls stay on replica 0)
ROUTED_PATHS = ("/v1/chat/completions", "/v1/completions")


@dataclass(frozen=True)
class Route:
    """Where the measured requests go instead of the endpoint's base URL (picklable, for the sending processes)."""

    targets: tuple[str, ...]
    #: True: `targets` are the replicas and servebook picks one per request; False: one router that picks
    replicas: bool

    @classmethod
    def of(cls, replica_urls: Sequence[str], router_url: str | None) -> "Route | None":
        """Through the router where there is one, else over every replica; None for one engine."""
        if not replica_urls:
            return None
        return cls((router_url,), False) if router_url else cls(tuple(replica_urls), True)

    def transport(self, inner: httpx.AsyncBaseTransport, current: Callable[[], Any]) -> "RouteTransport":
        return RouteTransport(inner, self.targets, replicas=self.replicas, current=current)


class RouteTransport(httpx.AsyncBaseTransport):
    """Sends each measured request to one of `targets` (the router, or every replica in turn); every other request
    goes where it was addressed. Records the replica on the request's record when the targets are replicas."""

    def __init__(self, inner: httpx.AsyncBaseTransport, targets: Sequence[str], *, replicas: bool,
                 current: Callable[[], Any] = lambda: None):
        self.inner = inner
        self.current = current  # the record of the request being sent (measure.client.sending_record)
        self.targets = [httpx.URL(t) for t in targets]
        self.replicas = replicas
        self.down: set[int] = set()
        self._next = 0

    def pick(self, record: Any) -> int:
        """The next replica in rotation; a conversation's replica for its turns; never one that refused."""
        n = len(self.targets)
        serving = [i for i in range(n) if i not in self.down] or list(range(n))  # all refused: this one finds out
        if record is not None and record.conversation is not None:
            home = record.conversation % n
            return home if home in serving else serving[record.conversation % len(serving)]
        self._next += 1
        return serving[(self._next - 1) % len(serving)]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path not in ROUTED_PATHS:
            return await self.inner.handle_async_request(request)
        record = self.current()
        index = self.pick(record) if self.replicas else 0
        target = self.targets[index]
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        request.headers["Host"] = request.url.netloc.decode()
        if record is not None and self.replicas:
            record.replica = index
        try:
            return await self.inner.handle_async_request(request)
        except httpx.ConnectError:
            if self.replicas:
                self.down.add(index)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()
