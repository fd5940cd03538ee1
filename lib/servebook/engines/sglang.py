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
from typing import TYPE_CHECKING, Any

from . import _gpu, register
from ._base import ServerCounts
from .counters import lazy_counter_delta

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


class SGLangAdapter(_gpu.PythonServerAdapter):
    container_port = 30000
    compile_cache_env = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    process_markers = (b"sglang serve", b"sglang.launch_server")

    def local_binary(self, candidate: "Candidate", reporter) -> str:
        import shutil

        return shutil.which("sglang") or super().local_binary(candidate, reporter)

    kind = "sglang"
    owned = {
        "chunk_size": ("--chunked-prefill-size",),
        "max_running_requests": ("--max-running-requests",),
        "context_length": ("--context-length",),
        "kv_dtype": ("--kv-cache-dtype",),
        "tensor_parallel_size": ("--tp-size", "--tp", "--tensor-parallel-size"),
        "drafter": ("--speculative-algorithm", "--speculative-draft-model-path", "--speculative-draft-model",
                    "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                    "--speculative-dflash-block-size"),
        "prefix_caching": ("--disable-radix-cache",),
        "launch": ("--host", "--port", "--model-path", "--model", "--enable-metrics", "--enable-cache-report",
                   "--revision", "--served-model-name"),
    }
    # argparse's prefix matching is on: `--chunked-prefill` would set --chunked-prefill-size
    flag_prefixes = True
    # 0.5.23 logs "Capture target decode CUDA graph begin." (cuda_graph_setup.py); older releases "Capture cuda graph"
    compile_pattern = re.compile(r"Capture .*graph (begin|failed)|Capture cuda graph|Capturing batches|"
                                 r"torch\.compile|Compiling|compile_fx|autotun", re.I)
    title = "SGLang"
    kv_types = KV_TYPES
    info_paths = ("/server_info", "/get_server_info")
    served_name_flag = "--served-model-name"
    self_report_paths = ("/server_info", "/get_server_info")

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        info = next((b for p in self.self_report_paths if isinstance(b := bodies.get(p), dict)), {})
        out: dict[str, Any] = {}
        # The values are resolved ones (server_args.py): `auto` comes back as the dtype it chose.
        for field, knob in REPORTED_FIELDS.items():
            if info.get(field) is not None:
                out[knob] = info[field]
        if isinstance(info.get("disable_radix_cache"), bool):
            out["prefix_caching"] = not info["disable_radix_cache"]
        if "speculative_algorithm" in info:
            out["drafter_active"] = bool(info["speculative_algorithm"])
        # The scheduler may run fewer requests than the flag asked when the KV pool is smaller (model_runner.py).
        states = info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            effective = states[0].get("effective_max_running_requests_per_dp")
            if isinstance(effective, int):
                out["effective_max_running_requests"] = effective
        return out

    def check(self, candidate: "Candidate") -> None:
        self.check_common(candidate)
        drafter = candidate.knobs.drafter
        tree = [drafter.num_steps, drafter.topk, drafter.max_draft_tokens]
        if drafter.kind == "dflash":
            # DFLASH forces one step of top-1 (speculative_hook.py): any other value would be recorded, not run.
            if drafter.num_steps not in (None, 1) or drafter.topk not in (None, 1):
                raise ValueError("knobs.drafter: SGLang's DFLASH always runs num_steps 1 and topk 1 (it overrides "
                                 "other values); set only max_draft_tokens, the block it drafts")
        elif drafter.kind in ("eagle", "eagle3", "mtp", "draft_model") and any(tree) and not all(tree):
            raise ValueError("knobs.drafter: SGLang takes num_steps, topk and max_draft_tokens all three or none")
        elif drafter.topk == 1 and drafter.num_steps and drafter.max_draft_tokens != drafter.num_steps + 1:
            # a chain of top-1 drafts verifies num_steps + 1 tokens whatever was asked (speculative_hook.py)
            raise ValueError(f"knobs.drafter: with topk 1 SGLang verifies num_steps + 1 = {drafter.num_steps + 1} "
                             f"tokens and overrides max_draft_tokens {drafter.max_draft_tokens}; set it to "
                             f"{drafter.num_steps + 1}")
        if candidate.model.path is None and candidate.model.id is None:
            raise ValueError("model: SGLang needs model.path or model.id")
        self.check_extra_args(candidate)

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]:
        knobs = candidate.knobs
        args = ["sglang", "serve", "--model-path", model_path,
                "--host", candidate.launch.host if candidate.launch.mode != "compose" else "0.0.0.0",
                "--port", str(port), "--enable-metrics", "--enable-cache-report"]
        if candidate.model.revision:
            args += ["--revision", candidate.model.revision]
        if candidate.model.served_name:
            args += ["--served-model-name", candidate.model.served_name]
        args += _gpu.knob_args(knobs, {
            "tensor_parallel_size": ("--tp-size",), "chunk_size": ("--chunked-prefill-size",),
            "max_running_requests": ("--max-running-requests",), "context_length": ("--context-length",),
            "kv_dtype": ("--kv-cache-dtype",)})
        if knobs.prefix_caching is False:  # the radix cache is on unless turned off
            args.append("--disable-radix-cache")
        drafter = knobs.drafter
        if drafter.kind != "none":
            args += ["--speculative-algorithm", ALGORITHMS[drafter.kind]]
            if draft_path:
                args += ["--speculative-draft-model-path", draft_path]
            if drafter.num_steps is not None and drafter.kind != "dflash":
                args += ["--speculative-num-steps", str(drafter.num_steps),
                         "--speculative-eagle-topk", str(drafter.topk),
                         "--speculative-num-draft-tokens", str(drafter.max_draft_tokens)]
            elif drafter.max_draft_tokens is not None:
                args += ["--speculative-num-draft-tokens", str(drafter.max_draft_tokens)]
        return args + list(candidate.extra_args)

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        if not after.available:
            return None

        def lazy(name: str) -> float | None:
            return lazy_counter_delta(before, after, name, counting="sglang:prompt_tokens_total")

        return ServerCounts(
            prompt_tokens=lazy("sglang:prompt_tokens_total"),
            cached_tokens=lazy("sglang:cached_tokens_total"),
            generation_tokens=lazy("sglang:generation_tokens_total"),
            verify_passes=lazy("sglang:spec_verify_calls_total"),
        )


register(SGLangAdapter())
