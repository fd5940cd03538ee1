"""The gauge sampler (measure.observers.gauges): each poll one sample of the engine's gauges, over replicas as over labels;
failed polls counted, not fatal; a long cell's samples thinned, never unbounded; the cell row's summary."""

import asyncio

import httpx
import pytest

from servebook.engines import get_engine
from servebook.engines.counters import parse_metrics
from servebook.measure.observers.gauges import GAUGE_COLUMNS, GaugeSampler, gauge_figures

VLLM_PAGE = """\
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{engine="0",model_name="m"}} {preempted}
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{engine="0",le="0.3",model_name="m"}} 12.0
"""


def page(kv=0.0, running=0, waiting=0, preempted=0):
    return VLLM_PAGE.format(kv=kv, running=running, waiting=waiting, preempted=preempted)


def sampler(pages: dict[str, list[str | None]], interval_s=0.25, max_samples=2400):
    """A sampler on a mock transport: each URL answers its pages in turn (None: the connection fails)."""

    def answer(request: httpx.Request) -> httpx.Response:
        queue = pages[f"{request.url.scheme}://{request.url.host}:{request.url.port}"]
        text = queue.pop(0) if len(queue) > 1 else queue[0]
        if text is None:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, text=text)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return GaugeSampler(http, tuple(pages), get_engine("vllm").gauges, interval_s, max_samples=max_samples)


def polled(s: GaugeSampler, times: int) -> GaugeSampler:
    async def go():
        for _ in range(times):
            await s.poll()
    asyncio.run(go())
    return s


def test_each_poll_is_one_sample_and_a_failed_poll_is_counted():
    s = polled(sampler({"http://a:1": [page(0.2, 1, 0), None, page(0.9, 4, 3, preempted=2)]}), 3)
    assert [x.values for x in s.samples] == [
        {"kv_usage": 0.2, "running": 1, "waiting": 0, "preemptions": 0},
        {"kv_usage": 0.9, "running": 4, "waiting": 3, "preemptions": 2}]
    assert s.failures == 1
    assert s.samples[0].t < s.samples[1].t
    rows = s.rows("decode-prose-c4")
    assert len(rows) == 8 and set(rows[0]) == {"cell_id", "t", "name", "value"}


def test_replicas_are_read_together():
    s = polled(sampler({"http://a:1": [page(0.3, 2, 1)], "http://b:2": [page(0.8, 3, 0)]}), 1)
    assert s.samples[0].values == {"kv_usage": 0.8, "running": 5, "waiting": 1, "preemptions": 0}


def test_a_long_cell_keeps_its_whole_span_at_a_coarser_step():
    s = polled(sampler({"http://a:1": [page(running=i) for i in range(10)]}, max_samples=4), 10)
    # at 4 samples every other one goes and the step doubles: after polls 4, 6, 8 and 10
    assert [x.values["running"] for x in s.samples] == [0, 8]
    assert s.step_s == pytest.approx(0.25 * 2 ** 4)


def test_the_cell_row_summary_and_preemptions_from_the_scrapes_around_the_cell():
    s = polled(sampler({"http://a:1": [page(0.2, 1, 0), page(0.7, 4, 2), page(0.5, 4, 0)]}), 3)
    before, after = parse_metrics(page(preempted=3)), parse_metrics(page(preempted=5))
    figures = gauge_figures(s, before, after)
    assert set(figures) == set(GAUGE_COLUMNS)
    assert figures == {"kv_usage_peak": 0.7, "running_peak": 4, "waiting_peak": 2, "preemptions": 2,
                       "gauge_samples": 3}


def test_off_means_no_task_no_samples_and_no_peaks():
    s = sampler({"http://a:1": [page(0.5, 1, 1)]}, interval_s=None)

    async def cell():
        async with s:
            await asyncio.sleep(0)
    asyncio.run(cell())
    assert not s.enabled and s.samples == []
    figures = gauge_figures(s, parse_metrics(page(preempted=1)), parse_metrics(page(preempted=1)))
    assert figures["gauge_samples"] is None and figures["kv_usage_peak"] is None
    assert figures["preemptions"] == 0  # the counter's move is read from the scrapes, sampled or not


def test_sampling_runs_beside_the_cell_and_stops_with_it():
    s = sampler({"http://a:1": [page(0.1, 1, 0)]}, interval_s=0.01)

    async def cell():
        async with s:
            while len(s.samples) < 3:
                await asyncio.sleep(0.005)
        return s._task
    task = asyncio.run(cell())
    assert task.done() and len(s.samples) >= 3
