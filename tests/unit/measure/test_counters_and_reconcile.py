from servebook.engines import get_engine
from servebook.engines.counters import parse_metrics
from servebook.measure.observers.reconcile import ClientCounts, reconcile

# A /metrics body as llama-server (0c1e570) prints it.
LLAMACPP_BEFORE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 36
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 0
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 8
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 395.896
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
"""


def after_text(prompt, cached, predicted):
    return (LLAMACPP_BEFORE.replace("prompt_tokens_total 36", f"prompt_tokens_total {prompt}")
            .replace("prompt_tokens_cached_total 0", f"prompt_tokens_cached_total {cached}")
            .replace("tokens_predicted_total 8", f"tokens_predicted_total {predicted}"))


def test_parse_keeps_counter_sample_names():
    scrape = parse_metrics(LLAMACPP_BEFORE)
    assert scrape.total("llamacpp:prompt_tokens_total") == 36
    assert scrape.total("llamacpp:tokens_predicted_total") == 8
    assert scrape.total("llamacpp:requests_processing") == 0
    assert scrape.total("llamacpp:absent") is None


def test_total_sums_labels_and_tries_renamed_spellings():
    text = ('# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine="0"} 0.25\n'
            '# TYPE vllm:prompt_tokens_total counter\n'
            'vllm:prompt_tokens_total{engine="0",model_name="m"} 10\nvllm:prompt_tokens_total{engine="1",model_name="m"} 5\n')
    scrape = parse_metrics(text)
    assert scrape.total("vllm:prompt_tokens_total") == 15
    assert scrape.total("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc") == 0.25
    assert scrape.by_label("vllm:prompt_tokens_total", "engine") == {"0": 10, "1": 5}


def test_llamacpp_counts_add_cached_tokens_back_into_prompt():
    adapter = get_engine("llamacpp")
    counts = adapter.server_counts(parse_metrics(LLAMACPP_BEFORE), parse_metrics(after_text(136, 50, 72)))
    # 100 uncached + 50 cached = 150 prompt tokens as the client's usage counts them
    assert counts.prompt_tokens == 150
    assert counts.cached_tokens == 50
    assert counts.generation_tokens == 64


def test_reconcile_ok_when_everything_matches():
    adapter = get_engine("llamacpp")
    counts = adapter.server_counts(parse_metrics(LLAMACPP_BEFORE), parse_metrics(after_text(136, 50, 72)))
    result = reconcile(ClientCounts(prompt_tokens=150, cached_tokens=50, completion_tokens=64), counts)
    assert result.status == "ok"
    assert all(check.ok for check in result.checks)


def test_reconcile_mismatch_says_by_how_much():
    adapter = get_engine("llamacpp")
    counts = adapter.server_counts(parse_metrics(LLAMACPP_BEFORE), parse_metrics(after_text(136, 50, 71)))
    result = reconcile(ClientCounts(prompt_tokens=150, cached_tokens=50, completion_tokens=64), counts)
    assert result.status == "mismatch"
    generated = next(c for c in result.checks if c.name == "generated tokens")
    assert generated.difference == -1
    assert "client 64, server 63 (-1, -1.6%)" in result.message


def test_reconcile_not_available_without_metrics():
    from servebook.engines.counters import Scrape

    adapter = get_engine("llamacpp")
    off = Scrape(t=0.0, available=False, error="/metrics answered 501")
    assert adapter.server_counts(off, off) is None
    assert reconcile(ClientCounts(1, 0, 1), None).status == "not_available"


def test_a_missing_counter_or_usage_field_is_not_available_never_ok():
    from servebook.engines import ServerCounts

    full = ServerCounts(prompt_tokens=150, cached_tokens=50, generation_tokens=64, draft_tokens=None,
                        accepted_tokens=None)
    no_cache_counter = ServerCounts(prompt_tokens=150, cached_tokens=None, generation_tokens=64, draft_tokens=None,
                                    accepted_tokens=None)
    client = ClientCounts(prompt_tokens=150, cached_tokens=50, completion_tokens=64)
    assert reconcile(client, full).status == "ok"
    partial = reconcile(client, no_cache_counter)
    assert partial.status == "not_available" and "cached tokens: no server counter, not checked" in partial.message
    unreported = reconcile(ClientCounts(prompt_tokens=150, cached_tokens=None, completion_tokens=64), full)
    assert unreported.status == "not_available" and "not in the responses' usage" in unreported.message
    # a disagreement still wins over what could not be checked
    wrong = reconcile(ClientCounts(prompt_tokens=150, cached_tokens=None, completion_tokens=63), full)
    assert wrong.status == "mismatch"


def test_usage_without_cached_tokens_is_recorded_as_unknown_not_zero():
    from types import SimpleNamespace

    from servebook.measure.transport.client import RequestRecord, _usage_fields

    record = RequestRecord("r", "cell", 1, "prose", 8, t_send=0.0)
    _usage_fields(record, SimpleNamespace(prompt_tokens=10, completion_tokens=8, prompt_tokens_details=None))
    assert record.cached_tokens is None
    _usage_fields(record, SimpleNamespace(prompt_tokens=10, completion_tokens=8,
                                          prompt_tokens_details=SimpleNamespace(cached_tokens=0)))
    assert record.cached_tokens == 0


def _finished_stream(absent_cached_is_zero: bool, details):
    import asyncio
    from types import SimpleNamespace

    from servebook.measure.transport.client import RequestRecord, StreamRequest, _streamed

    async def chunks():
        yield SimpleNamespace(usage=None, model_extra={},
                              choices=[SimpleNamespace(text="a", delta=None, finish_reason=None)])
        yield SimpleNamespace(usage=SimpleNamespace(prompt_tokens=10, completion_tokens=1,
                                                    prompt_tokens_details=details), model_extra={}, choices=[])

    record = RequestRecord("r", "cell", 1, "prose", 1, t_send=0.0)
    request = StreamRequest("m", 1, prompt="x", absent_cached_is_zero=absent_cached_is_zero)
    return asyncio.run(_streamed(record, request, chunks()))


def test_sglang_leaves_the_cached_count_out_when_nothing_was_cached_and_that_is_zero():
    from types import SimpleNamespace

    from servebook.engines import get_engine

    # SGLang's usage_processor sends {"cached_tokens": N} only when N > 0; vLLM and llama.cpp always send theirs
    assert get_engine("sglang").usage_omits_zero_cached
    assert not get_engine("vllm").usage_omits_zero_cached and not get_engine("llamacpp").usage_omits_zero_cached
    assert _finished_stream(True, None).cached_tokens == 0
    assert _finished_stream(True, SimpleNamespace(cached_tokens=7)).cached_tokens == 7
    # elsewhere an absent count stays unknown
    assert _finished_stream(False, None).cached_tokens is None


def test_a_stream_that_ended_without_usage_is_not_zero_cached_either():
    import asyncio
    from types import SimpleNamespace

    from servebook.measure.transport.client import RequestRecord, StreamRequest, _streamed

    async def chunks():
        yield SimpleNamespace(usage=None, model_extra={},
                              choices=[SimpleNamespace(text="a", delta=None, finish_reason=None)])

    record = asyncio.run(_streamed(RequestRecord("r", "cell", 1, "prose", 1, t_send=0.0),
                                   StreamRequest("m", 1, prompt="x", absent_cached_is_zero=True), chunks()))
    assert record.cached_tokens is None and record.error
