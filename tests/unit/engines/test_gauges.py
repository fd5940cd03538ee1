"""The engines' load gauges (EngineAdapter.gauges): names the engines really export, read from /metrics texts built
from the recorded contracts (their names, types and labels; lib/servebook/data/engine-contracts) and from a real
llama-server's page, combined over ranks and replicas as a queue builds up."""

from pathlib import Path

import pytest

from servebook.engines import get_engine
from servebook.engines.contracts import recorded_contracts
from servebook.engines.counters import Gauge, gauge_names, parse_metrics, parse_only

#: /metrics of the llama-server servebook builds (llama-cpp-python 0.3.36), two requests running and one deferred
LLAMACPP_METRICS = Path(__file__).parent / "recorded" / "llamacpp-0.3.36-metrics.txt"


def newest_contract(engine):
    found = sorted((c for (kind, _), c in recorded_contracts().items() if kind == engine),
                   key=lambda c: tuple(int(p) for p in c.version.split(".")))
    return found[-1]


def contract_text(engine: str, values: dict[str, list[float]]) -> str:
    """A /metrics page of `engine`'s newest recorded release: each named sample once per rank, with the labels the
    release gives it (a name the release does not export fails here)."""
    contract = newest_contract(engine)
    lines = []
    for name, per_rank in values.items():
        metric = contract.metric(name)
        assert metric is not None, f"{engine} {contract.version} exports no {name}"
        family = name.removesuffix("_total") if metric.type == "counter" else name
        lines.append(f"# TYPE {family} {metric.type}")
        for rank, value in enumerate(per_rank):
            labels = ",".join(f'{label}="{rank if label in ("engine", "tp_rank", "dp_rank") else "x"}"'
                              for label in metric.labels)
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def read_all(engine: str, text: str) -> dict[str, float | None]:
    scrape = parse_only(text, gauge_names(get_engine(engine).gauges))
    return {g.name: g.read(scrape) for g in get_engine(engine).gauges}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_every_gauge_an_adapter_reads_is_exported_by_its_engine_as_that_type(engine):
    contract = newest_contract(engine)
    for gauge in get_engine(engine).gauges:
        metric = contract.metric(gauge.metrics[0])
        assert metric is not None, f"{gauge.metrics[0]} is not in {engine} {contract.version}'s recorded metrics"
        assert metric.type == ("counter" if gauge.counter else "gauge")
        # SGLang creates its labelled children at first use: an absent counter there has counted nothing yet
        assert gauge.lazy == (gauge.counter and not metric.at_start)


def test_vllm_gauges_over_two_engine_cores():
    text = contract_text("vllm", {"vllm:kv_cache_usage_perc": [0.31, 0.74], "vllm:num_requests_running": [3, 4],
                                  "vllm:num_requests_waiting": [0, 2], "vllm:num_preemptions_total": [1, 5],
                                  "vllm:generation_tokens_total": [900, 950]})
    # the fullest core's KV share; requests over both
    assert read_all("vllm", text) == {"kv_usage": 0.74, "running": 7, "waiting": 2, "preemptions": 6}
    before = parse_metrics(text)
    after = parse_metrics(text.replace("} 5\n", "} 8\n"))
    preemptions = next(g for g in get_engine("vllm").gauges if g.name == "preemptions")
    assert preemptions.delta(before, after) == 3


def test_vllm_before_the_kv_gauge_was_renamed():
    text = '# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
    assert read_all("vllm", text)["kv_usage"] == 0.5


def test_sglang_gauges_over_ranks_and_its_lazy_retraction_counter():
    base = {"sglang:token_usage": [0.52, 0.61], "sglang:num_running_reqs": [6, 5], "sglang:num_queue_reqs": [4, 0]}
    fresh = contract_text("sglang", base)  # nothing retracted yet: the counter has no sample at all
    assert read_all("sglang", fresh) == {"kv_usage": 0.61, "running": 11, "waiting": 4, "preemptions": 0.0}
    retracted = contract_text("sglang", {**base, "sglang:num_retracted_requests_total": [2, 1]})
    preemptions = next(g for g in get_engine("sglang").gauges if g.name == "preemptions")
    assert preemptions.delta(parse_metrics(fresh), parse_metrics(retracted)) == 3
    # a server that answers nothing is not a server that retracted nothing
    assert preemptions.read(parse_metrics("")) is None


def test_llamacpp_gauges_from_the_real_servers_page():
    text = LLAMACPP_METRICS.read_text()
    assert read_all("llamacpp", text) == {"kv_usage": None, "running": 2, "waiting": 1}
    # the sampler keeps only the gauges' samples of the page: not the counters, not the comments
    kept = parse_only(text, gauge_names(get_engine("llamacpp").gauges))
    assert {s.name for s in kept.samples} == {"llamacpp:requests_processing", "llamacpp:requests_deferred"}
    assert parse_metrics(text).total("llamacpp:requests_processing") == 2


def test_an_engine_without_gauges_and_a_page_without_them():
    assert get_engine("openai").gauges == ()
    gauge = Gauge("running", ("x:running",))
    assert gauge.read(parse_only("y:other 3\n", gauge_names((gauge,)))) is None
    # label values may hold spaces and braces; the name is what selects a line
    assert gauge.read(parse_only('x:running{model="a b {c}"} 2\n', gauge_names((gauge,)))) == 2
