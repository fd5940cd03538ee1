import pytest

from servebook.config import Plan
from servebook.measure.cells import CellSpec, plan_cells, summarize_cell
from servebook.measure.observers.reconcile import Check, Reconciliation
from tests.helpers.records import request_record

OK = Reconciliation("ok", [Check("generated tokens", 10, 10)])


def record(i, t_send, t_first, t_last, completion=10, prompt=100, cached=0, error=None):
    return request_record(i, concurrency=2, completion=completion, t_send=t_send, t_first=t_first, t_last=t_last,
                          prompt_tokens=prompt, cached_tokens=cached, error=error)


def test_decode_summary_follows_metric_definitions():
    spec = CellSpec("decode-prose-c2", "decode", "prose", 2, 2, 10)
    records = [record(0, 0.0, 0.5, 1.4), record(1, 0.1, 0.7, 2.5)]
    s = summarize_cell(spec, records, OK)
    assert s["valid"]
    assert s["completion_tokens"] == 20
    assert s["wall_s"] == pytest.approx(2.5)
    assert s["aggregate_tok_s"] == pytest.approx(20 / 2.5)
    # per request: (10 - 1) / 0.9 = 10.0 and 9 / 1.8 = 5.0; median 7.5
    assert s["per_request_tok_s"] == pytest.approx(7.5)
    assert s["ttft_s"] == pytest.approx((0.5 + 0.6) / 2)


def test_wrong_length_error_and_mismatch_make_the_cell_invalid():
    spec = CellSpec("decode-prose-c2", "decode", "prose", 2, 3, 10)
    records = [record(0, 0, 0.1, 1.0, completion=9), record(1, 0, 0.1, 1.0),
               record(2, 0, None, None, error="APIConnectionError: boom")]
    bad = Reconciliation("mismatch", [Check("generated tokens", 19, 18)])
    s = summarize_cell(spec, records, bad)
    assert not s["valid"]
    assert "1 of 3 requests failed (APIConnectionError: boom)" in s["invalid_reasons"]
    assert "returned [9] tokens instead of 10" in s["invalid_reasons"]
    assert "counters disagree" in s["invalid_reasons"]


def test_prefill_must_be_cold_and_exact():
    spec = CellSpec("prefill-512", "prefill", "prose", 1, 2, 1, 512)
    records = [record(0, 0, 0.1, 0.1, completion=1, prompt=512),
               record(1, 1, 1.05, 1.05, completion=1, prompt=512, cached=400)]
    s = summarize_cell(spec, records, OK)
    assert s["prefill_tok_s"] == pytest.approx((5120 + 10240) / 2)
    assert not s["valid"] and "not cold" in s["invalid_reasons"]
    s2 = summarize_cell(spec, [record(0, 0, 0.1, 0.1, completion=1, prompt=511)], OK)
    assert "511" in s2["invalid_reasons"]


def test_plan_expands_to_cells():
    cells = plan_cells(Plan())
    ids = [c.cell_id for c in cells]
    assert ids[:3] == ["decode-prose-c1", "decode-prose-c2", "decode-prose-c4"]
    assert "prefill-2048" in ids
    assert next(c for c in cells if c.cell_id == "decode-code-c4").n_requests == 8


def test_decode_rate_needs_two_tokens_and_a_span():
    assert record(0, 0, 1, 1, completion=1).decode_rate is None
    assert record(0, 0, 1, 2, completion=5).decode_rate == pytest.approx(4.0)


def test_cold_prefill_needs_evidence():
    spec = CellSpec("prefill-512", "prefill", None, 1, 2, 1, prompt_tokens=100)
    unreported = [record(i, 0, 0.1, 0.1, completion=1, cached=None) for i in range(2)]
    no_counter = Reconciliation("not_available", [Check("cached tokens", None, None)])
    s = summarize_cell(spec, unreported, no_counter)
    assert not s["valid"] and "cold not verified" in s["invalid_reasons"] and s["cached_tokens"] is None
    counter_says_cold = Reconciliation("not_available", [Check("cached tokens", None, 0)])
    assert summarize_cell(spec, unreported, counter_says_cold)["valid"]
    counter_says_warm = Reconciliation("not_available", [Check("cached tokens", None, 64)])
    assert "not cold: the engine's counter says 64" in summarize_cell(spec, unreported, counter_says_warm)[
        "invalid_reasons"]
    reported_zero = [record(i, 0, 0.1, 0.1, completion=1, cached=0) for i in range(2)]
    assert summarize_cell(spec, reported_zero, no_counter)["valid"]


def test_ttft_is_split_where_the_engine_reports_its_prompt_time():
    spec = CellSpec("prefill-512", "prefill", "prose", 1, 2, 1, 512)
    records = [record(i, 0.0, 0.30, 0.30, completion=1, prompt=512) for i in range(2)]
    for r in records:
        r.server_prompt_ms = 100.0
    s = summarize_cell(spec, records, OK)
    assert s["engine_prompt_s"] == pytest.approx(0.1) and s["ttft_outside_engine_s"] == pytest.approx(0.2)
    plain = summarize_cell(spec, [record(0, 0.0, 0.3, 0.3, completion=1, prompt=512)], OK)
    assert plain["engine_prompt_s"] is None and plain["ttft_outside_engine_s"] is None


def test_the_ttft_split_comes_from_the_engines_histograms_where_it_reports_no_per_request_timings():
    from servebook.engines.counters import histogram_mean, parse_metrics
    from servebook.measure.cells import cell_figures, with_engine_split

    def scrape(queue_sum, queue_n, prefill_sum, prefill_n):
        return parse_metrics(
            "# TYPE vllm:request_queue_time_seconds histogram\n"
            f'vllm:request_queue_time_seconds_sum{{model_name="m"}} {queue_sum}\n'
            f'vllm:request_queue_time_seconds_count{{model_name="m"}} {queue_n}\n'
            "# TYPE vllm:request_prefill_time_seconds histogram\n"
            f'vllm:request_prefill_time_seconds_sum{{model_name="m"}} {prefill_sum}\n'
            f'vllm:request_prefill_time_seconds_count{{model_name="m"}} {prefill_n}\n')

    before, after = scrape(1.0, 10, 2.0, 10), scrape(1.4, 12, 2.5, 12)
    queue, prefill = (histogram_mean(before, after, f"vllm:request_{n}_time_seconds") for n in ("queue", "prefill"))
    assert queue == pytest.approx(0.2) and prefill == pytest.approx(0.25)
    assert histogram_mean(before, before, "vllm:request_queue_time_seconds") is None, "nothing observed"
    assert histogram_mean(before, after, "sglang:nothing") is None
    spec = CellSpec("prefill-2048", "prefill", None, 1, 2, 1, prompt_tokens=2048)
    records = [record(0, 0.0, 0.5, 0.5, completion=1), record(1, 1.0, 1.6, 1.6, completion=1)]
    split = with_engine_split(cell_figures(spec, records), records, queue, prefill)
    assert split["engine_queue_s"] == pytest.approx(0.2) and split["engine_prompt_s"] == pytest.approx(0.25)
    assert split["ttft_outside_engine_s"] == pytest.approx(0.55 - 0.25 - 0.2)
    kept = with_engine_split({**cell_figures(spec, records), "engine_prompt_s": 0.3}, records, None, 0.25)
    assert kept["engine_prompt_s"] == 0.3, "per-request timings, where the engine gives them, come first"
    # vLLM's own first-token clock, beside the client's: what lies before its front end has the request
    assert with_engine_split(cell_figures(spec, records), records, queue, prefill, 0.31)["engine_ttft_s"] == 0.31
    assert split["engine_ttft_s"] is None, "not measured is None, never a guess"
