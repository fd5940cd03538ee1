"""SGLang: flags, counters and readiness (engines.md, SGLang 0.5.x).

Counter semantics: `prompt_tokens_total` INCLUDES cached tokens and, like the generation counter,
is added when a request finishes; the server's own warmup request is counted, so the baseline
scrape must come after readiness (servebook scrapes before every cell, long after it).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import _gpu, register
from ._base import ServerCounts
from .counters import counter_delta

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from .counters import Scrape

KV_TYPES = ("auto", "fp8_e4m3", "fp8_e5m2", "bf16", "fp16", "fp4_e2m1")
ALGORITHMS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE",
              "ngram": "NGRAM", "dflash": "DFLASH"}


class SGLangAdapter(_gpu.PythonServerAdapter):
    container_port = 30000
    compile_cache_env = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    process_markers = (b"sglang.launch_server",)

    def local_binary(self, candidate: "Candidate", reporter) -> str:
        import shutil
        import subprocess
        import sys

        python = shutil.which("python3") or sys.executable
        found = subprocess.run([python, "-c", "import importlib.util, sys; "
                                "sys.exit(importlib.util.find_spec('sglang') is None)"], capture_output=True)
        return python if found.returncode == 0 else super().local_binary(candidate, reporter)

    kind = "sglang"
    owned = {
        "chunk_size": ("--chunked-prefill-size",),
        "max_running_requests": ("--max-running-requests",),
        "context_length": ("--context-length",),
        "kv_dtype": ("--kv-cache-dtype",),
        "tensor_parallel_size": ("--tp-size", "--tp", "--tensor-parallel-size"),
        "drafter": ("--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
                    "--speculative-eagle-topk", "--speculative-num-draft-tokens"),
        "launch": ("--host", "--port", "--model-path", "--enable-metrics", "--revision", "--served-model-name"),
    }
    compile_pattern = re.compile(r"Capture cuda graph|torch\.compile|Compiling|compile_fx|autotun", re.I)
    title = "SGLang"
    kv_types = KV_TYPES
    info_paths = ("/server_info", "/get_server_info")
    served_name_flag = "--served-model-name"
    self_report_paths = ("/server_info", "/get_server_info")

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        info = next((b for p in self.self_report_paths if isinstance(b := bodies.get(p), dict)), {})
        out: dict[str, Any] = {}
        for field, knob in (("model_path", "model_file"), ("served_model_name", "served_name"),
                            ("max_running_requests", "max_running_requests"), ("context_length", "context_length"),
                            ("chunked_prefill_size", "chunk_size"), ("tp_size", "tensor_parallel_size"),
                            ("kv_cache_dtype", "kv_dtype")):
            if info.get(field) is not None:
                out[knob] = info[field]
        if "speculative_algorithm" in info:
            out["drafter_active"] = bool(info["speculative_algorithm"])
        return out

    def check(self, candidate: "Candidate") -> None:
        self.check_common(candidate)
        drafter = candidate.knobs.drafter
        tree = [drafter.num_steps, drafter.topk, drafter.max_draft_tokens]
        if drafter.kind in ("eagle", "eagle3", "mtp", "dflash", "draft_model") and any(tree) and not all(tree):
            raise ValueError("knobs.drafter: SGLang takes num_steps, topk and max_draft_tokens all three or none")
        if candidate.model.path is None and candidate.model.id is None:
            raise ValueError("model: SGLang needs model.path or model.id")
        self.check_extra_args(candidate)

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]:
        knobs = candidate.knobs
        args = ["python3", "-m", "sglang.launch_server", "--model-path", model_path,
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
        drafter = knobs.drafter
        if drafter.kind != "none":
            args += ["--speculative-algorithm", ALGORITHMS[drafter.kind]]
            if draft_path:
                args += ["--speculative-draft-model-path", draft_path]
            if drafter.num_steps is not None:
                args += ["--speculative-num-steps", str(drafter.num_steps),
                         "--speculative-eagle-topk", str(drafter.topk),
                         "--speculative-num-draft-tokens", str(drafter.max_draft_tokens)]
            elif drafter.max_draft_tokens is not None:
                args += ["--speculative-num-draft-tokens", str(drafter.max_draft_tokens)]
        return args + list(candidate.extra_args)

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        if not after.available:
            return None

        return ServerCounts(
            prompt_tokens=counter_delta(before, after, "sglang:prompt_tokens_total"),
            cached_tokens=counter_delta(before, after, "sglang:cached_tokens_total"),
            generation_tokens=counter_delta(before, after, "sglang:generation_tokens_total"),
        )


register(SGLangAdapter())
