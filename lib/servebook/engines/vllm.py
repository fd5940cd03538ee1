"""vLLM: flags, counters and readiness (engines.md; checked against vLLM 0.33.0, data/engine-contracts).

Counter semantics: `prompt_tokens_total` INCLUDES cached tokens and is counted at a request's
first token; generation tokens are counted every engine step. Connections are refused until the
engine is ready. The counters are labelled per engine and exist from startup; the speculative ones
only when a drafter is configured.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, ClassVar

from . import _python_server
from ._base import ServerCounts
from .counters import Gauge, counter_delta
from .flags import Flag, Resolved
from .registry import register

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from .counters import Scrape

# `CacheDType` in vllm/config/cache.py, 0.33.0 (tests check this against the recorded contract). Some attention
# backends need their own: FLASHINFER_MLA_SPARSE_SM120 takes only fp8_ds_mla.
KV_TYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
            "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4", "nvfp4_4over6",
            "nvfp4_ds_mla", "octave_k3v3", "octave_k3v3_compact", "octave_k3v4", "turboquant_3bit_nc",
            "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_k8v4", "ultraquant_4bit")
#: the resolved configuration as JSON, served in development mode (vllm/entrypoints/serve/instrumentator/server_info.py)
SERVER_INFO = "/server_info?config_format=json"
METHODS = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram", "draft_model": "draft_model",
           "dflash": "dflash"}


class VLLMDrafter(_python_server.PythonServerDrafter):
    engine_title: ClassVar[str] = "vLLM"
    refusals: ClassVar[dict[str, str]] = {
        key: "knobs.drafter.num_steps/topk are SGLang settings; vLLM takes max_draft_tokens"
        for key in ("num_steps", "topk")}


class VLLMReasoning(_python_server.PythonServerReasoning):
    engine_title: ClassVar[str] = "vLLM"


class VLLMKnobs(_python_server.PythonServerKnobs):
    engine_title: ClassVar[str] = "vLLM"
    kv_types: ClassVar[tuple[str, ...]] = KV_TYPES

    drafter: VLLMDrafter = VLLMDrafter()
    reasoning: VLLMReasoning | None = None


def _speculative_config(drafter: VLLMDrafter, resolved: Resolved) -> list[str]:
    if drafter.kind == "none":
        return []
    config: dict[str, Any] = {"method": METHODS[drafter.kind]}
    if resolved.draft_path:
        config["model"] = resolved.draft_path
    if drafter.max_draft_tokens is not None:
        config["num_speculative_tokens"] = drafter.max_draft_tokens
    return ["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]


#: candidate field -> its flags, in command-line order; `also`: every other spelling vLLM's parser reads the same
FLAGS = {
    "model.revision": Flag(("--revision",)),
    "model.served_name": Flag(("--served-model-name",)),
    "knobs.tensor_parallel_size": Flag(("-tp",), also=("--tensor-parallel-size",), omit=1),
    "knobs.chunk_size": Flag(("--enable-chunked-prefill", "--max-num-batched-tokens"),
                             also=("--disable-chunked-prefill", "--no-enable-chunked-prefill"),
                             render=lambda v, _: [] if v is None else
                             ["--enable-chunked-prefill", "--max-num-batched-tokens", str(v)]),
    "knobs.max_running_requests": Flag(("--max-num-seqs",)),
    "knobs.context_length": Flag(("--max-model-len",)),
    "knobs.kv_dtype": Flag(("--kv-cache-dtype",)),
    "knobs.prefix_caching": Flag(("--enable-prefix-caching", "--no-enable-prefix-caching"),
                                 also=("--disable-prefix-caching",),
                                 render=_python_server.switch("--enable-prefix-caching", "--no-enable-prefix-caching")),
    "knobs.drafter": Flag(("--speculative-config",), also=("-sc",), render=_speculative_config),
    "knobs.reasoning": Flag(("--reasoning-parser",), render=_python_server.reasoning_parser, yields=True),
}


class VLLMAdapter(_python_server.PythonServerAdapter):
    container_port = 8000
    # from arrival to scheduling, and from scheduling to the first token (vllm/v1/metrics/loggers.py)
    queue_histogram = "vllm:request_queue_time_seconds"
    prefill_histogram = "vllm:request_prefill_time_seconds"
    ttft_histogram = "vllm:time_to_first_token_seconds"
    # per engine core (label `engine`); older releases called the KV share (0-1) gpu_cache_usage_perc
    gauges = (Gauge("kv_usage", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), across="max"),
              Gauge("running", ("vllm:num_requests_running",)), Gauge("waiting", ("vllm:num_requests_waiting",)),
              Gauge("preemptions", ("vllm:num_preemptions_total",), counter=True))
    compile_cache_env = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")
    # not any command that mentions "vllm" (a servebook sweep of a vllm study is not an engine)
    process_markers = (b"vllm serve", b"vllm.entrypoints")

    kind = "vllm"
    knobs_model = VLLMKnobs
    flags = FLAGS
    launch_flags = ("--host", "--port", "--enable-prompt-tokens-details", "--disable-prompt-tokens-details")
    # FlexibleArgumentParser reads --max_num_seqs as --max-num-seqs, and argparse takes unambiguous prefixes
    flag_underscores = True
    flag_prefixes = True
    # the last alternative is vLLM's own kernel JIT monitor (vllm/utils/jit_monitor.py, active after warm-up from
    # 0.26): "Triton kernel JIT compilation during inference: NAME. This causes a latency spike; ..."
    compile_pattern = re.compile(r"Compiling a graph|torch\.compile|Capturing CUDA graph|compile range|"
                                 r"Dynamo bytecode transform|during inference: .*latency spike", re.I)
    info_paths = ("/version",)
    served_name_flag = "--served-model-name"
    # The whole resolved configuration, served in development mode (VLLM_SERVER_DEV_MODE, which servebook sets
    # on the engines it launches); /metrics' vllm:cache_config_info says the cache settings on any vLLM server.
    self_report_paths = (SERVER_INFO, "/metrics")

    def launch_env(self, candidate: "Candidate") -> dict[str, str]:
        # Development mode adds endpoints (/server_info among them) and changes nothing in how requests are served.
        return {"VLLM_SERVER_DEV_MODE": "1"}

    def sizes_memory_from_free(self, candidate: "Candidate") -> bool:
        # a fixed KV size skips the free-memory profiling (its log says "skipped memory profiling"), seen live
        return not any(arg.split("=")[0] == "--kv-cache-memory-bytes" for arg in candidate.extra_args)

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        listed = (bodies.get("/v1/models") or {}).get("data") if isinstance(bodies.get("/v1/models"), dict) else None
        if isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], dict):
            if listed[0].get("root"):
                out["model_file"] = listed[0]["root"]
            if isinstance(listed[0].get("max_model_len"), int):
                out["context_length"] = listed[0]["max_model_len"]
        metrics = bodies.get("/metrics")
        if isinstance(metrics, str):
            out.update(_metrics_settings(metrics))
        info = bodies.get(SERVER_INFO)
        config = info.get("vllm_config") if isinstance(info, dict) else None
        if isinstance(config, dict):
            out.update(_config_settings(config))
        return out

    def stream_options(self) -> dict:
        # Usage on every chunk gives the tokens each chunk carried (several, with a drafter).
        return {"include_usage": True, "continuous_usage_stats": True}

    def fixed_args(self, candidate: "Candidate", *, port: int, model_path: str, binary: str | None) -> list[str]:
        return ["vllm", "serve", model_path, "--host", _python_server.listen_host(candidate), "--port", str(port),
                "--enable-prompt-tokens-details"]

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        if not after.available:
            return None

        def delta(name: str) -> float | None:
            return counter_delta(before, after, name)

        return ServerCounts(
            prompt_tokens=delta("vllm:prompt_tokens_total"),
            cached_tokens=delta("vllm:prompt_tokens_cached_total"),
            generation_tokens=delta("vllm:generation_tokens_total"),
            draft_tokens=delta("vllm:spec_decode_num_draft_tokens_total"),
            accepted_tokens=delta("vllm:spec_decode_num_accepted_tokens_total"),
        )


def _metrics_settings(text: str) -> dict[str, Any]:
    """The cache settings vLLM publishes as labels of `vllm:cache_config_info`, and whether it counts drafts (the
    speculative counters exist only when a drafter is configured)."""
    from .counters import parse_metrics

    try:
        scrape = parse_metrics(text)
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    info = next((dict(s.labels) for s in scrape.samples if s.name == "vllm:cache_config_info"), None)
    if info:
        if info.get("cache_dtype"):
            out["kv_dtype"] = info["cache_dtype"]
        if info.get("enable_prefix_caching") in ("True", "False"):
            out["prefix_caching"] = info["enable_prefix_caching"] == "True"
        blocks, size = info.get("num_gpu_blocks"), info.get("block_size")
        if (info.get("kv_cache_size_tokens") or "").isdigit():  # 0.26 says it; older releases only the blocks
            out["kv_cache_tokens"] = int(info["kv_cache_size_tokens"])
        elif blocks and size and blocks.isdigit() and size.isdigit():
            out["kv_cache_tokens"] = int(blocks) * int(size)
    if any(s.name.startswith("vllm:") for s in scrape.samples):
        out["drafter_active"] = any(s.name.startswith("vllm:spec_decode_num_draft_tokens") for s in scrape.samples)
    return out


def _config_settings(config: dict[str, Any]) -> dict[str, Any]:
    """Knob values from the resolved configuration of /server_info?config_format=json (development mode)."""
    def section(name: str) -> dict[str, Any]:
        value = config.get(name)
        return value if isinstance(value, dict) else {}

    scheduler, cache, parallel, model = (section("scheduler_config"), section("cache_config"),
                                         section("parallel_config"), section("model_config"))
    out: dict[str, Any] = {}
    for value, knob in ((scheduler.get("max_num_seqs"), "max_running_requests"),
                        (scheduler.get("max_num_batched_tokens"), "chunk_size"),
                        (parallel.get("tensor_parallel_size"), "tensor_parallel_size"),
                        (model.get("max_model_len"), "context_length")):
        if isinstance(value, int):
            out[knob] = value
    if isinstance(cache.get("cache_dtype"), str):
        out["kv_dtype"] = cache["cache_dtype"]
    if isinstance(cache.get("enable_prefix_caching"), bool):
        out["prefix_caching"] = cache["enable_prefix_caching"]
    if isinstance(cache.get("kv_cache_size_tokens"), int):
        out["kv_cache_tokens"] = cache["kv_cache_size_tokens"]
    parser = section("structured_outputs_config").get("reasoning_parser")
    if isinstance(parser, str):
        out["reasoning_parser"] = parser  # "" without one
    if "speculative_config" in config:
        spec = config["speculative_config"]
        out["drafter_active"] = isinstance(spec, dict) and bool(spec.get("method"))
        if isinstance(spec, dict) and spec.get("method"):
            out["drafter_method"] = spec["method"]
    return out


register(VLLMAdapter())
