"""A request sent without the SDK (direct.stream_direct, the agents cell's) sends the body the SDK sends and fills its
record as the SDK's stream does: usage, cached tokens, the engine's own timings, chunk times, the reply's deltas; a
refusal is the record's error."""

import asyncio
import json

import httpx
from openai import AsyncOpenAI

from servebook.engines.llamacpp import LlamaCppAdapter
from servebook.measure.client import RequestRecord, StreamRequest, sending_client, stream_request
from servebook.measure.direct import stream_direct

CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
     "timings": {"prompt_ms": 12.5, "predicted_per_second": 80.0}},
    {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42,
                              "prompt_tokens_details": {"cached_tokens": 31}}},
]


def _sse(status=200):
    sent = []

    def handler(request):
        sent.append((request.url.path, json.loads(request.content)))
        if status != 200:
            return httpx.Response(status, json={"error": {"code": status, "type": "exceed_context_size_error"}})
        events = "".join(f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'm', **c})}\n\n"
                         for c in CHUNKS) + "data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events.encode())

    return sent, sending_client(transport=httpx.MockTransport(handler))


def _request(deltas):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    return StreamRequest("m", 2, messages=messages, extra_body={"ignore_eos": True, "tools": [], "cache_prompt": True},
                         server_timings=LlamaCppAdapter().server_timings, on_delta=lambda d: deltas.append(d.content))


def _both(status=200):
    out = []
    for direct in (False, True):
        sent, http = _sse(status)
        record, deltas = RequestRecord("r", "agents", 1, "prose", 2, t_send=0.0), []
        if direct:
            asyncio.run(stream_direct(http, "http://engine", {"Authorization": "Bearer k"}, record, _request(deltas)))
        else:
            sdk = AsyncOpenAI(base_url="http://engine/v1", api_key="k", http_client=http, max_retries=0)
            asyncio.run(stream_request(sdk, record, _request(deltas)))
        out.append((sent, record, deltas))
    return out


def test_the_direct_request_is_the_sdks_and_fills_its_record_alike():
    (sdk_sent, by_sdk, sdk_deltas), (direct_sent, direct, direct_deltas) = _both()
    assert direct_sent == sdk_sent and direct_sent[0][0] == "/v1/chat/completions"
    assert direct.error is None and by_sdk.error is None
    for field in ("prompt_tokens", "completion_tokens", "cached_tokens", "chunk_count", "finish_reason",
                  "server_prompt_ms", "server_predicted_per_second"):
        assert getattr(direct, field) == getattr(by_sdk, field), field
    assert direct.cached_tokens == 31 and direct.server_prompt_ms == 12.5 and len(direct.chunk_times) == 2
    assert direct.t_first is not None and direct.t_last >= direct.t_first >= direct.t_send
    assert direct_deltas == sdk_deltas == ["", "Hello", " there", None]


def test_a_refusal_is_the_records_error():
    (_, by_sdk, _), (_, direct, _) = _both(status=400)
    assert direct.completion_tokens is None and not direct.ok and by_sdk.error
    assert direct.error.startswith("DirectStatusError: Error code: 400") and "exceed_context_size_error" in direct.error
