"""The streaming client: one timed request through the openai SDK, recorded as one raw row.

Times are `time.monotonic()` seconds. TTFT runs from send to the first chunk that carries
content; the decode interval runs from that chunk to the last chunk that carries a choice.

A reasoning model's chat stream carries its thinking in `delta.reasoning_content` (SGLang, llama.cpp, vLLM before
the field's rename) or `delta.reasoning` (vLLM since), then its answer in `delta.content`: both are content for
TTFT, and the record keeps them apart (`ReasoningSplit`, docs/reasoning.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, cast

import httpx
from openai import AsyncOpenAI

from ...engines import ServerTimings
from .records import REASONING_FIELDS, ReasoningSource, ReasoningSplit, RequestRecord
from .routing import Route

__all__ = ["REASONING_FIELDS", "ReasoningSource", "ReasoningSplit", "RequestRecord", "StreamRequest",
           "measuring_clients", "sending_client", "sending_record", "settle_reasoning", "stamp_send", "stream_request"]

def _reported_reasoning(usage: Any) -> int | None:
    """The engine's count of reasoning tokens in a usage object: vLLM's completion_tokens_details.reasoning_tokens
    (with a reasoning parser, from the release that added it), SGLang's usage.reasoning_tokens; None: not said."""
    details = getattr(usage, "completion_tokens_details", None)
    value = getattr(details, "reasoning_tokens", None) if details is not None else None
    if value is None:
        value = getattr(usage, "reasoning_tokens", None)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage_fields(record: RequestRecord, usage: Any) -> None:
    record.prompt_tokens = usage.prompt_tokens
    record.completion_tokens = usage.completion_tokens
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    # An engine that does not report cached tokens leaves this None: "not reported" must not read as "none cached".
    record.cached_tokens = None if cached is None else int(cached)
    reported = _reported_reasoning(usage)
    if reported is not None:
        record.split.reported = reported


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
    #: keep the streamed text on the record (RequestRecord.text_parts), for the cell's output realism
    keep_text: bool = False
    #: the engine's reader of its own per-request timings in a chunk's extra fields (None: it sends none)
    server_timings: Callable[[dict[str, Any] | None], ServerTimings | None] | None = None
    #: chat: called with each chunk's delta, for a caller that needs the reply itself (an agent's history)
    on_delta: Callable[[Any], None] | None = None
    #: the engine leaves prompt_tokens_details out of a usage when nothing was cached: a finished stream without
    #: the count then had 0 cached (the adapter's usage_omits_zero_cached)
    absent_cached_is_zero: bool = False


def _record_chunk(record: RequestRecord, chunk: Any, now: float, counted: int, *, chat: bool,
                  keep_chunk_times: bool, server_timings: Callable[[Any], ServerTimings | None] | None = None,
                  on_delta: Callable[[Any], None] | None = None, keep_text: bool = False) -> int:
    """Fold one streamed chunk into `record`; returns the completion tokens accounted for so far."""
    record.chunk_count += 1
    if chunk.usage is not None:
        _usage_fields(record, chunk.usage)
    if server_timings is not None:
        _timings_fields(record, server_timings(chunk.model_extra))
    if not chunk.choices:
        return counted
    choice = chunk.choices[0]
    if chat and on_delta is not None and choice.delta is not None:
        on_delta(choice.delta)
    phase = _chat_phase(record, choice.delta, chunk.usage, now) if chat else None
    has_content = phase is not None if chat else bool(choice.text)
    if keep_text:
        text = (choice.delta.content if choice.delta is not None else None) if chat else choice.text
        if text:
            record.text_parts.append(text)
    if has_content:
        if record.t_first is None:
            record.t_first = now
        if keep_chunk_times:
            record.chunk_times.append(now)
            record.chunk_phases.append(phase)
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


def _chat_phase(record: RequestRecord, delta: Any, usage: Any, now: float) -> str | None:
    """Which part of a reasoning model's output a chat delta carries ("reasoning", "answer", "mixed"; None: no
    content), its times kept and, from per-chunk usage, the tokens it adds to the reasoning count."""
    thought = next((text for name in REASONING_FIELDS if (text := getattr(delta, name, None) if delta else None)),
                   None)
    answered = bool(delta and (delta.content or delta.tool_calls))
    phase = "mixed" if thought and answered else "reasoning" if thought else "answer" if answered else None
    if thought:
        record.reasoning_chunks += 1
        record.t_last_reasoning = now
        if record.t_first_reasoning is None:
            record.t_first_reasoning = now
    if answered and record.t_first_answer is None:
        record.t_first_answer = now
    split = record.split
    if usage is None:
        if phase is not None:
            split.counted = None  # a chunk of text whose tokens nothing tells
    else:
        added = usage.completion_tokens - split.completion_seen
        split.completion_seen = usage.completion_tokens
        # tokens on a chunk without text (the last one's, a parser's swallowed marker) belong to the phase before
        into = phase or split.phase
        if added and split.counted is not None and into in ("reasoning", "mixed", None):
            split.counted = split.counted + added if into == "reasoning" else None
    split.phase = phase or split.phase
    return phase


def settle_reasoning(record: RequestRecord) -> None:
    """The request's reasoning tokens once its stream ended: the engine's count where it gives a usable one (a 0
    beside streamed reasoning is a parser that does not count, not a count), else the per-chunk count, else all of
    them where every token streamed was reasoning; None where the stream does not tell (or carried no reasoning and
    the engine said nothing)."""
    total, split = record.completion_tokens, record.split
    if total is None:
        return
    found: tuple[int | None, ReasoningSource | None] = (None, None)
    reported = split.reported
    if reported is not None and 0 <= reported <= total and (reported > 0 or record.reasoning_chunks == 0):
        found = (reported, "usage")
    elif record.reasoning_chunks and record.t_first_answer is None:
        found = (total, "stream")  # every token it streamed was thinking (a budget or max_tokens ended it there)
    elif record.reasoning_chunks and split.counted is not None and split.counted <= total:
        found = (split.counted, "chunks")
    record.reasoning_tokens, record.reasoning_source = found


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


async def _streamed(record: RequestRecord, request: StreamRequest, chunks: AsyncIterator[Any]) -> RequestRecord:
    """Fill `record` from a stream's chunks; a failure anywhere is the record's error, never a crash."""
    counted = 0  # completion tokens accounted for by earlier content chunks (continuous usage only)
    record.t_send = time.monotonic()  # replaced by stamp_send when the client is a sending_client
    token = _SENDING.set(record)
    try:
        async for chunk in chunks:
            counted = _record_chunk(record, chunk, time.monotonic(), counted, chat=request.messages is not None,
                                    keep_chunk_times=request.keep_chunk_times, server_timings=request.server_timings,
                                    on_delta=request.on_delta, keep_text=request.keep_text)
        settle_reasoning(record)
        if request.absent_cached_is_zero and record.completion_tokens is not None and record.cached_tokens is None:
            record.cached_tokens = 0
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
