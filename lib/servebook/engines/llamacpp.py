"""llama.cpp's llama-server: flags, counters and failure signatures.

Counter semantics (engines.md): `prompt_tokens_total` excludes cached tokens, which have their
own counter; generated tokens are added when a request finishes; the server's own warmup is
not counted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..config.knobs import Drafter, Knobs, Reasoning
from ..util.errors import FailureCause
from ._base import Diagnosis, EngineAdapter, KvLog, ServerCounts, ServerTimings, classify_by_patterns
from .counters import Gauge, counter_delta
from .flags import Flag, Resolved
from .registry import register

if TYPE_CHECKING:
    import httpx

    from ..config.candidate import Candidate
    from .counters import Scrape

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
SPEC_TYPES = {
    "draft_model": "draft-simple",
    "eagle3": "draft-eagle3",
    "mtp": "draft-mtp",
    "dflash": "draft-dflash",
    # ngram-mod by default (knobs.drafter.ngram_type picks another): it drafted and was accepted on the tiny
    # model's repetitive output where ngram-simple, given a shorter draft than its default, drafted nothing
    "ngram": "ngram-mod",
}
#: llama.cpp's n-gram drafters (common/speculative.cpp of the vendored tree), each its own lookup
NgramType = Literal["ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"]



class LlamaCppDrafter(Drafter):
    engine_title: ClassVar[str] = "llama.cpp"
    refusals: ClassVar[dict[str, str]] = {
        key: "knobs.drafter.num_steps/topk are SGLang settings; llama.cpp takes max_draft_tokens"
        for key in ("num_steps", "topk")}

    synthetic_length: int | None = Field(
        None, ge=1, description="llama.cpp benchmarking: accepted run length a random draft is given"
    )
    synthetic_rates: list[float] | None = Field(
        None, description="llama.cpp benchmarking: acceptance probability per draft position"
    )
    ngram_type: NgramType | None = Field(
        None, description="llama.cpp's n-gram drafter (--spec-type) for kind ngram: ngram-mod (the default here), "
                          "ngram-simple, ngram-map-k, ngram-map-k4v or ngram-cache")

    @model_validator(mode="after")
    def _llamacpp_drafter(self) -> "LlamaCppDrafter":
        synthetic = self.synthetic_length or self.synthetic_rates
        if self.kind == "none" and synthetic:
            raise ValueError("drafter.kind=none takes no other drafter settings")
        for rate in self.synthetic_rates or []:
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"drafter.synthetic_rates must lie in [0, 1], got {rate}")
        if self.kind == "eagle":
            raise ValueError("knobs.drafter.kind: llama.cpp speaks eagle3, not eagle (use kind: eagle3)")
        if self.kind == "ngram" and synthetic:
            raise ValueError("knobs.drafter.synthetic_*: synthetic acceptance needs a draft model")
        if self.ngram_type and self.kind != "ngram":
            raise ValueError("knobs.drafter.ngram_type picks llama.cpp's n-gram drafter: it needs kind ngram")
        if self.ngram_type not in (None, "ngram-mod") and self.max_draft_tokens is not None:
            # 0.3.36: --spec-ngram-simple-size-m 8 drafted nothing on Gemma 3 270M's looping prose, where the
            # default (a 12-token key, 48-token drafts) drafted 70 tokens and had all 70 accepted
            raise ValueError(f"knobs.drafter.max_draft_tokens: llama.cpp's {self.ngram_type} drafts m-grams of its own "
                             "length (48 tokens by default; a shorter one drafted nothing in 0.3.36); leave it unset")
        return self


class LlamaCppReasoning(Reasoning):
    """llama-server's reasoning flags (common/arg.cpp of the vendored llama.cpp): --reasoning on|off,
    --reasoning-effort, --reasoning-format, --reasoning-budget. All are server flags, so every chat request of the
    run is served alike; llama.cpp finds the model's thinking syntax from its chat template itself."""

    engine_title: ClassVar[str] = "llama.cpp"
    refusals: ClassVar[dict[str, str]] = {
        "parser": "knobs.reasoning.parser: llama.cpp reads the reasoning syntax from the chat template and has no "
                  "parser to name; set knobs.reasoning.format (--reasoning-format) instead"}

    format: Literal["auto", "none", "deepseek", "deepseek-legacy"] | None = Field(
        None, description="llama.cpp: where thinking goes (--reasoning-format): deepseek puts it in reasoning_content, "
                          "none leaves it in the answer's text, auto (its default) decides from the template")
    budget: int | None = Field(None, ge=-1, description="llama.cpp: the most tokens a model may think "
                                                        "(--reasoning-budget; -1 unlimited, 0 ends thinking at once)")

    @model_validator(mode="after")
    def _llamacpp_reasoning(self) -> "LlamaCppReasoning":
        if self.mode == "off" and self.budget not in (None, 0):
            raise ValueError("knobs.reasoning.budget: with mode off the model does not think; leave budget unset")
        return self


class LlamaCppKnobs(Knobs):
    """llama-server's knobs: the shared ones, with its own KV types and slot arithmetic, and two of its own."""

    engine_title: ClassVar[str] = "llama.cpp"
    kv_types: ClassVar[tuple[str, ...]] = KV_TYPES
    refusals: ClassVar[dict[str, str]] = {
        "prefix_caching": "knobs.prefix_caching: llama.cpp keeps each slot's last prompt and has no server flag for "
                          "it (prompt_cache_mib sets the host-memory cache); leave it unset"}

    drafter: LlamaCppDrafter = LlamaCppDrafter()
    reasoning: LlamaCppReasoning | None = None
    gpu_layers: int | None = Field(None, ge=0, description="llama.cpp: layers offloaded to the GPU (-ngl); every "
                                                             "layer on a CUDA build when unset, none on a CPU build")
    prompt_cache_mib: int | None = Field(
        None, ge=-1, description="llama.cpp: the host-memory prompt cache (--cache-ram, MiB; -1 unlimited). 0 turns it "
                                 "off: saving the previous request's KV state to host memory before a new prompt "
                                 "starts made cold prefill depend on which request came before (150-200 ms at 8K on "
                                 "an H200)")

    @model_validator(mode="after")
    def _llamacpp_knobs(self) -> "LlamaCppKnobs":
        if self.tensor_parallel_size != 1:
            raise ValueError(
                "knobs.tensor_parallel_size: llama.cpp has no tensor parallelism in servebook's "
                "sense; keep it at 1 (split layers with extra_args ['--split-mode', 'layer'] instead)"
            )
        if self.kv_dtype is not None and self.kv_dtype not in KV_TYPES:
            raise ValueError(f"knobs.kv_dtype: llama.cpp accepts {', '.join(KV_TYPES)}, not {self.kv_dtype!r}")
        if (
            self.context_length is not None
            and self.max_running_requests is not None
            and self.context_length // self.max_running_requests < 256
        ):
            raise ValueError(
                f"knobs.context_length: {self.context_length} tokens shared by "
                f"{self.max_running_requests} slots leaves under 256 tokens per request"
            )
        return self


def _gpu_layers(value: int | None, resolved: Resolved) -> list[str]:
    if value is not None:
        return ["-ngl", str(value)]
    return ["-ngl", "999"] if resolved.backend == "cuda" else []  # every layer: what a CUDA build is for


def _drafter(drafter: LlamaCppDrafter, resolved: Resolved) -> list[str]:
    if drafter.kind == "none":
        return []
    spec_type = drafter.ngram_type or SPEC_TYPES[drafter.kind]
    args = ["--spec-type", spec_type]
    if resolved.draft_path:
        args += ["-md", resolved.draft_path]
    n = drafter.max_draft_tokens
    if n is not None and spec_type == "ngram-mod":
        args += ["--spec-ngram-mod-n-max", str(n), "--spec-ngram-mod-n-min", str(max(1, 3 * n // 4))]
    elif drafter.max_draft_tokens is not None:
        args += ["--spec-draft-n-max", str(drafter.max_draft_tokens)]
    if drafter.synthetic_length is not None:
        args += ["--spec-synth-len", str(drafter.synthetic_length)]
    if drafter.synthetic_rates:
        args += ["--spec-synth-rates", ",".join(f"{r:g}" for r in drafter.synthetic_rates)]
    return args


def _reasoning(reasoning: LlamaCppReasoning | None, resolved: Resolved) -> list[str]:
    if reasoning is None:
        return []
    args = ["--reasoning", reasoning.mode] if reasoning.mode else []
    for flag, value in (("--reasoning-effort", reasoning.effort), ("--reasoning-format", reasoning.format),
                        ("--reasoning-budget", reasoning.budget)):
        if value is not None:
            args += [flag, str(value)]
    return args


#: candidate field -> its flags, in command-line order; `also`: every other spelling llama-server reads the same
FLAGS = {
    "knobs.gpu_layers": Flag(("-ngl",), also=("--gpu-layers", "--n-gpu-layers"), render=_gpu_layers),
    "model.served_name": Flag(("--alias",)),
    "knobs.context_length": Flag(("-c",), also=("--ctx-size",)),
    "knobs.max_running_requests": Flag(("-np",), also=("--parallel",)),
    # The logical batch must hold the physical one; one knob moves both.
    "knobs.chunk_size": Flag(("-b", "-ub"), also=("--batch-size", "--ubatch-size")),
    "knobs.kv_dtype": Flag(("-ctk", "-ctv"), also=("--cache-type-k", "--cache-type-v")),
    "knobs.prompt_cache_mib": Flag(("--cache-ram",), also=("-cram",)),
    "knobs.drafter": Flag(also=("--spec-type", "-md", "--model-draft", "--spec-draft-model", "--spec-draft-n-max",
                                "--spec-synth-len", "--spec-synth-rates", "--spec-ngram-mod-n-max",
                                "--spec-ngram-mod-n-min"), render=_drafter),
    "knobs.reasoning": Flag(("--reasoning", "--reasoning-effort", "--reasoning-format", "--reasoning-budget"),
                            also=("-rea",), render=_reasoning, yields=True),
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
    knobs_model = LlamaCppKnobs
    flags = FLAGS
    launch_flags = ("--host", "--port", "-m", "--model", "--metrics", "-lv", "--verbosity", "--log-verbosity")
    model_file_flags = ("-m", "--model")
    info_paths = ("/props",)
    served_name_flag = "--alias"
    self_report_paths = ("/props", "/slots")
    # the server llama-cpp-python 0.3.36 vendors exports no KV usage (tools/server/server-task.cpp); older builds
    # had kv_cache_usage_ratio, read where it is there. llama.cpp never preempts a running request.
    gauges = (Gauge("kv_usage", ("llamacpp:kv_cache_usage_ratio",), across="max"),
              Gauge("running", ("llamacpp:requests_processing",)),
              Gauge("waiting", ("llamacpp:requests_deferred",)))

    def reported_settings(self, bodies: dict[str, Any]) -> dict[str, Any]:
        found = bodies.get("/props")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
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
        knobs = candidate.knobs
        return install is not None and install.backend == "cuda" and not (
            isinstance(knobs, LlamaCppKnobs) and knobs.gpu_layers == 0)

    def local_binary(self, candidate: "Candidate", reporter: Any) -> str:
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

    def backend(self) -> str | None:
        from .llamacpp_build import find_llamacpp

        install = find_llamacpp()
        return install.backend if install is not None else None

    def fixed_args(self, candidate: "Candidate", *, port: int, model_path: str, binary: str | None) -> list[str]:
        # -lv 4 makes the log carry the KV cache allocation, which the memory arithmetic is checked against.
        return [binary or "llama-server", "-m", model_path, "--host", candidate.launch.host, "--port", str(port),
                "--metrics", "-lv", "4"]

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

    async def tokenize(self, http: "httpx.AsyncClient", base_url: str, text: str, model: str,
                       headers: dict[str, str]) -> list[int] | None:
        response = await http.post(f"{base_url}/tokenize", json={"content": text, "add_special": False},
                                   headers=headers)
        response.raise_for_status()
        return response.json()["tokens"]

    async def render_chat(self, http: "httpx.AsyncClient", base_url: str, body: dict[str, Any],
                          headers: dict[str, str]) -> list[int] | None:
        # the chat endpoint's own path: its template applied to messages and tools, then tokenized with special
        # tokens parsed and added; a server without these endpoints (the simulator) renders nothing
        rendered = await http.post(f"{base_url}/apply-template", json=body, headers=headers)
        if rendered.status_code != 200:
            return None
        tokens = await http.post(f"{base_url}/tokenize", json={"content": rendered.json()["prompt"],
                                                               "add_special": True, "parse_special": True},
                                 headers=headers)
        return tokens.json()["tokens"] if tokens.status_code == 200 else None

    context_note = " shared by max_running_requests slots"

    def context_matches(self, claimed: int, settings: dict[str, Any], slots: int | None) -> bool | None:
        per_slot = settings.get("context_per_slot")
        if "context_length" in settings or per_slot is None:
            return super().context_matches(claimed, settings, slots)
        # llama.cpp splits the context over its slots, padded to 256 tokens each, or gives each all of it (unified KV).
        n = slots or settings.get("max_running_requests") or 1
        return abs(per_slot * n - claimed) <= 256 * n or abs(per_slot - claimed) <= 256

    def server_timings(self, extra: dict[str, Any] | None) -> ServerTimings | None:
        # llama-server adds its own per-request timings to the last chunk
        timings = (extra or {}).get("timings")
        if not isinstance(timings, dict):
            return None
        return ServerTimings(timings.get("prompt_ms"), timings.get("predicted_per_second"), timings.get("draft_n"),
                             timings.get("draft_n_accepted"))

    def context_per_request(self, candidate: "Candidate") -> int | None:
        knobs = candidate.knobs
        if knobs.context_length is None or knobs.max_running_requests is None:
            return None
        unified, per_slot_cap = kv_unified(candidate.extra_args, candidate.launch.env)
        if unified:  # one pool for every slot: a request may fill all of it (llama-context.cpp, n_ctx_seq = n_ctx)
            return min(knobs.context_length, per_slot_cap or knobs.context_length)
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


def kv_unified(args: list[str], env: dict[str, str]) -> tuple[bool, int | None]:
    """Whether llama-server shares one KV pool across its slots (-kvu; off by default when the slot count is given,
    as servebook always gives it), and the per-slot limit --kv-unified-per-slot sets on it; the last flag wins, as
    in llama.cpp's own argument parser, which reads the environment first."""
    unified = env.get("LLAMA_ARG_KV_UNIFIED", "").lower() in {"1", "true", "on", "enabled"}
    cap = int(env["LLAMA_ARG_KV_UNIFIED_PER_SLOT"]) if env.get("LLAMA_ARG_KV_UNIFIED_PER_SLOT", "").isdigit() else None
    for i, arg in enumerate(args):
        if arg in {"-kvu", "--kv-unified"}:
            unified = True
        elif arg in {"-no-kvu", "--no-kv-unified"}:
            unified = False
        elif arg == "--kv-unified-per-slot" and i + 1 < len(args) and args[i + 1].isdigit():
            cap = int(args[i + 1])
    return unified, cap or None
