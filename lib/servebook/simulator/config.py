"""The simulated engine's configuration, read from the real engine's own flags."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field

from .thinking import ReasoningShape, llamacpp_shape, sglang_shape, vllm_shape

FLAVORS = ("llamacpp", "sglang", "vllm")
FAULTS = ("never_ready", "crash_mid_stream", "oom_warmup", "wrong_usage", "null_string_argument", "compile_in_cell",
          # each fails one case of a gate, as a broken chat template or parser would
          "empty_reply", "no_parallel_tool_calls", "wrong_tool", "history_rejected", "lost_needle",
          # greedy output changes when requests share a batch (output equivalence fails)
          "batch_variant",
          # a child process that keeps a core busy for the engine's whole life, as an idle SGLang scheduler polls
          "idle_poll",
          # a server without a tokenizer endpoint (prompts of exact token length cannot be built)
          "no_tokenizer")


#: how often a drafted token is accepted, per method: n-gram lookup guesses prose worse than a trained head
ACCEPTANCE = {"NGRAM": 0.5}
FP8_KV_COST = 0.85


@dataclass
class TimingModel:
    prefill_tok_s: float = 20_000.0
    chunk: int = 2048
    chunk_overhead_s: float = 0.002
    step_base_s: float = 0.004
    step_per_seq_s: float = 0.0015
    slots: int = 4
    draft_tokens: int = 0
    acceptance: float = 0.7
    #: a verify pass costs each running sequence this much more per drafted token (it scores k + 1 positions), and
    #: the step's fixed part a little: a drafter gains at one request and loses at many, as on real GPUs
    verify_cost_per_draft: float = 0.6
    fixed_cost_per_draft: float = 0.05
    #: the per-sequence part of a step with an 8-bit KV cache (half the KV bytes read, the rest unchanged)
    kv_cost: float = 1.0
    #: every duration times this: a planted regression (simulator flag --sim-slowdown, e.g. 1.1 for 10% slower)
    slowdown: float = 1.0
    #: between-launch spread: each launch draws its own speed, lognormal with this CV (--sim-run-noise)
    run_noise: float = 0.0

    def step_seconds(self, running: int, speed: float = 1.0) -> float:
        """One decode step (a verify pass with a drafter) with `running` sequences in the batch."""
        k = self.draft_tokens
        fixed = self.step_base_s * (1 + self.fixed_cost_per_draft * k)
        per_sequence = self.step_per_seq_s * self.kv_cost * (1 + self.verify_cost_per_draft * k)
        return (fixed + per_sequence * max(1, running)) * speed

    def tokens_per_step(self) -> float:
        """Expected tokens a sequence emits per step: the accepted run of drafts (stopping at the first
        rejection, at most k) plus the one the verify pass emits."""
        return sum(self.acceptance ** i for i in range(self.draft_tokens + 1))

    def decode_tok_s(self, concurrency: int) -> float:
        """The model's aggregate decode rate at a closed-loop concurrency (first tokens and prefill aside): the
        truth a configuration search against the simulator is scored by."""
        running = min(concurrency, self.slots)
        return running * self.tokens_per_step() / self.step_seconds(running, self.slowdown)


@dataclass
class SimConfig:
    flavor: str
    host: str
    port: int
    model: str
    timing: TimingModel
    faults: set[str] = field(default_factory=set)
    metrics_enabled: bool = True
    #: the name the API answers to (the engine's --alias / --served-model-name), and further models a router
    #: would also list (--sim-models a,b), so model selection on multi-model endpoints can be tested
    served_name: str | None = None
    extra_models: list[str] = field(default_factory=list)
    context_length: int | None = None
    api_key: str | None = None
    #: every flag the engine was given, as SGLang reports its server args (api_key included, as SGLang does)
    server_args: dict = field(default_factory=dict)
    load_s: float = 0.3
    version: str = "sim"
    #: whether usage carries prompt_tokens_details.cached_tokens (SGLang --enable-cache-report, vLLM
    #: --enable-prompt-tokens-details; llama.cpp always), and whether vLLM sends usage on every chunk unasked
    #: (--enable-force-include-usage)
    cache_report: bool = True
    force_usage: bool = False
    #: whether a prompt's cached prefix is reused (vLLM --no-enable-prefix-caching, SGLang --disable-radix-cache)
    prefix_caching: bool = True
    #: a reasoning model, streamed as the engine does it with its parser or format on (None: it does not think)
    reasoning: ReasoningShape | None = None

    @property
    def name(self) -> str:
        return self.served_name or self.model
    warmup_s: float = 0.2


def parse_engine_argv(flavor: str, argv: list[str], faults: set[str]) -> SimConfig:
    """Read the flags the real engine would get; the ones the simulator models shape its timing."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    # Simulator-only flags (passed through a candidate's extra_args): a planted slowdown and launch-to-launch
    # noise, so the statistics of verdicts can be tested against a known truth.
    parser.add_argument("--sim-slowdown", type=float, default=1.0)
    parser.add_argument("--sim-run-noise", type=float, default=0.0)
    parser.add_argument("--sim-models", default="")
    # the version the engine reports about itself: a planted "new engine release" for the CI gate's tests
    parser.add_argument("--sim-version", default=None)
    parser.add_argument("--api-key", default=None)
    known, _ = parser.parse_known_args(argv)
    timing = TimingModel(slowdown=known.sim_slowdown, run_noise=known.sim_run_noise)
    config = _parse_flavor(flavor, parser, argv, timing, faults)
    config.extra_models = [m for m in known.sim_models.split(",") if m]
    config.api_key = known.api_key
    config.version = known.sim_version or f"sim-{flavor}"
    return config


def _parse_flavor(flavor: str, parser: argparse.ArgumentParser, argv: list[str], timing: TimingModel,
                  faults: set[str]) -> SimConfig:
    if flavor == "llamacpp":
        parser.add_argument("-m", "--model", default="model.gguf")
        parser.add_argument("-np", "--parallel", type=int, default=4)
        parser.add_argument("-ub", "--ubatch-size", type=int, default=512)
        parser.add_argument("--spec-draft-n-max", type=int, default=3)
        parser.add_argument("--spec-type", default="none")
        parser.add_argument("--metrics", action="store_true")
        parser.add_argument("-c", "--ctx-size", type=int, default=4096)
        parser.add_argument("--alias", default=None)
        parser.add_argument("--reasoning-format", default=None)
        parser.add_argument("-rea", "--reasoning", default=None)
        parser.add_argument("--reasoning-effort", default=None)
        parser.add_argument("--reasoning-budget", type=int, default=None)
        args, _ = parser.parse_known_args(argv)
        timing.slots, timing.chunk = args.parallel, args.ubatch_size
        timing.draft_tokens = args.spec_draft_n_max if args.spec_type != "none" else 0
        timing.acceptance = ACCEPTANCE["NGRAM"] if args.spec_type.startswith("ngram") else timing.acceptance
        return SimConfig(flavor, args.host, args.port, args.model, timing, faults, metrics_enabled=args.metrics,
                         served_name=args.alias, context_length=args.ctx_size, server_args=vars(args),
                         reasoning=llamacpp_shape(args.reasoning_format, args.reasoning, args.reasoning_effort,
                                                  args.reasoning_budget))
    if flavor == "sglang":
        parser.add_argument("--model-path", default="model")
        parser.add_argument("--chunked-prefill-size", type=int, default=8192)
        parser.add_argument("--max-running-requests", type=int, default=16)
        parser.add_argument("--speculative-algorithm", default=None)
        parser.add_argument("--speculative-num-draft-tokens", type=int, default=4)
        parser.add_argument("--enable-metrics", action="store_true")
        parser.add_argument("--context-length", type=int, default=None)
        parser.add_argument("--served-model-name", default=None)
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
        parser.add_argument("--kv-cache-dtype", default="auto")
        parser.add_argument("--enable-cache-report", action="store_true")
        parser.add_argument("--disable-radix-cache", action="store_true")
        parser.add_argument("--reasoning-parser", default=None)
        args, _ = parser.parse_known_args(argv)
        timing.slots = args.max_running_requests
        timing.chunk = args.chunked_prefill_size if args.chunked_prefill_size > 0 else 1 << 30
        # SGLang's --speculative-num-draft-tokens counts the verified root: a pass proposes one token fewer
        timing.draft_tokens = max(0, args.speculative_num_draft_tokens - 1) if args.speculative_algorithm else 0
        timing.acceptance = ACCEPTANCE.get(str(args.speculative_algorithm).upper(), timing.acceptance)
        timing.kv_cost = FP8_KV_COST if "fp8" in str(args.kv_cache_dtype) else 1.0
        return SimConfig(flavor, args.host, args.port, args.model_path, timing, faults,
                         metrics_enabled=args.enable_metrics, served_name=args.served_model_name,
                         context_length=args.context_length, server_args=vars(args),
                         cache_report=args.enable_cache_report, prefix_caching=not args.disable_radix_cache,
                         reasoning=sglang_shape(args.reasoning_parser))
    return _parse_vllm(parser, argv, timing, faults)


def _parse_vllm(parser: argparse.ArgumentParser, argv: list[str], timing: TimingModel, faults: set[str]) -> SimConfig:
    parser.add_argument("model", nargs="?", default="model")
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--speculative-config", default=None)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--enable-prompt-tokens-details", action="store_true")
    parser.add_argument("--enable-force-include-usage", action="store_true")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    parser.add_argument("--reasoning-parser", default=None)
    # which vLLM release's reasoning shape to play: the delta field before and after its rename, and whether usage
    # counts reasoning tokens (releases before completion_tokens_details do not)
    parser.add_argument("--sim-reasoning-field", choices=("reasoning", "reasoning_content"), default="reasoning")
    parser.add_argument("--sim-reasoning-usage", choices=("details", "none"), default="details")
    args, _ = parser.parse_known_args([a for a in argv if a not in ("vllm", "serve")])
    timing.slots, timing.chunk = args.max_num_seqs, args.max_num_batched_tokens
    if args.speculative_config:
        spec = json.loads(args.speculative_config)
        timing.draft_tokens = int(spec.get("num_speculative_tokens", 3))
        timing.acceptance = ACCEPTANCE.get(str(spec.get("method", "")).upper(), timing.acceptance)
    timing.kv_cost = FP8_KV_COST if "fp8" in str(args.kv_cache_dtype) else 1.0
    return SimConfig("vllm", args.host, args.port, args.model, timing, faults, served_name=args.served_model_name,
                     context_length=args.max_model_len, server_args=vars(args),
                     cache_report=args.enable_prompt_tokens_details, force_usage=args.enable_force_include_usage,
                     prefix_caching=args.enable_prefix_caching,
                     reasoning=vllm_shape(args.reasoning_parser, args.sim_reasoning_field, args.sim_reasoning_usage))


