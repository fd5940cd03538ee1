"""A request sent without the SDK (direct.stream_direct on measure.transport.sse, the agents cell's) sends the body the SDK
sends and fills its record as the SDK's stream does: usage, cached tokens, the engine's own timings, chunk times, the
reply's deltas; a refusal is the record's error. Both are sent to a server on this machine's loopback that answers
in pieces cut across the HTTP chunks, the events and the lines."""

import asyncio
import json

import pytest
from openai import AsyncOpenAI

from servebook.engines.llamacpp import LlamaCppAdapter
from servebook.measure.transport.client import RequestRecord, StreamRequest, sending_client, stream_request
from servebook.measure.transport.direct import stream_direct
from servebook.measure.transport.routing import Route
from servebook.measure.transport.sse import SseClient

CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
     "timings": {"prompt_ms": 12.5, "predicted_per_second": 80.0}},
    {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42,
                              "prompt_tokens_details": {"cached_tokens": 31}}},
]


def _events() -> bytes:
    return ("".join(f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'm', **c})}"
                    "\r\n\r\n" for c in CHUNKS) + ": a comment\n\ndata: [DONE]\n\n").encode()


class _Server:
    """An engine on the loopback: answers each POST with `status` (SSE in HTTP chunks of `piece` bytes, or its
    error as JSON of a stated length, or SSE up to the close), written a few bytes at a time."""

    def __init__(self, status=200, framing="chunked", piece=7):
        self.status, self.framing, self.piece = status, framing, piece
        self.sent: list[tuple[str, dict, dict]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
        body = json.loads(await reader.readexactly(int(headers["content-length"])))
        self.sent.append((head[0].split()[1], body, headers))
        if self.status != 200:
            error = json.dumps({"error": {"code": self.status, "type": "exceed_context_size_error"}}).encode()
            out = f"HTTP/1.1 {self.status} Bad Request\r\nContent-Length: {len(error)}\r\n\r\n".encode() + error
        elif self.framing == "chunked":
            events = _events()
            pieces = [events[i:i + self.piece] for i in range(0, len(events), self.piece)]
            out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + \
                b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        else:
            out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nConnection: close\r\n\r\n" + _events()
        for i in range(0, len(out), 5):
            writer.write(out[i:i + 5])
            await writer.drain()
        writer.close()


def _request(deltas):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    return StreamRequest("m", 2, messages=messages, extra_body={"ignore_eos": True, "tools": [], "cache_prompt": True},
                         server_timings=LlamaCppAdapter().server_timings, on_delta=lambda d: deltas.append(d.content))


async def _send_both(server: _Server, route_to: bool = False):
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    out = []
    try:
        for direct in (False, True):
            record, deltas = RequestRecord("r", "agents", 1, "prose", 2, t_send=0.0, conversation=3), []
            if direct:
                # routed: the request goes to the replica the rotation picks, not to the URL it was addressed to
                route = Route((base, base), None) if route_to else None
                await stream_direct(SseClient(5.0, route), "http://127.0.0.1:9" if route_to else base,
                                    {"Authorization": "Bearer k"}, record, _request(deltas))
            else:
                http = sending_client()
                sdk = AsyncOpenAI(base_url=f"{base}/v1", api_key="k", http_client=http, max_retries=0)
                await stream_request(sdk, record, _request(deltas))
                await http.aclose()
            out.append((server.sent[-1], record, deltas))
    finally:
        listening.close()
        await listening.wait_closed()
    return out


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_the_direct_request_is_the_sdks_and_fills_its_record_alike(framing):
    server = _Server(framing=framing)
    (sdk_sent, by_sdk, sdk_deltas), (direct_sent, direct, direct_deltas) = asyncio.run(_send_both(server))
    assert direct_sent[:2] == sdk_sent[:2] and direct_sent[0] == "/v1/chat/completions"
    assert direct_sent[2]["authorization"] == "Bearer k" and direct_sent[2]["content-type"] == "application/json"
    assert direct.error is None and by_sdk.error is None
    for field in ("prompt_tokens", "completion_tokens", "cached_tokens", "chunk_count", "finish_reason",
                  "server_prompt_ms", "server_predicted_per_second"):
        assert getattr(direct, field) == getattr(by_sdk, field), field
    assert direct.cached_tokens == 31 and direct.server_prompt_ms == 12.5 and len(direct.chunk_times) == 2
    assert direct.t_first is not None and direct.t_last >= direct.t_first >= direct.t_send
    assert direct_deltas == sdk_deltas == ["", "Hello", " there", None]


def test_a_refusal_is_the_records_error():
    (_, by_sdk, _), (_, direct, _) = asyncio.run(_send_both(_Server(status=400)))
    assert direct.completion_tokens is None and not direct.ok and by_sdk.error
    assert direct.error.startswith("DirectStatusError: Error code: 400") and "exceed_context_size_error" in direct.error


def test_replicas_without_a_router_get_a_conversations_turns_in_turn():
    _, (_, direct, _) = asyncio.run(_send_both(_Server(), route_to=True))
    assert direct.ok and direct.replica == 1  # conversation 3 of 2 replicas


def test_a_turn_due_later_leaves_when_due():
    async def one():
        listening = await asyncio.start_server(_Server().handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
        due = asyncio.get_running_loop().time() + 0.05
        record = RequestRecord("r", "agents", 1, "prose", 2, t_send=0.0, t_due=due)
        await stream_direct(SseClient(5.0), base, {}, record, _request([]))
        listening.close()
        return record

    record = asyncio.run(one())
    assert record.ok and record.t_send >= record.t_due


def test_a_closed_connection_before_the_end_is_the_records_error():
    async def one():
        async def cut(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:")
            writer.close()

        listening = await asyncio.start_server(cut, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
        record = RequestRecord("r", "agents", 1, "prose", 2, t_send=0.0)
        await stream_direct(SseClient(5.0), base, {}, record, _request([]))
        listening.close()
        return record

    record = asyncio.run(one())
    assert not record.ok and "ConnectionError" in record.error


def test_through_a_router_a_conversations_turn_carries_its_session_key_in_the_named_header():
    """The agents cell's own streams key a turn to the router as the httpx transport does (routing.session_key):
    the root session's key, so that a router pinning keys keeps the conversation where its prefix is cached."""
    async def one(record, header):
        server = _Server()
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
        route = Route(("http://127.0.0.1:9", "http://127.0.0.1:9"), base, header)
        await stream_direct(SseClient(5.0, route), "http://127.0.0.1:9", {}, record, _request([]))
        listening.close()
        return server.sent[-1][2]

    sub_agent = RequestRecord("r", "agents", 1, "prose", 2, t_send=0.0, conversation=7, parent_conversation=3)
    assert asyncio.run(one(sub_agent, "x-smg-routing-key"))["x-smg-routing-key"] == "agents/3"
    single = RequestRecord("r", "decode-prose-c1", 1, "prose", 2, t_send=0.0)
    assert "x-smg-routing-key" not in asyncio.run(one(single, "x-smg-routing-key")), "no conversation, no key"
    keyless = RequestRecord("r", "agents", 1, "prose", 2, t_send=0.0, conversation=7)
    assert "x-smg-routing-key" not in asyncio.run(one(keyless, None))
