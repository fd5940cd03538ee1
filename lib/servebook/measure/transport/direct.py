"""Streams sent without the SDK, on asyncio's transports (measure.transport.sse), stamped and routed as the measuring HTTP
client stamps and routes: for many streams in one process (the agents cell's hundreds of sessions), where the SDK's
request preparation and chunk models, and then httpx's reading, held turns past their due times. The chunks fill
the record as `client.stream_request`'s do."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from .client import RequestRecord, StreamRequest, _common, _streamed
from .sse import DirectStatusError

__all__ = ["DirectStatusError", "Streams", "stream_direct"]


class _Json:
    """A streamed chunk's JSON read by attribute, as the SDK's models are read (None where a field is absent), and
    its whole body as `model_extra` (where engines put their own fields): the SDK's models cost 0.34 ms a chunk,
    this 0.03 ms, and 200 streams of one batch get their tokens at the same instant."""

    def __init__(self, data: dict[str, Any]):
        self.__dict__.update({key: _json(value) for key, value in data.items()})
        self.model_extra = data

    def __getattr__(self, name: str) -> Any:
        return None  # only fields the chunk does not have get here


def _json(value: Any) -> Any:
    if isinstance(value, dict):
        return _Json(value)
    return [_json(v) for v in value] if isinstance(value, list) else value


async def _direct_chunks(streams: "Streams", url: str, headers: dict[str, str], body: dict[str, Any],
                         record: RequestRecord) -> AsyncIterator[Any]:
    """The chunks of a stream: its body encoded before the turn is due (the SDK's preparation, done ahead as
    `stamp_send` holds a request built early), then held until due, stamped as it leaves, and read."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    if record.t_due is not None:
        await asyncio.sleep(max(0.0, record.t_due - time.monotonic()))
    record.t_send = time.monotonic()  # as stamp_send stamps it: when the request leaves for its connection
    async for value in streams.events(url, headers, payload, record):
        yield _Json(value)


class Streams(Protocol):
    """What sends the streams (sse.SseClient; a test's engine)."""

    def events(self, url: str, headers: dict[str, str], payload: bytes, record: Any = None
               ) -> AsyncIterator[dict[str, Any]]: ...


async def stream_direct(streams: Streams, base_url: str, headers: dict[str, str], record: RequestRecord,
                        request: StreamRequest) -> RequestRecord:
    """`stream_request` without the SDK or httpx, for many streams in one process: the SDK's preparation of a
    request (3 ms, most of it walking the parameters against their types, 30 ms for a 26-message history) and its
    chunk models (above) held 256 agent sessions' turns tens of milliseconds past their due times, and httpx's
    reading of each chunk did still (measure.transport.sse). The body is the one the SDK would send; the same chunks fill the
    record."""
    body = {**_common(request), **(request.extra_body or {})}
    if request.messages is not None:
        body["messages"], path = request.messages, "chat/completions"
    else:
        body["prompt"], path = request.prompt, "completions"
    return await _streamed(record, request, _direct_chunks(streams, f"{base_url}/v1/{path}", headers, body, record))
