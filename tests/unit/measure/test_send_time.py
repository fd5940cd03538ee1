"""The send time is stamped when the request leaves, not before the SDK validates and encodes the prompt: at
128K prompt tokens that preprocessing alone took about a second, and counted as the engine's time to first token."""

import asyncio
import itertools
import json
import types

import httpx
from openai import AsyncOpenAI

from servebook.measure.transport import client as client_module
from servebook.measure.transport.client import RequestRecord, StreamRequest, sending_client, stream_request

PROMPT = list(range(1000, 1000 + 131072))  # 128K token ids


def sse(*events):
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def completion_stream(request: httpx.Request, seen: dict) -> httpx.Response:
    seen["prompt_tokens"] = len(json.loads(request.content)["prompt"])
    seen["t_send_when_received"] = seen["record"].t_send
    body = sse({"id": "c", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "text": "x", "finish_reason": None}]},
               {"id": "c", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                "usage": {"prompt_tokens": len(PROMPT), "completion_tokens": 1, "total_tokens": len(PROMPT) + 1}})
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def send_through_mock(record: RequestRecord, prompt: list[int], due_in_s: float | None = None,
                      clock=None) -> dict:
    """Send one completion through servebook's sending client to a mock engine; what the engine saw."""
    seen: dict = {"record": record}

    async def go():
        http = sending_client(transport=httpx.MockTransport(lambda r: completion_stream(r, seen)))
        async with http:
            sdk = AsyncOpenAI(base_url="http://engine/v1", api_key="k", http_client=http, max_retries=0)
            if due_in_s is not None:
                record.t_due = clock() + due_in_s
            await stream_request(sdk, record, StreamRequest("m", 1, prompt=prompt))

    asyncio.run(go())
    return seen


def test_the_send_time_is_stamped_as_the_request_leaves_after_the_sdk_encoded_it(monkeypatch):
    """A clock that ticks once per reading makes the order exact: the first stamp (before the SDK) is tick 0; the
    transport then sees a later stamp, taken by the hook after the 128K-token body was built."""
    ticks = itertools.count()
    # Only the client module's readings tick (httpx and the SDK read the clock too).
    monkeypatch.setattr(client_module, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    record = RequestRecord("r0", "prefill-131072", 1, "prose", 1, t_send=-1.0)
    seen = send_through_mock(record, PROMPT)
    assert record.error is None and seen["prompt_tokens"] == len(PROMPT)
    assert seen["t_send_when_received"] == 1.0, "stamped by the hook, once the request was built"
    assert record.t_send == 1.0 and record.t_first is not None and record.t_first > record.t_send


def test_a_plain_client_keeps_the_stamp_before_the_sdk():
    record = RequestRecord("r0", "c", 1, "prose", 1, t_send=-1.0)
    seen: dict = {"record": record}

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: completion_stream(r, seen))) as http:
            sdk = AsyncOpenAI(base_url="http://engine/v1", api_key="k", http_client=http, max_retries=0)
            await stream_request(sdk, record, StreamRequest("m", 1, prompt=PROMPT[:16]))

    asyncio.run(go())
    assert record.error is None and record.t_send > 0


def test_an_open_loop_request_prepared_ahead_leaves_when_it_is_due():
    """The SDK's preprocessing of a long prompt happens before the due time; the built request waits in the hook
    and leaves on schedule, not late by its own validation (client_lag on an H200 at 1,024-token prompts)."""
    import time

    record = RequestRecord("r0", "load-4rps", 0, "prose", 1, t_send=-1.0)
    send_through_mock(record, PROMPT[:8192], due_in_s=0.3, clock=time.monotonic)
    assert record.error is None
    assert record.t_due <= record.t_send < record.t_due + 0.05
