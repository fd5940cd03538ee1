"""The simulated engine's Prometheus counters, named, labelled and created the way the real engine does it.

For SGLang and vLLM the labels and the moment a sample first exists come from the engine's recorded
contract (data/engine-contracts): SGLang creates each labelled child at first use, so its cached-token
and verify counters are absent until the first cache hit or verified draft; vLLM exports its
counters at 0 from startup, and its speculative ones only when a drafter is configured. Without a
contract (or for llama.cpp) the counters are unlabelled and exist from start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engines.contracts import Contract, recorded_contracts
from .config import SimConfig

PREFIX = {"llamacpp": "llamacpp:", "sglang": "sglang:", "vllm": "vllm:"}
#: what the simulator exports, per engine: attribute -> (kind, name without prefix, help)
EXPORTED = {
    "llamacpp": {
        "prompt": ("counter", "prompt_tokens", "Number of prompt tokens processed, excluding cached tokens"),
        "cached": ("counter", "prompt_tokens_cached", "Number of prompt tokens reused from the cache"),
        "generated": ("counter", "tokens_predicted", "Number of generation tokens processed"),
        "running": ("gauge", "requests_processing", "Number of requests processing"),
        "waiting": ("gauge", "requests_deferred", "Number of requests deferred"),
        "drafted": ("counter", "spec_decode_num_draft_tokens", "Speculative: total draft tokens"),
        "accepted": ("counter", "spec_decode_num_accepted_tokens", "Speculative: accepted draft tokens"),
    },
    "sglang": {
        "prompt": ("counter", "prompt_tokens", "Number of prefill tokens processed."),
        "cached": ("counter", "cached_tokens", "Number of cached prompt tokens by source (device/host/storage)."),
        "generated": ("counter", "generation_tokens", "Number of generation tokens processed."),
        "requests": ("counter", "num_requests", "Number of requests processed."),
        "running": ("gauge", "num_running_reqs", "The number of running requests."),
        "waiting": ("gauge", "num_queue_reqs", "The number of requests in the waiting queue."),
        "verify": ("counter", "spec_verify_calls", "Number of speculative decoding verification calls."),
        "verify_width": ("gauge", "spec_num_draft_tokens", "The number of draft tokens per verification, root included."),
    },
    "vllm": {
        "prompt": ("counter", "prompt_tokens", "Number of prefill tokens processed."),
        "cached": ("counter", "prompt_tokens_cached", "Number of cached prompt tokens (local + external)."),
        "generated": ("counter", "generation_tokens", "Number of generation tokens processed."),
        "success": ("counter", "request_success", "Count of successfully processed requests."),
        "running": ("gauge", "num_requests_running", "Number of requests in model execution batches."),
        "waiting": ("gauge", "num_requests_waiting", "Number of requests waiting to be processed."),
        "kv": ("gauge", "kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
        "drafted": ("counter", "spec_decode_num_draft_tokens", "Number of draft tokens."),
        "accepted": ("counter", "spec_decode_num_accepted_tokens", "Number of accepted tokens."),
        "queue_time": ("histogram", "request_queue_time_seconds", "Histogram of time spent in WAITING phase."),
        "prefill_time": ("histogram", "request_prefill_time_seconds", "Histogram of time spent in PREFILL phase."),
        "ttft": ("histogram", "time_to_first_token_seconds", "Histogram of time to first token in seconds."),
    },
}
#: label values a real server would give a request the simulator does not describe further
DEFAULT_LABELS = {"engine_type": "unified", "engine": "0", "is_streaming": "true", "cache_source": "device",
                  "finished_reason": "length"}


def contract_of(config: SimConfig) -> Contract | None:
    """The contract of the release the simulator plays (--sim-version), else the newest recorded one."""
    recorded = sorted((c for (engine, _), c in recorded_contracts().items() if engine == config.flavor),
                      key=lambda c: tuple(int(p) if p.isdigit() else 0 for p in c.version.split(".")))
    exact = [c for c in recorded if c.version == config.version]
    found = exact or recorded
    return found[-1] if found else None


class Counters:
    """The engine's Prometheus metrics; `inc`, `set` and `observe` take the label values a request has."""

    def __init__(self, config: SimConfig):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.flavor = config.flavor
        self.registry = CollectorRegistry()
        self.values = {**DEFAULT_LABELS, "model_name": config.name}
        contract = contract_of(config) if config.flavor != "llamacpp" else None
        drafting = config.timing.draft_tokens > 0
        classes = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}
        for attribute in {a for exported in EXPORTED.values() for a in exported}:
            setattr(self, attribute, None)  # what this engine does not export is counted nowhere
        for attribute, (kind, name, doc) in EXPORTED[config.flavor].items():
            full = PREFIX[config.flavor] + name
            sample = f"{full}_total" if kind == "counter" else (f"{full}_sum" if kind == "histogram" else full)
            recorded = contract.metric(sample) if contract is not None else None
            if contract is not None and recorded is None:
                setattr(self, attribute, None)  # the release does not export it
                continue
            if recorded is not None and sample in contract.spec_only and not drafting:  # type: ignore[union-attr]
                continue  # the release makes it only when a drafter is configured (vLLM's speculative metrics)
            labels = list(recorded.labels) if recorded else []
            metric = classes[kind](full, doc, labels, registry=self.registry)
            if recorded is None or recorded.at_start:
                self._child(metric)  # a sample from start; otherwise the first use creates it
            setattr(self, attribute, metric)

        if config.flavor == "vllm":
            # vLLM publishes its cache settings as the labels of one gauge (v1/metrics/loggers.py log_metrics_info)
            info = {"block_size": "16", "cache_dtype": str(config.server_args.get("kv_cache_dtype", "auto")),
                    "enable_prefix_caching": str(config.prefix_caching), "engine": "0",
                    "gpu_memory_utilization": str(config.server_args.get("gpu_memory_utilization", 0.92))}
            Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", list(info),
                  registry=self.registry).labels(**info).set(1)

    if TYPE_CHECKING:
        # one attribute per exported metric, set from EXPORTED in __init__ (None where this engine exports none)
        def __getattr__(self, name: str) -> Any: ...

    def _child(self, metric, **extra):
        names = metric._labelnames
        if not names:
            return metric
        return metric.labels(**{n: str(extra.get(n, self.values.get(n, ""))) for n in names})

    def inc(self, metric, amount: float = 1, **extra) -> None:
        if metric is not None and amount:
            self._child(metric, **extra).inc(amount)

    def observe(self, name: str, value: float) -> None:
        """Into a latency histogram the engine keeps (vLLM's queue and prefill times); others keep none."""
        metric = getattr(self, name, None)
        if metric is not None:
            self._child(metric).observe(value)

    def set(self, metric, value: float) -> None:
        if metric is not None:
            self._child(metric).set(value)

    def render(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()
