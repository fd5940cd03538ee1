"""A simulated engine: the API shapes of llama.cpp, SGLang and vLLM, and their faults, on a CPU.

This is a test double. It lets servebook's GPU-engine paths (flags, readiness, counter
semantics, failure classification) run where no GPU exists, and it injects the faults a real
qualification must catch. Its numbers come from a timing model, never from a model: runs made
with it carry `simulator` in their candidate identity and are never the demo.

Usage (the engine's own argv after `--`, which configures the timing model):

    python -m servebook.simulator --flavor sglang [--fault crash_mid_stream] -- \\
        python3 -m sglang.launch_server --port 30000 --max-running-requests 4 ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import sys
import time
import uuid
import zlib
from dataclasses import dataclass, field

FLAVORS = ("llamacpp", "sglang", "vllm")
FAULTS = ("never_ready", "crash_mid_stream", "oom_warmup", "wrong_usage", "null_string_argument", "compile_in_cell")
SYSTEM_PROMPT = "You are a helpful assistant. Answer the user."
_WORD = re.compile(r"\w+|[^\w\s]")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def tokenize(text: str) -> list[int]:
    """A stable word-level tokenizer: the same text always gives the same ids."""
    return [100 + zlib.crc32(w.encode()) % 50_000 for w in _WORD.findall(text)]


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


@dataclass
class SimConfig:
    flavor: str
    host: str
    port: int
    model: str
    timing: TimingModel
    faults: set[str] = field(default_factory=set)
    metrics_enabled: bool = True
    load_s: float = 0.3
    warmup_s: float = 0.2


def parse_engine_argv(flavor: str, argv: list[str], faults: set[str]) -> SimConfig:
    """Read the flags the real engine would get; the ones the simulator models shape its timing."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    timing = TimingModel()
    if flavor == "llamacpp":
        parser.add_argument("-m", "--model", default="model.gguf")
        parser.add_argument("-np", "--parallel", type=int, default=4)
        parser.add_argument("-ub", "--ubatch-size", type=int, default=512)
        parser.add_argument("--spec-draft-n-max", type=int, default=3)
        parser.add_argument("--spec-type", default="none")
        parser.add_argument("--metrics", action="store_true")
        args, _ = parser.parse_known_args(argv)
        timing.slots, timing.chunk = args.parallel, args.ubatch_size
        timing.draft_tokens = args.spec_draft_n_max if args.spec_type != "none" else 0
        return SimConfig(flavor, args.host, args.port, args.model, timing, faults, metrics_enabled=args.metrics)
    if flavor == "sglang":
        parser.add_argument("--model-path", default="model")
        parser.add_argument("--chunked-prefill-size", type=int, default=8192)
        parser.add_argument("--max-running-requests", type=int, default=16)
        parser.add_argument("--speculative-algorithm", default=None)
        parser.add_argument("--speculative-num-draft-tokens", type=int, default=4)
        parser.add_argument("--enable-metrics", action="store_true")
        args, _ = parser.parse_known_args(argv)
        timing.slots = args.max_running_requests
        timing.chunk = args.chunked_prefill_size if args.chunked_prefill_size > 0 else 1 << 30
        timing.draft_tokens = args.speculative_num_draft_tokens if args.speculative_algorithm else 0
        return SimConfig(flavor, args.host, args.port, args.model_path, timing, faults,
                         metrics_enabled=args.enable_metrics)
    parser.add_argument("model", nargs="?", default="model")
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--speculative-config", default=None)
    args, _ = parser.parse_known_args([a for a in argv if a not in ("vllm", "serve")])
    timing.slots, timing.chunk = args.max_num_seqs, args.max_num_batched_tokens
    if args.speculative_config:
        timing.draft_tokens = int(json.loads(args.speculative_config).get("num_speculative_tokens", 3))
    return SimConfig(flavor, args.host, args.port, args.model, timing, faults)


class Counters:
    """The engine's Prometheus counters, named and counted the way that engine counts them."""

    def __init__(self, config: SimConfig):
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.flavor = config.flavor
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"] if config.flavor == "vllm" else []
        self.labels = {"model_name": config.model, "engine": "0"} if labels else {}
        prefix = {"llamacpp": "llamacpp:", "sglang": "sglang:", "vllm": "vllm:"}[config.flavor]

        def counter(name, doc, extra=()):
            return Counter(prefix + name, doc, [*labels, *extra], registry=self.registry)

        def gauge(name, doc):
            return Gauge(prefix + name, doc, labels, registry=self.registry)

        if config.flavor == "llamacpp":
            self.prompt = counter("prompt_tokens", "Number of prompt tokens processed, excluding cached tokens")
            self.cached = counter("prompt_tokens_cached", "Number of prompt tokens reused from the cache")
            self.generated = counter("tokens_predicted", "Number of generation tokens processed")
            self.running = gauge("requests_processing", "Number of requests processing")
            self.waiting = gauge("requests_deferred", "Number of requests deferred")
            self.drafted = counter("spec_decode_num_draft_tokens", "Speculative: total draft tokens")
            self.accepted = counter("spec_decode_num_accepted_tokens", "Speculative: accepted draft tokens")
        elif config.flavor == "sglang":
            self.prompt = counter("prompt_tokens", "Number of prefill tokens processed")
            self.cached = counter("cached_tokens", "Number of cached prompt tokens")
            self.generated = counter("generation_tokens", "Number of generation tokens processed")
            self.requests = counter("num_requests", "Number of requests processed")
            self.running = gauge("num_running_reqs", "The number of running requests")
            self.waiting = gauge("num_queue_reqs", "The number of requests in the waiting queue")
            self.drafted = self.accepted = None
            self.verify = counter("spec_verify_calls", "Speculative verify calls")
        else:
            self.prompt = counter("prompt_tokens", "Number of prefill tokens processed")
            self.cached = counter("prompt_tokens_cached", "Number of cached prompt tokens")
            self.generated = counter("generation_tokens", "Number of generation tokens processed")
            self.success = counter("request_success", "Count of successfully processed requests", ["finished_reason"])
            self.running = gauge("num_requests_running", "Number of requests in model execution batches")
            self.waiting = gauge("num_requests_waiting", "Number of requests waiting to be processed")
            self.kv = gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage")
            self.drafted = counter("spec_decode_num_draft_tokens", "Number of draft tokens")
            self.accepted = counter("spec_decode_num_accepted_tokens", "Number of accepted tokens")

    def _of(self, metric, **extra):
        return metric.labels(**self.labels, **extra) if (self.labels or extra) else metric

    def inc(self, metric, amount: float = 1, **extra) -> None:
        if metric is not None and amount:
            self._of(metric, **extra).inc(amount)

    def set(self, metric, value: float) -> None:
        self._of(metric).set(value)

    def render(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()


class Engine:
    def __init__(self, config: SimConfig):
        self.config = config
        self.counters = Counters(config)
        self.slots = asyncio.Semaphore(config.timing.slots)
        self.running = 0
        self.waiting = 0
        self.ready = False
        self.history: list[tuple[int, ...]] = []
        self.measured_tokens = 0
        self.measured_requests = 0
        self.rng = random.Random(config.port)

    def cached_prefix(self, tokens: list[int]) -> int:
        best = 0
        for previous in self.history:
            n = 0
            for a, b in zip(previous, tokens):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self.history = (self.history + [tuple(tokens)])[-64:]
        return min(best, len(tokens) - 1)

    def prefill_seconds(self, uncached: int) -> float:
        timing = self.config.timing
        return uncached / timing.prefill_tok_s + math.ceil(uncached / timing.chunk) * timing.chunk_overhead_s

    def step_seconds(self) -> float:
        timing = self.config.timing
        spec = 1 + 0.15 * timing.draft_tokens if timing.draft_tokens else 1
        return (timing.step_base_s + timing.step_per_seq_s * max(1, self.running)) * spec

    def tokens_this_step(self) -> tuple[int, int]:
        """(tokens emitted, drafted) for one decode step; a drafter emits runs of accepted tokens."""
        k = self.config.timing.draft_tokens
        if not k:
            return 1, 0
        accepted = 0
        while accepted < k and self.rng.random() < self.config.timing.acceptance:
            accepted += 1
        return accepted + 1, k

    async def generate(self, prompt_tokens: list[int], max_tokens: int, ignore_eos: bool, min_tokens: int):
        """Yields (tokens in chunk) as the engine would stream them, honouring slots and timing."""
        c, flavor = self.counters, self.config.flavor
        self.waiting += 1
        c.set(c.waiting, self.waiting)
        async with self.slots:
            self.waiting -= 1
            self.running += 1
            c.set(c.waiting, self.waiting)
            c.set(c.running, self.running)
            try:
                cached = self.cached_prefix(prompt_tokens)
                await asyncio.sleep(self.prefill_seconds(len(prompt_tokens) - cached))
                if flavor == "llamacpp":
                    c.inc(c.prompt, len(prompt_tokens) - cached)
                    c.inc(c.cached, cached)
                if flavor == "vllm":  # counted at the first token, cached included
                    c.inc(c.prompt, len(prompt_tokens))
                    c.inc(c.cached, cached)
                stop_at = max_tokens
                if not ignore_eos:
                    stop_at = max(min_tokens, min(max_tokens, self.rng.randint(1, max_tokens)))
                produced, first = 0, True
                while produced < stop_at:
                    if not first:
                        await asyncio.sleep(self.step_seconds())
                    n, drafted = self.tokens_this_step() if not first else (1, 0)
                    n = min(n, stop_at - produced)
                    produced += n
                    first = False
                    if flavor == "vllm":
                        c.inc(c.generated, n)
                    c.inc(c.drafted, drafted)
                    c.inc(c.accepted, max(0, n - 1) if drafted else 0)
                    yield n, cached
                finish = "length" if produced >= max_tokens else "stop"
                if flavor == "llamacpp":
                    c.inc(c.generated, produced)
                elif flavor == "sglang":  # prompt, cached and generated all land at request end
                    c.inc(c.prompt, len(prompt_tokens))
                    c.inc(c.cached, cached)
                    c.inc(c.generated, produced)
                    c.inc(c.requests, 1)
                else:
                    c.inc(c.success, 1, finished_reason=finish)
            finally:
                self.running -= 1
                c.set(c.running, self.running)


def build_app(engine: Engine):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
    from starlette.routing import Route

    config = engine.config
    words = ["alpha", " beta", " gamma", " delta", " epsilon", " zeta", " eta", " theta"]

    def not_ready():
        if config.flavor == "llamacpp":
            return JSONResponse({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, 503)
        return JSONResponse({"error": "server is warming up"}, 503)

    async def health(request: Request):
        return JSONResponse({"status": "ok"}) if engine.ready else not_ready()

    async def metrics(request: Request):
        if not engine.ready and config.flavor == "llamacpp":
            return not_ready()
        if not config.metrics_enabled:
            return PlainTextResponse("metrics are disabled", 501)
        return PlainTextResponse(engine.counters.render(), media_type="text/plain; version=0.0.4")

    async def models(request: Request):
        if not engine.ready:
            return not_ready()
        return JSONResponse({"object": "list", "data": [{"id": config.model, "object": "model", "owned_by": "sim"}]})

    async def tokenize_endpoint(request: Request):
        body = await request.json()
        text = body.get("content", body.get("prompt", ""))
        tokens = tokenize(text)
        return JSONResponse({"tokens": tokens, "count": len(tokens)})

    async def info(request: Request):
        return JSONResponse({"version": f"sim-{config.flavor}", "simulator": True,
                             "max_running_requests": config.timing.slots, "chunk": config.timing.chunk})

    def prompt_of(body: dict, chat: bool) -> list[int]:
        if chat:
            text = SYSTEM_PROMPT + "".join(f"\n<{m.get('role')}>\n{m.get('content') or ''}" for m in body["messages"])
            return tokenize(text + "\n<assistant>\n")
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        return tokenize(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))

    async def complete(request: Request, chat: bool):
        if not engine.ready:
            return not_ready()
        body = await request.json()
        prompt = prompt_of(body, chat)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        ignore_eos = bool(body.get("ignore_eos"))
        min_tokens = int(body.get("min_tokens") or 0) if config.flavor != "llamacpp" else 0
        request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:12]}"
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        tools = body.get("tools") or []
        measured = "warmup" not in json.dumps(body.get("messages", ""))[:200]
        continuous = config.flavor == "vllm" and bool((body.get("stream_options") or {}).get("continuous_usage_stats"))

        def chunk(choice=None, usage=None, extra=None) -> str:
            data = {"id": request_id, "object": obj, "created": created, "model": config.model,
                    "choices": [choice] if choice else []}
            if usage:
                data["usage"] = usage
            data.update(extra or {})
            return f"data: {json.dumps(data)}\n\n"

        if tools:
            return JSONResponse(tool_call_response(body, tools, request_id, created))
        response_format = body.get("response_format") or {}
        if response_format.get("type") in ("json_schema", "json_object"):
            schema = (response_format.get("json_schema") or {}).get("schema") or {"type": "object"}
            content = json.dumps(value_for(schema))
            return JSONResponse({"id": request_id, "object": "chat.completion", "created": created, "model": config.model,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(tokenize(content)),
                                           "total_tokens": len(prompt) + len(tokenize(content))}})

        async def stream():
            produced, cached, index = 0, 0, 0
            if chat:
                yield chunk({"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None})
            async for n, cached in engine.generate(prompt, max_tokens, ignore_eos, min_tokens):
                produced += n
                text = "".join(words[(index + i) % len(words)] for i in range(n))
                index += n
                piece = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
                running_usage = {"prompt_tokens": len(prompt), "completion_tokens": produced,
                                 "total_tokens": len(prompt) + produced} if continuous else None
                yield chunk({**piece, "finish_reason": None}, usage=running_usage)
                if measured:
                    engine.measured_tokens += n
                    maybe_fault_mid_stream()
            finish = "length" if produced >= max_tokens else "stop"
            final = {"index": 0, "delta": {}, "finish_reason": finish} if chat else \
                {"index": 0, "text": "", "finish_reason": finish}
            reported = produced + (1 if "wrong_usage" in config.faults and measured else 0)
            usage = {"prompt_tokens": len(prompt), "completion_tokens": reported,
                     "total_tokens": len(prompt) + reported, "prompt_tokens_details": {"cached_tokens": cached}}
            if body.get("stream_options", {}).get("include_usage"):
                yield chunk(final)
                yield chunk(usage=usage)
            else:
                yield chunk(final, usage=usage)
            yield "data: [DONE]\n\n"
            if measured:
                engine.measured_requests += 1
                maybe_compile_line()

        if body.get("stream"):
            return StreamingResponse(stream(), media_type="text/event-stream")
        text, produced, cached = "", 0, 0
        async for n, cached in engine.generate(prompt, max_tokens, ignore_eos, min_tokens):
            text += "".join(words[(produced + i) % len(words)] for i in range(n))
            produced += n
        usage = {"prompt_tokens": len(prompt), "completion_tokens": produced, "total_tokens": len(prompt) + produced,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "length" if produced >= max_tokens else "stop"} \
            if chat else {"index": 0, "text": text, "finish_reason": "length"}
        return JSONResponse({"id": request_id, "object": "chat.completion" if chat else "text_completion",
                             "created": created, "model": config.model, "choices": [choice], "usage": usage})

    def maybe_fault_mid_stream() -> None:
        if "crash_mid_stream" in config.faults and engine.measured_tokens > 40:
            log("Fatal Python error: Segmentation fault (simulated crash mid-stream)")
            os._exit(139)

    def maybe_compile_line() -> None:
        if "compile_in_cell" in config.faults and engine.measured_requests == 3:
            line = {"vllm": "Compiling a graph for dynamic shape takes 14.2 s",
                    "sglang": "Capture cuda graph begin. This can take up to several minutes.",
                    "llamacpp": "graph_reserve: compiling graph"}[config.flavor]
            log(line)

    def value_for(schema: dict):
        """The simplest value a grammar-constrained engine could return for this JSON schema."""
        if "enum" in schema:
            return schema["enum"][0]
        kind = schema.get("type", "object")
        kind = kind[0] if isinstance(kind, list) else kind
        if kind == "object":
            return {name: value_for(sub) for name, sub in (schema.get("properties") or {}).items()}
        return {"string": "Oslo", "integer": 1, "number": 1.0, "boolean": True, "array": [], "null": None}.get(kind)

    def tool_call_response(body, tools, request_id, created):
        function = tools[0]["function"]
        properties = function.get("parameters", {}).get("properties", {})
        arguments = {}
        for name, schema in properties.items():
            types = schema.get("type")
            nullable = isinstance(types, list) and "null" in types
            if nullable:
                arguments[name] = "null" if "null_string_argument" in config.faults else None
            elif "string" in (types if isinstance(types, list) else [types]):
                arguments[name] = "Oslo"
            else:
                arguments[name] = 1
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{request_id[-8:]}", "type": "function",
            "function": {"name": function["name"], "arguments": json.dumps(arguments)}}]}
        return {"id": request_id, "object": "chat.completion", "created": created, "model": config.model,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}

    async def chat(request: Request):
        return await complete(request, True)

    async def completions(request: Request):
        return await complete(request, False)

    routes = [
        Route("/health", health), Route("/health_generate", health), Route("/ready", health),
        Route("/metrics", metrics), Route("/v1/models", models),
        Route("/tokenize", tokenize_endpoint, methods=["POST"]),
        Route("/version", info), Route("/server_info", info), Route("/get_server_info", info), Route("/props", info),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
    return Starlette(routes=routes)


async def serve(config: SimConfig) -> None:
    import uvicorn

    engine = Engine(config)
    log(f"simulated {config.flavor} engine (servebook simulator, not a real engine): model {config.model}, "
        f"{config.timing.slots} slots, chunk {config.timing.chunk}, draft tokens {config.timing.draft_tokens}")
    if "oom_warmup" in config.faults:
        await asyncio.sleep(config.load_s)
        message = {"llamacpp": "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 81920.00 MiB on device 0: "
                               "cudaMalloc failed: out of memory",
                   "sglang": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB during warmup",
                   "vllm": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}[config.flavor]
        log(message)
        sys.exit(1)

    async def become_ready() -> None:
        if "never_ready" in config.faults:
            return
        await asyncio.sleep(config.load_s)
        if config.flavor == "sglang":
            # SGLang sends itself a warmup request after loading; it lands in the counters.
            log("Start of warmup request")
            async for _ in engine.generate(tokenize("The capital city of France is"), 8, True, 0):
                pass
            await asyncio.sleep(config.warmup_s)
            log("End of warmup request")
        engine.ready = True
        log("ready to serve")

    server = uvicorn.Server(uvicorn.Config(build_app(engine), host=config.host, port=config.port,
                                           log_level="warning", access_log=False))
    if config.flavor == "vllm":
        # vLLM opens its port only once the engine is ready: connections are refused before.
        if "never_ready" in config.faults:
            while True:
                await asyncio.sleep(3600)
        await asyncio.sleep(config.load_s)
        engine.ready = True
        log("Application startup complete.")
        await server.serve()
        return
    ready_task = asyncio.ensure_future(become_ready())
    await server.serve()
    ready_task.cancel()


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    engine_argv: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, engine_argv = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="servebook sim", description=__doc__.splitlines()[0])
    parser.add_argument("--flavor", choices=FLAVORS, required=True)
    parser.add_argument("--fault", action="append", choices=FAULTS, default=[])
    parser.add_argument("--port", type=int, help="when no engine argv follows --")
    args = parser.parse_args(argv)
    if not engine_argv:
        engine_argv = ["--port", str(args.port or {"llamacpp": 8080, "sglang": 30000, "vllm": 8000}[args.flavor])]
        if args.flavor == "sglang":
            engine_argv.append("--enable-metrics")
        if args.flavor == "llamacpp":
            engine_argv.append("--metrics")
    config = parse_engine_argv(args.flavor, engine_argv, set(args.fault))
    try:
        asyncio.run(serve(config))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
