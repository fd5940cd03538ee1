"""SGLang: flags, counters and readiness (engines.md; checked against SGLang 0.5.23, data/engine-contracts).

Counter semantics: `prompt_tokens_total` INCLUDES cached tokens and, like the generation counter,
is added when a request finishes; the server's own warmup request is counted, so the baseline
scrape must come after readiness (servebook scrapes before every cell, long after it).
Every counter is labelled and its child is created at first use: `cached_tokens_total` appears only
after the first cache hit and `spec_verify_calls_total` only after the first verified draft, so once
the engine is counting at all, a counter it lacks has counted nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from . import _python_server
from ._base import ServerCounts
from .counters import Gauge, lazy_counter_delta
from .flags import Flag, Resolved
from .registry import register

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from .counters import Scrape

# sglang/srt/arg_groups/fields/model.py, 0.5.23 (tests check this against the recorded contract)
KV_TYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")
ALGORITHMS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE",
              "ngram": "NGRAM", "dflash": "DFLASH"}


#: /server_info field -> knob; with speculative_algorithm and internal_states, all servebook reads there
REPORTED_FIELDS = {"model_path": "model_file", "served_model_name": "served_name",
                   "max_running_requests": "max_running_requests", "context_length": "context_length",
                   "chunked_prefill_size": "chunk_size", "tp_size": "tensor_parallel_size", "kv_cache_dtype": "kv_dtype"}


class SGLangDrafter(_python_server.PythonServerDrafter):
    engine_title: ClassVar[str] = "SGLang"

    num_steps: int | None = Field(None, ge=1, le=16, description="SGLang: speculative steps (EAGLE tree depth)")
    topk: int | None = Field(None, ge=1, le=16, description="SGLang: EAGLE top-k branching")

    @model_validator(mode="after")
    def _sglang_tree(self) -> "SGLangDrafter":
        tree = [self.num_steps, self.topk, self.max_draft_tokens]
        if self.kind == "dflash":
            # DFLASH forces one step of top-1 (speculative_hook.py): any other value would be recorded, not run.
            if self.num_steps not in (None, 1) or self.topk not in (None, 1):
                raise ValueError("knobs.drafter: SGLang's DFLASH always runs num_steps 1 and topk 1 (it overrides "
                                 "other values); set only max_draft_tokens, the block it drafts")
        elif self.kind in ("eagle", "eagle3", "mtp", "draft_model") and any(tree) and not all(tree):
            raise ValueError("knobs.drafter: SGLang takes num_steps, topk and max_draft_tokens all three or none")
        elif self.topk == 1 and self.num_steps and self.max_draft_tokens != self.num_steps + 1:
            # a chain of top-1 drafts verifies num_steps + 1 tokens whatever was asked (speculative_hook.py)
            raise ValueError(f"knobs.drafter: with topk 1 SGLang verifies num_steps + 1 = {self.num_steps + 1} "
                             f"tokens and overrides max_draft_tokens {self.max_draft_tokens}; set it to "
                             f"{self.num_steps + 1}")
        return self


class SGLangReasoning(_python_server.PythonServerReasoning):
    engine_title: ClassVar[str] = "SGLang"


class SGLangKnobs(_python_server.PythonServerKnobs):
    engine_title: ClassVar[str] = "SGLang"
    kv_types: ClassVar[tuple[str, ...]] = KV_TYPES

    drafter: SGLangDrafter = SGLangDrafter()
    reasoning: SGLangReasoning | None = None


def _speculative(drafter: SGLangDrafter, resolved: Resolved) -> list[str]:
    if drafter.kind == "none":
        return []
    args = ["--speculative-algorithm", ALGORITHMS[drafter.kind]]
    if resolved.draft_path:
        args += ["--speculative-draft-model-path", resolved.draft_path]
    if drafter.num_steps is not None and drafter.kind != "dflash":
        args += ["--speculative-num-steps", str(drafter.num_steps), "--speculative-eagle-topk", str(drafter.topk),
                 "--speculative-num-draft-tokens", str(drafter.max_draft_tokens)]
    elif drafter.max_draft_tokens is not None:
        args += ["--speculative-num-draft-tokens", str(drafter.max_draft_tokens)]
    return args


#: candidate field -> its flags, in command-line order; `also`: every other spelling SGLang's parser reads the same
FLAGS = {
    "model.revision": Flag(("--revision",)),
    "model.served_name": Flag(("--served-model-name",)),
    "knobs.tensor_parallel_size": Flag(("--tp-size",), also=("--tp", "--tensor-parallel-size"), omit=1),
    "knobs.chunk_size": Flag(("--chunked-prefill-size",)),
    "knobs.max_running_requests": Flag(("--max-running-requests",)),
    "knobs.context_length": Flag(("--context-length",)),
    "knobs.kv_dtype": Flag(("--kv-cache-dtype",)),
    # the radix cache is on unless turned off
    "knobs.prefix_caching": Flag(("--disable-radix-cache",), render=_python_server.switch(None, "--disable-radix-cache")),
    "knobs.drafter": Flag(("--speculative-algorithm", "--speculative-draft-model-path"),
                          also=("--speculative-draft-model", "--speculative-num-steps", "--speculative-eagle-topk",
                                "--speculative-num-draft-tokens", "--speculative-dflash-block-size"),
                          render=_speculative),
    "knobs.reasoning": Flag(("--reasoning-parser",), render=_python_server.reasoning_parser, yields=True),
}


class SGLangAdapter(_python_server.PythonServerAdapter):
    container_port = 30000
    compile_cache_env = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    process_markers = (b"sglang serve", b"sglang.launch_server")

    kind = "sglang"
    knobs_model = SGLangKnobs
    flags = FLAGS
    launch_flags = ("--host", "--port", "--model-path", "--model", "--enable-metrics", "--enable-cache-report")
    # argparse's prefix matching is on: `--chunked-prefill` would set --chunked-prefill-size
    flag_prefixes = True
    # 0.5.23 logs "Capture target decode CUDA graph begin." (cuda_graph_setup.py); older releases "Capture cuda graph"
    compile_pattern = re.compile(r"Capture .*graph (begin|failed)|Capture cuda graph|Capturing batches|"
                                 r"torch\.compile|Compiling|compile_fx|autotun", re.I)
    info_paths = ("/server_info", "/get_server_info")
    served_name_flag = "--served-model-name"
    self_report_paths = ("/server_info", "/get_server_info")
    # usage_processor._details_if_cached (0.5.x): `{"cached_tokens": N} only when N > 0`; servebook always passes
    # --enable-cache-report, so a usage without the details is a prompt with nothing cached (seen live 2026-12-05: every
    # decode cell of the 1B study read "cached tokens: not in the responses' usage" and went unreconciled)
    usage_omits_zero_cached = True
    # the engine's own view of a request, as cell means: its wait, its prompt's forward passes (one observation per
    # request, every chunk of it), and its first token as the tokenizer manager saw it
    queue_histogram = "sglang:queue_time_seconds"
    prefill_histogram = 'sglang:per_stage_req_latency_seconds{stage="prefill_forward"}'
    ttft_histogram = "sglang:time_to_first_token_seconds"
    # per scheduler rank; SGLang calls a preemption a retraction, and creates that counter at its first one
    gauges = (Gauge("kv_usage", ("sglang:token_usage",), across="max"), Gauge("running", ("sglang:num_running_reqs",)),
              Gauge("waiting", ("sglang:num_queue_reqs",)),
              Gauge("preemptions", ("sglang:num_retracted_requests_total",), counter=True, lazy=True))

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        info = next((b for p in self.self_report_paths if isinstance(b := bodies.get(p), dict)), {})
        out: dict[str, Any] = {}
        # The values are resolved ones (server_args.py): `auto` comes back as the dtype it chose.
        for field, knob in REPORTED_FIELDS.items():
            if info.get(field) is not None:
                out[knob] = info[field]
        if isinstance(info.get("enable_cache_report"), bool):  # cached tokens in the usage (servebook turns it on)
            out["cache_report"] = info["enable_cache_report"]
        if isinstance(info.get("disable_radix_cache"), bool):
            out["prefix_caching"] = not info["disable_radix_cache"]
        if "speculative_algorithm" in info:
            out["drafter_active"] = bool(info["speculative_algorithm"])
            if info["speculative_algorithm"]:
                out["drafter_method"] = info["speculative_algorithm"]  # EAGLE, EAGLE3, NEXTN, NGRAM, STANDALONE
        if "reasoning_parser" in info:
            out["reasoning_parser"] = info["reasoning_parser"] or ""  # null: none
        # The scheduler may run fewer requests than the flag asked when the KV pool is smaller (model_runner.py).
        states = info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            effective = states[0].get("effective_max_running_requests_per_dp")
            if isinstance(effective, int):
                out["effective_max_running_requests"] = effective
        return out

    def fixed_args(self, candidate: "Candidate", *, port: int, model_path: str, binary: str | None) -> list[str]:
        return ["sglang", "serve", "--model-path", model_path, "--host", _python_server.listen_host(candidate), "--port",
                str(port), "--enable-metrics", "--enable-cache-report"]

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        if not after.available:
            return None

        def lazy(name: str) -> float | None:
            return lazy_counter_delta(before, after, name, counting="sglang:prompt_tokens_total")

        generated, verify = lazy("sglang:generation_tokens_total"), lazy("sglang:spec_verify_calls_total")
        drafted = accepted = None
        # SGLang counts verify passes, not drafts (its counters are added as requests finish). Each pass proposes
        # spec_num_draft_tokens - 1 tokens (the gauge counts the verified root too) and yields its accepted drafts
        # plus one; a request's first token comes from its prefill: accepted = generated - passes - requests,
        # SGLang's own accept length being completion_tokens / spec_verify_ct (test/kits/spec_server_kits.py)
        per_pass = max(after.by_label("sglang:spec_num_draft_tokens", "tp_rank").values(), default=None)
        finished = lazy("sglang:num_requests_total")
        if verify is not None and per_pass is not None and per_pass > 1:
            drafted = verify * (per_pass - 1)
            if generated is not None and finished is not None:
                accepted = max(0.0, generated - verify - finished)
        return ServerCounts(
            prompt_tokens=lazy("sglang:prompt_tokens_total"),
            cached_tokens=lazy("sglang:cached_tokens_total"),
            generation_tokens=generated,
            draft_tokens=drafted,
            accepted_tokens=accepted,
            verify_passes=verify,
        )


register(SGLangAdapter())
