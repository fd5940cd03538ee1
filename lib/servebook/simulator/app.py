"""The simulated engine's HTTP API: each engine's readiness answers, /metrics, tokenizer and OpenAI routes."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from typing import Any

from .config import SimConfig
from .engine import SYSTEM_PROMPT, Engine, log, tokenize

WORDS = ["alpha", " beta", " gamma", " delta", " epsilon", " zeta", " eta", " theta"]
COMPILE_LINES = {"vllm": "Compiling a graph for dynamic shape takes 14.2 s",
                 "sglang": "Capture target decode CUDA graph begin. backend=full bs=[1, 2, 4, 8]",
                 "llamacpp": "graph_reserve: compiling graph"}


def value_for(schema: dict):
    """The simplest value a grammar-constrained engine could return for this JSON schema."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: value_for(sub) for name, sub in (schema.get("properties") or {}).items()}
    return {"string": "Oslo", "integer": 1, "number": 1.0, "boolean": True, "array": [], "null": None}.get(kind)


def tool_arguments(function: dict, null_as_string: bool) -> dict:
    """Arguments for the first tool; a nullable one comes back as null (or as "null" under the fault)."""
    arguments: dict[str, Any] = {}
    for name, schema in function.get("parameters", {}).get("properties", {}).items():
        types = schema.get("type")
        if isinstance(types, list) and "null" in types:
            arguments[name] = "null" if null_as_string else None
        elif "string" in (types if isinstance(types, list) else [types]):
            arguments[name] = "Oslo"
        else:
            arguments[name] = 1
    return arguments


class _Completion:
    """One completion request: its parsed body and the chunks it streams back."""

    def __init__(self, app: "SimApp", body: dict, chat: bool):
        self.app, self.body, self.chat = app, body, chat
        config = app.config
        self.prompt = app.prompt_of(body, chat)
        self.max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        self.ignore_eos = bool(body.get("ignore_eos"))
        self.min_tokens = int(body.get("min_tokens") or 0) if config.flavor != "llamacpp" else 0
        self.request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:12]}"
        self.created = int(time.time())
        self.measured = "warmup" not in json.dumps(body.get("messages", ""))[:200]
        options = body.get("stream_options") or {}
        self.continuous = config.flavor == "vllm" and (bool(options.get("continuous_usage_stats"))
                                                       or config.force_usage)
        self.include_usage = bool(options.get("include_usage")) or config.force_usage
        # a reasoning model's first tokens are thinking, in chat only (simulator/thinking.py)
        self.shape = config.reasoning if chat else None
        self.thinking = self.shape.thinking_tokens(body, self.max_tokens) if self.shape else 0

    def usage(self, produced: int, cached: int | None = None) -> dict:
        usage: dict[str, Any] = {"prompt_tokens": len(self.prompt), "completion_tokens": produced,
                 "total_tokens": len(self.prompt) + produced}
        # only under the engine's flag, and SGLang's only when something was cached (usage_processor.py)
        if cached is not None and self.app.config.cache_report and (cached or self.app.config.flavor != "sglang"):
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if self.shape is not None:  # under a parser, even when nothing was thought
            usage.update(self.shape.usage_fields(min(produced, self.thinking)))
        return usage

    def envelope(self, obj: str, choices: list, usage: dict | None = None) -> dict:
        data = {"id": self.request_id, "object": obj, "created": self.created, "model": self.app.config.name,
                "choices": choices}
        if usage:
            data["usage"] = usage
        return data

    def chunk(self, choice: dict | None = None, usage: dict | None = None) -> str:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return f"data: {json.dumps(self.envelope(obj, [choice] if choice else [], usage))}\n\n"

    def tokens_piece(self, produced: int, n: int) -> dict:
        """The chunk of `n` tokens from `produced` on; a reasoning model's before the end of thinking are reasoning
        (a drafter's run across it sends both in one delta, as vLLM does)."""
        words = [WORDS[(produced + i) % len(WORDS)] for i in range(n)]
        if self.shape is None:
            return self.piece("".join(words), None)
        thought = max(0, min(n, self.thinking - produced))
        return {"index": 0, "delta": self.shape.delta("".join(words[:thought]), "".join(words[thought:])),
                "finish_reason": None}

    def piece(self, text: str, finish: str | None) -> dict:
        if self.chat:
            return {"index": 0, "delta": {"content": text} if text or not finish else {}, "finish_reason": finish}
        return {"index": 0, "text": text, "finish_reason": finish}

    async def stream(self):
        engine, faults = self.app.engine, self.app.config.faults
        produced, cached = 0, 0
        if self.chat:
            # vLLM puts continuous usage on its first (role) chunk too (chat_completion/serving.py)
            yield self.chunk({"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None},
                             usage=self.usage(0) if self.continuous else None)
        # the last chunk's cached count is what the usage after the loop reports
        async for n, cached in engine.generate(self.prompt, self.max_tokens, self.ignore_eos, self.min_tokens):  # noqa: B007
            piece = self.tokens_piece(produced, n)
            produced += n
            yield self.chunk(piece, usage=self.usage(produced) if self.continuous else None)
            if self.measured:
                engine.measured_tokens += n
                self.app.maybe_crash()
        finish = "length" if produced >= self.max_tokens else "stop"
        reported = produced + (1 if "wrong_usage" in faults and self.measured else 0)
        if self.include_usage:
            yield self.chunk(self.piece("", finish), usage=self.usage(produced) if self.continuous else None)
            yield self.chunk(usage=self.usage(reported, cached))
        else:
            yield self.chunk(self.piece("", finish), usage=self.usage(reported, cached))
        yield "data: [DONE]\n\n"
        if self.measured:
            engine.measured_requests += 1
            self.app.maybe_log_compile()

    async def whole(self) -> dict:
        text, produced, cached = "", 0, 0
        # A batch-variant kernel: with company, the output drifts after a few tokens (fault batch_variant).
        self.app.in_flight += 1
        drift = 0
        try:
            # the last chunk's cached count is what the usage after the loop reports
            async for n, cached in self.app.engine.generate(self.prompt, self.max_tokens, self.ignore_eos,  # noqa: B007
                                                            self.min_tokens, streaming=False):
                if "batch_variant" in self.app.config.faults and self.app.in_flight > 1 and produced >= 5:
                    drift = 1
                text += "".join(WORDS[(produced + i + drift) % len(WORDS)] for i in range(n))
                produced += n
        finally:
            self.app.in_flight -= 1
        finish = "length" if produced >= self.max_tokens else "stop"
        message: dict[str, Any] = {"role": "assistant"}
        if self.chat and self.shape is not None and self.thinking:
            thought = "".join(WORDS[i % len(WORDS)] for i in range(min(produced, self.thinking)))
            message[self.shape.field], text = thought, text[len(thought):]
        if self.chat:
            text = self.capable_answer(text)
        choice = {"index": 0, "message": {**message, "content": text}, "finish_reason": finish} \
            if self.chat else {"index": 0, "text": text, "finish_reason": "length"}
        return self.envelope("chat.completion" if self.chat else "text_completion", [choice],
                             self.usage(produced, cached))

    def structured(self) -> dict:
        schema = ((self.body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {"type": "object"}
        content = json.dumps(value_for(schema))
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        return self.envelope("chat.completion", [choice], self.usage(len(tokenize(content))))

    def capable_answer(self, text: str) -> str:
        """What a capable model says where the gates can tell: a recalled needle, a reply to a tool's result."""
        faults = self.app.config.faults
        content = " ".join(str(m.get("content") or "") for m in self.body.get("messages") or [])
        needle = re.search(r"access code for vault (\d+) is (\d+)", content)
        if needle and "What is the access code" in content:
            return "I do not know." if "lost_needle" in faults else needle.group(2)
        if "empty_reply" in faults:
            return ""
        return text or "Hello."

    def tool_call(self) -> dict:
        faults = self.app.config.faults
        tools = [t["function"] for t in self.body["tools"]]
        asked = " ".join(str(m.get("content") or "") for m in self.body.get("messages") or [] if m.get("role") == "user")
        function = tools[0]
        if len(tools) > 1 and "wrong_tool" not in faults:
            # choose as a capable model would: the tool whose name and description share the most words with the ask
            words = set(re.findall(r"[a-z]+", asked.lower())) | ({"weather"} if "rain" in asked.lower() else set())
            function = max(tools, key=lambda f: len(words & set(re.findall(r"[a-z]+", (
                f["name"].replace("_", " ") + " " + f.get("description", "")).lower()))))
        arguments = tool_arguments(function, "null_string_argument" in faults)
        cities: list[str | None] = [c for c in ("Oslo", "Lima", "Pune") if c in asked]
        wanted = cities if self.body.get("parallel_tool_calls") and len(cities) > 1 and \
            "no_parallel_tool_calls" not in faults else cities[:1] or [None]
        calls = []
        for i, city in enumerate(wanted):
            args = {**arguments, **({"city": city} if city and "city" in arguments else {})}
            calls.append({"id": f"call_{self.request_id[-6:]}{i}", "type": "function",
                          "function": {"name": function["name"], "arguments": json.dumps(args)}})
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        return {**self.envelope("chat.completion", [{"index": 0, "message": message, "finish_reason": "tool_calls"}]),
                "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}


class SimApp:
    """Routes and handlers over one simulated `Engine`."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.config = engine.config
        self.in_flight = 0  # whole (non-streamed) completions being generated right now

    def not_ready(self):
        from starlette.responses import JSONResponse

        if self.config.flavor == "llamacpp":
            return JSONResponse({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, 503)
        return JSONResponse({"error": "server is warming up"}, 503)

    async def health(self, request):
        from starlette.responses import JSONResponse

        return JSONResponse({"status": "ok"}) if self.engine.ready else self.not_ready()

    async def metrics(self, request):
        from starlette.responses import PlainTextResponse

        if not self.engine.ready and self.config.flavor == "llamacpp":
            return self.not_ready()
        if not self.config.metrics_enabled:
            return PlainTextResponse("metrics are disabled", 501)
        return PlainTextResponse(self.engine.counters.render(), media_type="text/plain; version=0.0.4")

    async def models(self, request):
        from starlette.responses import JSONResponse

        if not self.engine.ready:
            return self.not_ready()
        # SGLang's root is the served name (http_server.py), vLLM's the model path; each engine names itself in
        # owned_by, as `servebook run --url` reads it
        root = self.config.name if self.config.flavor == "sglang" else self.config.model
        listed = [{"id": name, "object": "model", "owned_by": self.config.flavor, "root": root,
                   "max_model_len": self.config.context_length}
                  for name in [self.config.name, *self.config.extra_models]]
        return JSONResponse({"object": "list", "data": listed})

    async def tokenize(self, request):
        from starlette.responses import JSONResponse

        if "no_tokenizer" in self.engine.config.faults:
            return JSONResponse({"detail": "Not Found"}, 404)
        body = await request.json()
        tokens = tokenize(body.get("content", body.get("prompt", "")))
        return JSONResponse({"tokens": tokens, "count": len(tokens)})

    async def server_info(self, request):
        """SGLang's server args; vLLM's resolved configuration, served only in development mode
        (VLLM_SERVER_DEV_MODE=1), in the shape vLLM 0.26 gave on an H200 (tests/fixtures/vllm-0.26.0)."""
        from starlette.responses import JSONResponse

        if self.config.flavor != "vllm":
            return await self.info(request)
        if os.environ.get("VLLM_SERVER_DEV_MODE") != "1":
            return JSONResponse({"detail": "Not Found"}, 404)
        return JSONResponse({"vllm_config": vllm_config(self.config)})

    async def info(self, request):
        """Each engine's own self-description, in its own shape (servebook verifies attached servers with it)."""
        from starlette.responses import JSONResponse

        config, timing = self.config, self.config.timing
        body: dict = {"version": config.version, "simulator": True}
        if config.flavor == "llamacpp":
            per_slot = (config.context_length or 4096) // max(1, timing.slots)
            body |= {"total_slots": timing.slots, "model_path": config.model, "model_alias": config.name,
                     "default_generation_settings": {"n_ctx": per_slot}}
        elif config.flavor == "sglang":
            # resolved values, as SGLang reports them: `auto` becomes the dtype it chose, and the running-request
            # cap the scheduler really applies sits in internal_states
            args = config.server_args
            kv = args.get("kv_cache_dtype")
            body |= {"model_path": config.model, "served_model_name": config.name,
                     "max_running_requests": timing.slots, "chunked_prefill_size": args.get("chunked_prefill_size"),
                     "context_length": config.context_length, "tp_size": args.get("tp_size", 1),
                     "kv_cache_dtype": "bfloat16" if kv in (None, "auto") else kv,
                     "speculative_algorithm": args.get("speculative_algorithm"),
                     "enable_cache_report": bool(args.get("enable_cache_report")),
                     "reasoning_parser": args.get("reasoning_parser"),
                     "internal_states": [{"effective_max_running_requests_per_dp": timing.slots}],
                     "api_key": args.get("api_key")}  # SGLang reports its key among its server args
        return JSONResponse(body)

    async def slots(self, request):
        from starlette.responses import JSONResponse

        per_slot = (self.config.context_length or 4096) // max(1, self.config.timing.slots)
        return JSONResponse([{"id": i, "n_ctx": per_slot, "speculative": self.config.timing.draft_tokens > 0,
                              "is_processing": False} for i in range(self.config.timing.slots)])

    def prompt_of(self, body: dict, chat: bool) -> list[int]:
        if chat:
            text = SYSTEM_PROMPT + "".join(f"\n<{m.get('role')}>\n{m.get('content') or ''}" for m in body["messages"])
            return tokenize(text + "\n<assistant>\n")
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        return tokenize(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))

    async def complete(self, request, chat: bool):
        from starlette.responses import JSONResponse, StreamingResponse

        if not self.engine.ready:
            return self.not_ready()
        completion = _Completion(self, await request.json(), chat)
        if completion.body.get("stream"):  # timing is what streams measure; a grammar only shapes the text
            return StreamingResponse(completion.stream(), media_type="text/event-stream")
        messages = completion.body.get("messages") or []
        if messages and messages[-1].get("role") == "tool" and "history_rejected" in self.config.faults:
            return JSONResponse({"error": {"code": 400, "type": "invalid_request_error", "message":
                                           "Cannot have 2 or more assistant messages at the end of the list."}}, 400)
        if completion.body.get("tools") and not (messages and messages[-1].get("role") == "tool"):
            return JSONResponse(completion.tool_call())
        if (completion.body.get("response_format") or {}).get("type") in ("json_schema", "json_object"):
            return JSONResponse(completion.structured())
        return JSONResponse(await completion.whole())

    async def chat(self, request):
        return await self.complete(request, True)

    async def completions(self, request):
        return await self.complete(request, False)

    def maybe_crash(self) -> None:
        if "crash_mid_stream" in self.config.faults and self.engine.measured_tokens > 40:
            log("Fatal Python error: Segmentation fault (simulated crash mid-stream)")
            os._exit(139)

    def maybe_log_compile(self) -> None:
        if "compile_in_cell" in self.config.faults and self.engine.measured_requests == 3:
            log(COMPILE_LINES[self.config.flavor])


def vllm_config(config: SimConfig) -> dict:
    """The parts of vLLM's resolved configuration that servebook reads, under vLLM's own names."""
    args, timing = config.server_args, config.timing
    spec = json.loads(args["speculative_config"]) if args.get("speculative_config") else None
    return {"model_config": {"model": config.model, "max_model_len": config.context_length},
            "cache_config": {"cache_dtype": args.get("kv_cache_dtype", "auto"), "block_size": 16,
                             "enable_prefix_caching": config.prefix_caching,
                             "gpu_memory_utilization": args.get("gpu_memory_utilization", 0.92)},
            "scheduler_config": {"max_num_seqs": timing.slots, "max_num_batched_tokens": timing.chunk},
            "parallel_config": {"tensor_parallel_size": 1},
            "speculative_config": {"method": spec.get("method"), "num_speculative_tokens": timing.draft_tokens}
            if spec else None,
            # where vLLM 0.26 reports its reasoning parser ("" without one; tests/fixtures/vllm-0.26.0)
            "structured_outputs_config": {"reasoning_parser": args.get("reasoning_parser") or ""}}


def build_app(engine: Engine):
    from starlette.applications import Starlette
    from starlette.routing import Route

    app = SimApp(engine)
    return Starlette(middleware=_auth_middleware(engine.config.api_key), routes=[
        Route("/slots", app.slots),
        Route("/health", app.health), Route("/health_generate", app.health), Route("/ready", app.health),
        Route("/metrics", app.metrics), Route("/v1/models", app.models),
        Route("/tokenize", app.tokenize, methods=["POST"]),
        Route("/version", app.info), Route("/server_info", app.server_info), Route("/get_server_info", app.info),
        Route("/props", app.info),
        Route("/v1/chat/completions", app.chat, methods=["POST"]),
        Route("/v1/completions", app.completions, methods=["POST"]),
    ])


def _auth_middleware(api_key: str | None) -> list:
    """--api-key: every route but the health checks wants `Authorization: Bearer KEY`, as llama.cpp does."""
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import JSONResponse

    if not api_key:
        return []

    async def check(request, call_next):
        if request.url.path in ("/health", "/v1/health") or \
                request.headers.get("authorization") == f"Bearer {api_key}":
            return await call_next(request)
        return JSONResponse({"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}},
                            401)

    return [Middleware(BaseHTTPMiddleware, dispatch=check)]
