"""llama.cpp's llama-server: flags, counters and failure signatures.

Counter semantics (engines.md): `prompt_tokens_total` excludes cached tokens, which have their
own counter; generated tokens are added when a request finishes; the server's own warmup is
not counted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..util.errors import FailureCause
from . import register
from ._base import Diagnosis, EngineAdapter, KvLog, ServerCounts, classify_by_patterns
from .counters import counter_delta

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from .counters import Scrape

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
SPEC_TYPES = {
    "draft_model": "draft-simple",
    "eagle3": "draft-eagle3",
    "mtp": "draft-mtp",
    "dflash": "draft-dflash",
    # ngram-mod, not ngram-simple: in this build ngram-simple drafted nothing even on a
    # perfectly repetitive output, while ngram-mod drafted and was accepted (see engines.md).
    "ngram": "ngram-mod",
}

# Each entry: all spellings of one flag. Used to refuse extra_args that fight a knob.
_OWNED = {
    "chunk_size": ("-b", "--batch-size", "-ub", "--ubatch-size"),
    "max_running_requests": ("-np", "--parallel"),
    "context_length": ("-c", "--ctx-size"),
    "gpu_layers": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "prompt_cache_mib": ("-cram", "--cache-ram"),
    "kv_dtype": ("-ctk", "--cache-type-k", "-ctv", "--cache-type-v"),
    "drafter": ("--spec-type", "-md", "--model-draft", "--spec-draft-model", "--spec-draft-n-max", "--spec-synth-len",
                "--spec-synth-rates",
                "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-min"),
    "launch": ("--host", "--port", "-m", "--model", "--metrics", "--alias", "-lv", "--verbosity", "--log-verbosity"),
}

_FAILURE_PATTERNS: list[tuple[FailureCause, re.Pattern[str]]] = [
    ("port_in_use", re.compile(r"couldn't bind|address already in use|failed to bind", re.I)),
    ("bad_flag", re.compile(r"invalid argument|unknown argument|error while handling argument|"
                            r"has been removed|argument .* is not|unrecognized", re.I)),
    ("out_of_memory", re.compile(r"out of memory|failed to allocate|cudaMalloc failed|"
                                 r"unable to allocate|std::bad_alloc|insufficient memory", re.I)),
    ("model_load", re.compile(r"failed to load model|error loading model|no such file|"
                              r"failed to open|gguf_init_from_file|failed to initialize|"
                              r"draft model is not", re.I)),
]


_ERROR_LEVEL = re.compile(r"^\s*[\d.]+\s+E\s")
_KV_SIZE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*\d+ layers,\s*(\d+)/\d+ seqs\),"
                      r" K \((\w+)\)")


class LlamaCppAdapter(EngineAdapter):
    kind = "llamacpp"
    owned = _OWNED
    info_paths = ("/props",)
    served_name_flag = "--alias"
    self_report_paths = ("/props", "/slots")

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        props = bodies.get("/props") if isinstance(bodies.get("/props"), dict) else {}
        out: dict[str, Any] = {}
        if isinstance(props.get("total_slots"), int):
            out["max_running_requests"] = props["total_slots"]
        if props.get("model_path"):
            out["model_file"] = props["model_path"]
        if props.get("model_alias"):
            out["served_name"] = props["model_alias"]
        per_slot = (props.get("default_generation_settings") or {}).get("n_ctx")
        if isinstance(per_slot, int):
            out["context_per_slot"] = per_slot  # the total split over slots, or all of it when the KV is unified
        slots = bodies.get("/slots")
        if isinstance(slots, list) and slots and all(isinstance(s, dict) and "speculative" in s for s in slots):
            out["drafter_active"] = any(bool(s["speculative"]) for s in slots)
        return out
    container_port = 8080
    process_markers = (b"llama-server",)
    fingerprints_binary = True

    def build_fingerprint(self, candidate: "Candidate") -> dict:
        from .llamacpp_build import find_llamacpp

        install = find_llamacpp()
        if install is None:
            return {}
        flags = install.info.get("cmake_flags") or []
        cuda = next((f.split("=", 1)[1] for f in flags if f.startswith("-DCMAKE_CUDA_ARCHITECTURES=")), None)
        return {"engine_backend": install.backend, "engine_cuda_architectures": cuda}

    def uses_gpus(self, candidate: "Candidate") -> bool:
        from .llamacpp_build import find_llamacpp

        install = find_llamacpp()
        return install is not None and install.backend == "cuda" and candidate.knobs.gpu_layers != 0

    def local_binary(self, candidate: "Candidate", reporter) -> str:
        import os

        from ..config.errors import InputError
        from .llamacpp_build import find_llamacpp, install_llamacpp

        install = find_llamacpp()
        if install is None:
            reporter.log("llama-server is not built yet: building it once (cached for later runs)")
            install = install_llamacpp(reporter=reporter)
        if not os.access(install.server, os.X_OK):
            raise InputError(f"{install.server} is not executable; run `servebook engine install llamacpp --force`")
        if candidate.model.path is None:
            raise InputError("model.path: llama.cpp serves a local GGUF file; model.id alone cannot be launched")
        return str(install.server)

    def check(self, candidate: "Candidate") -> None:
        knobs = candidate.knobs
        if knobs.tensor_parallel_size != 1:
            raise ValueError(
                "knobs.tensor_parallel_size: llama.cpp has no tensor parallelism in servebook's "
                "sense; keep it at 1 (split layers with extra_args ['--split-mode', 'layer'] instead)"
            )
        if knobs.kv_dtype is not None and knobs.kv_dtype not in KV_TYPES:
            raise ValueError(f"knobs.kv_dtype: llama.cpp accepts {', '.join(KV_TYPES)}, not {knobs.kv_dtype!r}")
        drafter = knobs.drafter
        if drafter.kind == "eagle":
            raise ValueError("knobs.drafter.kind: llama.cpp speaks eagle3, not eagle (use kind: eagle3)")
        if drafter.kind == "none" or drafter.kind == "ngram":
            if drafter.synthetic_length or drafter.synthetic_rates:
                raise ValueError("knobs.drafter.synthetic_*: synthetic acceptance needs a draft model")
        if (
            knobs.context_length is not None
            and knobs.max_running_requests is not None
            and knobs.context_length // knobs.max_running_requests < 256
        ):
            raise ValueError(
                f"knobs.context_length: {knobs.context_length} tokens shared by "
                f"{knobs.max_running_requests} slots leaves under 256 tokens per request"
            )
        if drafter.num_steps or drafter.topk:
            raise ValueError("knobs.drafter.num_steps/topk are SGLang settings; llama.cpp takes max_draft_tokens")
        if knobs.prefix_caching is not None:
            raise ValueError("knobs.prefix_caching: llama.cpp keeps each slot's last prompt and has no server flag for "
                             "it (prompt_cache_mib sets the host-memory cache); leave it unset")
        self.check_extra_args(candidate)

    def backend(self) -> str | None:
        from .llamacpp_build import find_llamacpp

        install = find_llamacpp()
        return install.backend if install is not None else None

    def argv(self, candidate: "Candidate", *, port: int, model_path: str, draft_path: str | None,
             binary: str | None = None, backend: str | None = None) -> list[str]:
        binary = binary or "llama-server"
        knobs = candidate.knobs
        # -lv 4 makes the log carry the KV cache allocation, which the memory arithmetic is checked against.
        args = [binary, "-m", model_path, "--host", candidate.launch.host, "--port", str(port), "--metrics",
                "-lv", "4"]
        if knobs.gpu_layers is not None:
            args += ["-ngl", str(knobs.gpu_layers)]
        elif backend == "cuda":
            args += ["-ngl", "999"]  # every layer: what a CUDA build is for
        if candidate.model.served_name:
            args += ["--alias", candidate.model.served_name]
        if knobs.context_length is not None:
            args += ["-c", str(knobs.context_length)]
        if knobs.max_running_requests is not None:
            args += ["-np", str(knobs.max_running_requests)]
        if knobs.chunk_size is not None:
            # The logical batch must hold the physical one; one knob moves both.
            args += ["-b", str(knobs.chunk_size), "-ub", str(knobs.chunk_size)]
        if knobs.kv_dtype is not None:
            args += ["-ctk", knobs.kv_dtype, "-ctv", knobs.kv_dtype]
        if knobs.prompt_cache_mib is not None:
            args += ["--cache-ram", str(knobs.prompt_cache_mib)]
        drafter = knobs.drafter
        if drafter.kind != "none":
            args += ["--spec-type", SPEC_TYPES[drafter.kind]]
            if draft_path:
                args += ["-md", draft_path]
            if drafter.max_draft_tokens is not None and drafter.kind == "ngram":
                n = drafter.max_draft_tokens
                args += ["--spec-ngram-mod-n-max", str(n), "--spec-ngram-mod-n-min", str(max(1, 3 * n // 4))]
            elif drafter.max_draft_tokens is not None:
                args += ["--spec-draft-n-max", str(drafter.max_draft_tokens)]
            if drafter.synthetic_length is not None:
                args += ["--spec-synth-len", str(drafter.synthetic_length)]
            if drafter.synthetic_rates:
                args += ["--spec-synth-rates", ",".join(f"{r:g}" for r in drafter.synthetic_rates)]
        return args + list(candidate.extra_args)

    def server_counts(self, before: "Scrape", after: "Scrape") -> ServerCounts | None:
        if not after.available:
            return None

        def delta(name: str) -> float | None:
            return counter_delta(before, after, name)

        uncached = delta("llamacpp:prompt_tokens_total")
        cached = delta("llamacpp:prompt_tokens_cached_total")
        prompt = None if uncached is None else uncached + (cached or 0.0)
        return ServerCounts(
            prompt_tokens=prompt,
            cached_tokens=cached,
            generation_tokens=delta("llamacpp:tokens_predicted_total"),
            draft_tokens=delta("llamacpp:spec_decode_num_draft_tokens_total"),
            accepted_tokens=delta("llamacpp:spec_decode_num_accepted_tokens_total"),
        )

    def request_extras(self, output_tokens: int) -> dict:
        # llama-server silently ignores min_tokens; ignore_eos + max_tokens is what forces the length.
        return {"ignore_eos": True}

    async def tokenize(self, http, base_url: str, text: str, model: str, headers: dict) -> list[int] | None:
        response = await http.post(f"{base_url}/tokenize", json={"content": text, "add_special": False},
                                   headers=headers)
        response.raise_for_status()
        return response.json()["tokens"]

    context_note = " shared by max_running_requests slots"

    def context_per_request(self, candidate: "Candidate") -> int | None:
        knobs = candidate.knobs
        if knobs.context_length is None or knobs.max_running_requests is None:
            return None
        return knobs.context_length // knobs.max_running_requests

    def logged_kv_cache(self, log_text: str) -> KvLog | None:
        # "llama_kv_cache: size = 8.00 MiB ( 2048 cells, 4 layers, 2/2 seqs), K (f16): 4.00 MiB, V (f16): ..."
        # The cells are per stream; without a unified KV each sequence has its own stream.
        found = _KV_SIZE.findall(log_text)
        if not found:
            return None
        mib, cells, streams, k_type = found[0]
        return KvLog(int(cells) * int(streams), float(mib) * 2**20, k_type)

    def error_lines(self, log_text: str) -> list[str]:
        # llama.cpp prefixes every log line with its level: "0.00.916.810 E srv ..."
        return [line.strip() for line in log_text.splitlines() if _ERROR_LEVEL.match(line)]

    def classify_failure(self, log_tail: str, exit_code: int | None) -> Diagnosis:
        return classify_by_patterns(_FAILURE_PATTERNS, log_tail, exit_code)


register(LlamaCppAdapter())
