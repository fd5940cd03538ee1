"""vLLM: flags, counters and readiness (engines.md; checked against vLLM 0.33.0, data/engine-contracts).

Counter semantics: `prompt_tokens_total` INCLUDES cached tokens and is counted at a request's
first token; generation tokens are counted every engine step. Connections are refused until the
engine is ready. The counters are labelled per engine and exist from startup; the speculative ones
only when a drafter is configured.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from . import _gpu, register
from ._base import ServerCounts
from .counters import counter_delta

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from .counters import Scrape

# `CacheDType` in vllm/config/cache.py, 0.33.0 (tests check this against the recorded contract). Some attention
# backends need their own: FLASHINFER_MLA_SPARSE_SM120 takes only fp8_ds_mla.
KV_TYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
            "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4", "nvfp4_4over6",
            "nvfp4_ds_mla", "octave_k3v3", "octave_k3v3_compact", "octave_k3v4", "turboquant_3bit_nc",
            "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_k8v4", "ultraquant_4bit")
METHODS = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram", "draft_model": "draft_model",
           "dflash": "dflash"}


class VLLMAdapter(_gpu.PythonServerAdapter):
    container_port = 8000
    # from arrival to scheduling, and from scheduling to the first token (vllm/v1/metrics/loggers.py)
    queue_histogram = "vllm:request_queue_time_seconds"
    prefill_histogram = "vllm:request_prefill_time_seconds"
    compile_cache_env = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")
    # not any command that mentions "vllm" (a servebook sweep of a vllm study is not an engine)
    process_markers = (b"vllm serve", b"vllm.entrypoints")

    def local_binary(self, candidate: "Candidate", reporter) -> str:
        import shutil

        return shutil.which("vllm") or super().local_binary(candidate, reporter)

    kind = "vllm"
    owned = {
        "chunk_size": ("--max-num-batched-tokens", "--enable-chunked-prefill", "--disable-chunked-prefill",
                       "--no-enable-chunked-prefill"),
        "max_running_requests": ("--max-num-seqs",),
        "context_length": ("--max-model-len",),
        "kv_dtype": ("--kv-cache-dtype",),
        "tensor_parallel_size": ("-tp", "--tensor-parallel-size"),
        "drafter": ("--speculative-config", "-sc"),
        "launch": ("--host", "--port", "--revision", "--enable-prompt-tokens-details",
                   "--disable-prompt-tokens-details", "--served-model-name"),
    }
    # FlexibleArgumentParser reads --max_num_seqs as --max-num-seqs, and argparse takes unambiguous prefixes
    flag_underscores = True
    flag_prefixes = True
    compile_pattern = re.compile(r"Compiling a graph|torch\.compile|Capturing CUDA graph|compile range|"
                                 r"Dynamo bytecode transform", re.I)
    title = "vLLM"
    kv_types = KV_TYPES
    info_paths = ("/version",)
    served_name_flag = "--served-model-name"

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        # vLLM describes itself only through /v1/models: the model it loaded and its context length.
        listed = (bodies.get("/v1/models") or {}).get("data") if isinstance(bodies.get("/v1/models"), dict) else None
        if not isinstance(listed, list) or len(listed) != 1 or not isinstance(listed[0], dict):
            return {}
        out: dict[str, Any] = {}
        if listed[0].get("root"):
            out["model_file"] = listed[0]["root"]
        if isinstance(listed[0].get("max_model_len"), int):
            out["context_length"] = listed[0]["max_model_len"]
        return out

    def stream_options(self) -> dict:
        # Usage on every chunk gives the tokens each chunk carried (several, with a drafter).
        return {"include_usage": True, "continuous_usage_stats": True}

    def check(self, candidate: "Candidate") -> None:
        self.check_common(candidate)
        drafter = candidate.knobs.drafter
        if drafter.num_steps or drafter.topk:
            raise ValueError("knobs.drafter.num_steps/topk are SGLang settings; vLLM takes max_draft_tokens")
        self.check_extra_args(candidate)

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]:
        knobs = candidate.knobs
        args = ["vllm", "serve", model_path,
                "--host", candidate.launch.host if candidate.launch.mode != "compose" else "0.0.0.0",
                "--port", str(port), "--enable-prompt-tokens-details"]
        if candidate.model.revision:
            args += ["--revision", candidate.model.revision]
        if candidate.model.served_name:
            args += ["--served-model-name", candidate.model.served_name]
        args += _gpu.knob_args(knobs, {
            "tensor_parallel_size": ("-tp",), "chunk_size": ("--enable-chunked-prefill", "--max-num-batched-tokens"),
            "max_running_requests": ("--max-num-seqs",), "context_length": ("--max-model-len",),
            "kv_dtype": ("--kv-cache-dtype",)})
        drafter = knobs.drafter
        if drafter.kind != "none":
            config: dict = {"method": METHODS[drafter.kind]}
            if draft_path:
                config["model"] = draft_path
            if drafter.max_draft_tokens is not None:
                config["num_speculative_tokens"] = drafter.max_draft_tokens
            args += ["--speculative-config", json.dumps(config, sort_keys=True, separators=(",", ":"))]
        return args + list(candidate.extra_args)

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


register(VLLMAdapter())
