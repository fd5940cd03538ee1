"""Spreading the load over replicas, every replica's counters, and the balance of their work."""

import asyncio
import json

import httpx
import pytest

from servebook.engines import get_engine
from servebook.engines.counters import parse_metrics
from servebook.measure.observers.replicas import balance, cache_kept, replica_figures, scrape_replicas
from servebook.measure.transport.client import RequestRecord, StreamRequest, measuring_clients, stream_request
from servebook.measure.transport.routing import Route

URLS = ["http://127.0.0.1:9001", "http://127.0.0.1:9002", "http://127.0.0.1:9003"]


def served(seen: list[str], refuse: str | None = None):
    """A fake engine behind every URL: streams one token with usage, records which port each request reached."""
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.port}{request.url.path}")
        if refuse and str(request.url.port) == refuse:
            raise httpx.ConnectError("refused", request=request)
        body = ('data: {"choices":[{"index":0,"text":"x","finish_reason":"length"}],'
                '"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}\n\ndata: [DONE]\n\n')
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})
    return httpx.MockTransport(handle)


def send(route, records, refuse=None):
    seen: list[str] = []

    async def go():
        http, sdk = measuring_clients(URLS[0], "k", {}, 5.0, route)
        http._transport.inner = served(seen, refuse)  # the network, replaced; the routing is servebook's
        for record in records:
            await stream_request(sdk, record, StreamRequest("m", 1, prompt="hi"))
        await http.get(f"{URLS[0]}/metrics")
        await http.aclose()

    asyncio.run(go())
    return seen


def record(i, conversation=None, parent=None):
    return RequestRecord(f"r{i}", "decode-prose-c1", 1, "prose", 1, t_send=0.0, conversation=conversation,
                         parent_conversation=parent)


def test_requests_go_round_robin_over_every_replica_and_other_calls_stay_on_the_first():
    records = [record(i) for i in range(6)]
    seen = send(Route(tuple(URLS)), records)
    assert seen == ["9001/v1/completions", "9002/v1/completions", "9003/v1/completions"] * 2 + ["9001/metrics"]
    assert [r.replica for r in records] == [0, 1, 2, 0, 1, 2]


def test_a_conversation_stays_on_one_replica():
    records = [record(i, conversation=c) for i, c in enumerate([0, 1, 0, 1, 0])]
    send(Route(tuple(URLS)), records)
    assert [r.replica for r in records] == [0, 1, 0, 1, 0]


def test_a_replica_that_refuses_is_taken_out_of_rotation_and_its_request_is_lost():
    records = [record(i) for i in range(6)]
    send(Route(tuple(URLS)), records, refuse="9002")
    assert records[1].error and records[1].replica == 1  # lost, not retried
    assert [r.replica for r in records[2:]] == [0, 2, 0, 2]  # the rest share the load evenly
    assert all(r.ok for r in records if r is not records[1])


def test_through_a_router_every_request_goes_to_it_unattributed():
    records = [record(i) for i in range(3)]
    seen = send(Route(tuple(URLS), "http://127.0.0.1:9100"), records)
    assert seen[:3] == ["9100/v1/completions"] * 3 and all(r.replica is None for r in records)


def keys_sent(route, records):
    """The session header of every request the fake engines saw."""
    keys: list[str | None] = []

    async def go():
        http, sdk = measuring_clients(URLS[0], "k", {}, 5.0, route)
        inner = served([])

        async def handle(request):
            keys.append(request.headers.get("x-smg-routing-key"))
            return await inner.handle_async_request(request)

        http._transport.inner = httpx.MockTransport(handle)
        for one in records:
            await stream_request(sdk, one, StreamRequest("m", 1, prompt="hi"))
        await http.aclose()

    asyncio.run(go())
    return keys


def test_through_a_router_a_conversations_turns_carry_their_root_sessions_key_and_single_requests_none():
    router = "http://127.0.0.1:9100"
    records = [record(0), record(1, conversation=3), record(2, conversation=7, parent=3), record(3, conversation=4)]
    keyed = Route.of(URLS, router, "x-smg-routing-key")
    assert keys_sent(keyed, records) == [None, "decode-prose-c1/3", "decode-prose-c1/3", "decode-prose-c1/4"]
    assert keys_sent(Route.of(URLS, router), records) == [None] * 4, "no header named, none sent"
    assert Route.of(URLS, None, "x-smg-routing-key").session_header is None, "servebook itself keeps conversations"


def test_one_engine_has_no_route_and_a_router_takes_every_request():
    assert Route.of((), None) is None
    assert Route.of(URLS, None) == Route(tuple(URLS))
    assert Route.of(URLS, "http://127.0.0.1:9100") == Route(tuple(URLS), "http://127.0.0.1:9100")


def test_the_tokenizer_is_asked_of_the_next_replica_when_the_first_is_gone_but_metrics_never_are():
    seen: list[str] = []

    async def go():
        http, _ = measuring_clients(URLS[0], "k", {}, 5.0, Route(tuple(URLS)))
        http._transport.inner = served(seen, refuse="9001")
        tokens = await http.post(f"{URLS[0]}/tokenize", json={"content": "hi"})
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{URLS[0]}/metrics")
        await http.aclose()
        return tokens

    assert asyncio.run(go()).status_code == 200
    assert seen == ["9001/tokenize", "9002/tokenize", "9001/metrics"]


def test_balance_is_the_lightest_replicas_share_of_an_even_split():
    assert balance([50, 50]) == 1.0
    assert balance([25, 75]) == 0.5
    assert balance([0, 10]) == 0.0
    assert balance([]) is None and balance([0, 0]) is None


def metrics(prompt: float, predicted: float) -> str:
    return (f"# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total {prompt}\n"
            f"# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {predicted}\n")


def test_every_replica_is_scraped_summed_and_split(monkeypatch):
    bodies = {9001: metrics(10, 4), 9002: metrics(30, 12)}

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(
                lambda r: httpx.Response(200, text=bodies[r.url.port]))) as http:
            return await scrape_replicas(http, URLS[:2])

    snapshot = asyncio.run(go())
    assert snapshot.available and snapshot.total("llamacpp:tokens_predicted_total") == 16
    before = parse_metrics(metrics(0, 0))
    before = type(snapshot)(t=0, samples=[type(s)(s.name, tuple(sorted((*s.labels, ("servebook_replica", i)))), 0.0)
                                          for i in ("0", "1") for s in before.samples])
    records = [RequestRecord(f"r{i}", "c", 1, "prose", 4, t_send=0.0, prompt_tokens=10, completion_tokens=4,
                             cached_tokens=0) for i in range(4)]
    for i, r in enumerate(records):
        r.replica = 0 if i == 0 else 1
    figures = replica_figures(get_engine("llamacpp"), records, before, snapshot, 2)
    assert json.loads(figures["replica_generation_tokens"]) == [4, 12]
    assert json.loads(figures["replica_requests"]) == [1, 3]
    assert figures["replica_balance"] == pytest.approx(0.5)
    assert figures["replicas_serving"] == 2
    assert json.loads(figures["replica_hit_rates"]) == [None, None], "llama.cpp counted no cached tokens here"
    assert figures["cache_kept"] is None, "no request knows its ideal"


def test_a_dead_replica_leaves_its_counters_out_and_is_counted_as_not_serving():
    async def go():
        def answer(request):
            if request.url.port == 9002:
                raise httpx.ConnectError("refused", request=request)
            return httpx.Response(200, text=metrics(10, 4))
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
            return await scrape_replicas(http, URLS[:2])

    snapshot = asyncio.run(go())
    assert snapshot.available and "replica 1" in (snapshot.error or "")
    figures = replica_figures(get_engine("llamacpp"), [], snapshot, snapshot, 2)
    assert figures["replicas_serving"] == 1 and figures["replica_balance"] is None


def test_the_cache_kept_is_the_replicas_cached_tokens_over_the_ideal():
    served_ = [RequestRecord(f"r{i}", "agents", 1, "prose", 4, t_send=0.0, prompt_tokens=100, completion_tokens=4,
                             cached_tokens=0, ideal_cached_tokens=ideal) for i, ideal in enumerate([0, 80, 90])]
    assert cache_kept(served_, [85.0, 0.0]) == pytest.approx(0.5)
    assert cache_kept(served_, [85.0, None]) is None, "a replica whose counters are missing"
    assert cache_kept(served_[:1], [0.0, 0.0]) is None, "nothing to keep"
    served_[1].ideal_cached_tokens = None
    assert cache_kept(served_, [85.0, 0.0]) is None, "an ideal not known"


def test_a_reuse_turns_ideal_is_the_whole_prompt_of_the_turn_it_extends():
    from servebook.measure.kinds.reuse import _ideal

    before = RequestRecord("r", "reuse", 1, "prose", 4, t_send=0.0, prompt_tokens=320, completion_tokens=4)
    assert _ideal(None) == 0 and _ideal(before) == 320
    before.error = "refused"
    assert _ideal(before) is None, "a turn the engine did not count leaves the next one's ideal unknown"
