"""The streaming client: one timed request through the openai SDK, recorded as one raw row.

Times are `time.monotonic()` seconds. TTFT runs from send to the first chunk that carries
content; the decode interval runs from that chunk to the last chunk that carries a choice.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, cast

import httpx
from openai import AsyncOpenAI

from ..engines import ServerTimings
from .routing import Route


@dataclass
class RequestRecord:
    request_id: str
    cell_id: str
    concurrency: int
    category: str
    expected_completion_tokens: int
    t_send: float
    t_first: float | None = None
    t_last: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    chunk_count: int = 0
    finish_reason: str | None = None
    error: str | None = None
    server_prompt_ms: float | None = None
    server_predicted_per_second: float | None = None
    server_draft_tokens: int | None = None
    server_draft_accepted: int | None = None
    turn: int | None = None  # reuse cells: the request's turn in its conversation (1 = the first)
    conversation: int | None = None
    #: open-loop cells: when the schedule wanted the request sent, and whether it counts (outside the warm-up)
    t_due: float | None = None
    measured: bool = True
    #: open-loop cells sent from several processes (measure.senders): which one sent it (None: the run's own)
    client_process: int | None = None
    #: sliced cells (plan.decode.slices): the slice the request was sent in; other seats measured between slices
    slice_index: int = 0
    #: several replicas without a router: the replica servebook sent it to (measure.replicas; None: one endpoint)
    replica: int | None = None
    #: replay cells: the prompt tokens a perfect prefix cache serves of it, by the trace's hash ids (config.traces);
    #: agent turns: by the history it resends (measure.sessions)
    ideal_cached_tokens: int | None = None
    #: agent turns: the session that spawned this one's session (a sub-agent's parent; None: a parent session)
    parent_conversation: int | None = None
    #: agent turns: the turn's prompt and asked output did not fit the engine's context per request
    context_overflow: bool = False
    #: agent turns that asked the engine for a tool call: whether one came back that parses (None: none asked)
    tool_call_parsed: bool | None = None
    chunk_times: list[float] = field(default_factory=list, repr=False)
    chunk_tokens: list[int | None] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None and self.completion_tokens is not None

    @property
    def ttft(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_send

    @property
    def decode_rate(self) -> float | None:
        """(completion_tokens - 1) / (t_last - t_first): decode only, prompt reading excluded."""
        if not self.ok or self.t_first is None or self.t_last is None or self.completion_tokens is None \
                or self.completion_tokens < 2:
            return None
        span = self.t_last - self.t_first
        return (self.completion_tokens - 1) / span if span > 0 else None

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("chunk_times")
        data.pop("chunk_tokens")
        return data


def _usage_fields(record: RequestRecord, usage: Any) -> None:
    record.prompt_tokens = usage.prompt_tokens
    record.completion_tokens = usage.completion_tokens
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    # An engine that does not report cached tokens leaves this None: "not reported" must not read as "none cached".
    record.cached_tokens = None if cached is None else int(cached)


def _timings_fields(record: RequestRecord, timings: ServerTimings | None) -> None:
    if timings is None:
        return
    record.server_prompt_ms = timings.prompt_ms
    record.server_predicted_per_second = timings.predicted_per_second
    record.server_draft_tokens = timings.draft_tokens
    record.server_draft_accepted = timings.draft_accepted


@dataclass
class StreamRequest:
    """What to send: chat when `messages` is given, a completion of `prompt` (text or token ids) otherwise."""

    model: str
    max_tokens: int
    messages: list[dict] | None = None
    prompt: list[int] | str | None = None
    extra_body: dict | None = None
    stream_options: dict | None = None
    keep_chunk_times: bool = True
    #: the engine's reader of its own per-request timings in a chunk's extra fields (None: it sends none)
    server_timings: Callable[[dict[str, Any] | None], ServerTimings | None] | None = None
    #: chat: called with each chunk's delta, for a caller that needs the reply itself (an agent's history)
    on_delta: Callable[[Any], None] | None = None


def _record_chunk(record: RequestRecord, chunk: Any, now: float, counted: int, *, chat: bool,
                  keep_chunk_times: bool, server_timings: Callable[[Any], ServerTimings | None] | None = None,
                  on_delta: Callable[[Any], None] | None = None) -> int:
    """Fold one streamed chunk into `record`; returns the completion tokens accounted for so far."""
    record.chunk_count += 1
    if chunk.usage is not None:
        _usage_fields(record, chunk.usage)
    if server_timings is not None:
        _timings_fields(record, server_timings(chunk.model_extra))
    if not chunk.choices:
        return counted
    choice = chunk.choices[0]
    if chat:
        delta = choice.delta
        if on_delta is not None and delta is not None:
            on_delta(delta)
        has_content = bool(delta and (delta.content or getattr(delta, "reasoning_content", None) or delta.tool_calls))
    else:
        has_content = bool(choice.text)
    if has_content:
        if record.t_first is None:
            record.t_first = now
        if keep_chunk_times:
            record.chunk_times.append(now)
            # Engines that report usage on every chunk tell how many tokens a chunk carried;
            # a drafter's accepted run arrives as one chunk of several tokens.
            if chunk.usage is not None:
                record.chunk_tokens.append(chunk.usage.completion_tokens - counted)
                counted = chunk.usage.completion_tokens
            else:
                record.chunk_tokens.append(None)
    if has_content or choice.finish_reason:
        record.t_last = now
    if choice.finish_reason:
        record.finish_reason = choice.finish_reason
    return counted


#: the request the current task is sending, for `stamp_send`
_SENDING: ContextVar[RequestRecord | None] = ContextVar("servebook_sending", default=None)


#: how early an open-loop request starts through the SDK before it is due: its validation and encoding (about
#: 8 ms at 1,024 prompt tokens, 62 ms at 8,192) then happen before the due time, and the hook holds the built request
#: until then, so it leaves on schedule instead of late by its own preprocessing
PREPARE_AHEAD_S = 0.1


def sending_record() -> RequestRecord | None:
    """The record of the request the current task is sending (for a transport that routes it)."""
    return _SENDING.get()


async def stamp_send(request: httpx.Request) -> None:
    """httpx's request hook: the send time is when the request leaves, after the SDK has validated and encoded it
    (about 62 ms for an 8,192-token prompt, a second at 128K, that would otherwise count as the engine's). An
    open-loop request (`t_due` set) prepared ahead of its due time is held here until it is due."""
    record = _SENDING.get()
    if record is not None:
        if record.t_due is not None:
            await asyncio.sleep(max(0.0, record.t_due - time.monotonic()))
        record.t_send = time.monotonic()


def sending_client(**options: Any) -> httpx.AsyncClient:
    """The HTTP client requests are measured through: it stamps each request's send time as it leaves."""
    hooks = options.pop("event_hooks", {})
    return httpx.AsyncClient(event_hooks={**hooks, "request": [*hooks.get("request", []), stamp_send]}, **options)


def measuring_clients(base_url: str, api_key: str, headers: dict[str, str], timeout_s: float,
                      route: Route | None = None) -> tuple[httpx.AsyncClient, AsyncOpenAI]:
    """The HTTP client and the SDK on it that a measurement sends through, in the run's process or a sender's.
    `route`: where the measured requests go instead of `base_url` (a router, or every replica in turn)."""
    # No keep-alive: an engine may close idle and long-lived connections on its own schedule (llama-server does),
    # and a request sent on a connection the server just closed fails spuriously.
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=0)
    transport: httpx.AsyncBaseTransport | None = None
    if route is not None:
        transport = route.transport(httpx.AsyncHTTPTransport(limits=limits), current=sending_record)
    http = sending_client(limits=limits, timeout=httpx.Timeout(timeout_s, connect=10), headers=headers,
                          transport=transport)
    # The SDK's annotation names its own vendored httpx; any httpx.AsyncClient works at run time.
    sdk = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=api_key, http_client=http,  # type: ignore[arg-type]
                      max_retries=0, timeout=timeout_s)
    return http, sdk


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


async def _direct_chunks(http: httpx.AsyncClient, url: str, headers: dict[str, str],
                         body: dict[str, Any]) -> AsyncIterator[Any]:
    """The chunks of a stream sent by httpx itself: each `data:` line of its server-sent events parsed as JSON."""
    async with http.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code >= 400:
            text = (await response.aread()).decode("utf-8", "replace")
            raise DirectStatusError(f"Error code: {response.status_code} - {text}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            value = json.loads(data)
            if isinstance(value, dict) and value.get("error"):
                raise DirectStatusError(f"the stream reported an error: {value['error']}")
            yield _Json(value)


class DirectStatusError(Exception):
    """An engine's refusal of a request sent without the SDK (the status and the body the engine gave)."""


def _common(request: StreamRequest) -> dict[str, Any]:
    return dict(model=request.model, max_tokens=request.max_tokens, stream=True,
                stream_options=request.stream_options or {"include_usage": True}, temperature=0.0)


async def stream_request(client: AsyncOpenAI, record: RequestRecord, request: StreamRequest) -> RequestRecord:
    """Send one streaming request (chat when `messages`, completion when `prompt`) and fill `record`."""

    async def chunks() -> AsyncIterator[Any]:
        common = {**_common(request), "extra_body": request.extra_body or None}
        if request.messages is not None:
            # Requests are built as plain dicts (gates send fields the SDK's types do not know); the stream is typed
            # by what `stream=True` returns at run time.
            stream: Any = await client.chat.completions.create(messages=cast(Any, request.messages), **common)
        else:
            stream = await client.completions.create(prompt=cast(Any, request.prompt), **common)
        async for chunk in stream:
            yield chunk

    return await _streamed(record, request, chunks())


async def stream_direct(http: httpx.AsyncClient, base_url: str, headers: dict[str, str], record: RequestRecord,
                        request: StreamRequest) -> RequestRecord:
    """`stream_request` without the SDK, through the same measuring HTTP client (its send stamp, its routes), for
    many streams in one process: the SDK's preparation of a request (3 ms, most of it walking the parameters against
    their types, 30 ms for a 26-message history) and its chunk models (above) held 256 agent sessions' turns tens of
    milliseconds past their due times. The body is the one the SDK would send; the same chunks fill the record."""
    body = {**_common(request), **(request.extra_body or {})}
    if request.messages is not None:
        body["messages"], path = request.messages, "chat/completions"
    else:
        body["prompt"], path = request.prompt, "completions"
    return await _streamed(record, request, _direct_chunks(http, f"{base_url}/v1/{path}", headers, body))


async def _streamed(record: RequestRecord, request: StreamRequest, chunks: AsyncIterator[Any]) -> RequestRecord:
    """Fill `record` from a stream's chunks; a failure anywhere is the record's error, never a crash."""
    counted = 0  # completion tokens accounted for by earlier content chunks (continuous usage only)
    record.t_send = time.monotonic()  # replaced by stamp_send when the client is a sending_client
    token = _SENDING.set(record)
    try:
        async for chunk in chunks:
            counted = _record_chunk(record, chunk, time.monotonic(), counted, chat=request.messages is not None,
                                    keep_chunk_times=request.keep_chunk_times, server_timings=request.server_timings,
                                    on_delta=request.on_delta)
        if record.completion_tokens is None:
            record.error = "stream ended without a usage chunk"
        elif record.t_first is None and record.completion_tokens > 0:
            # Only empty-text tokens came back (max_tokens=1 prefill often ends this way):
            # the first token arrived with the final choice chunk.
            record.t_first = record.t_last
    except Exception as error:  # noqa: BLE001 - every failure becomes a recorded row, never a crash
        record.error = f"{type(error).__name__}: {error}"[:500]
        if record.t_last is None:
            record.t_last = time.monotonic()
    finally:
        _SENDING.reset(token)
    return record
