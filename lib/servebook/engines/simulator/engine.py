"""The simulated engine: slots, a timing model, a prompt cache, and each engine's counters."""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import time
import zlib

from .config import SimConfig

SYSTEM_PROMPT = "You are a helpful assistant. Answer the user."
_WORD = re.compile(r"\w+|[^\w\s]")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def tokenize(text: str) -> list[int]:
    """A stable word-level tokenizer: the same text always gives the same ids."""
    return [100 + zlib.crc32(w.encode()) % 50_000 for w in _WORD.findall(text)]


class Counters:
    """The engine's Prometheus counters, named and counted the way that engine counts them."""

    def __init__(self, config: SimConfig):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.flavor = config.flavor
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"] if config.flavor == "vllm" else []
        self.labels = {"model_name": config.name, "engine": "0"} if labels else {}
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
            self.queue_time = Histogram(prefix + "request_queue_time_seconds", "Time spent in WAITING phase",
                                        labels, registry=self.registry)
            self.prefill_time = Histogram(prefix + "request_prefill_time_seconds", "Time spent in PREFILL phase",
                                          labels, registry=self.registry)
            # vLLM exports its labelled counters at 0 from startup; a child created lazily would be absent from
            # the first scrape and read as "no counter".
            for metric in (self.prompt, self.cached, self.generated, self.drafted, self.accepted):
                metric.labels(**self.labels)

    def _of(self, metric, **extra):
        return metric.labels(**self.labels, **extra) if (self.labels or extra) else metric

    def inc(self, metric, amount: float = 1, **extra) -> None:
        if metric is not None and amount:
            self._of(metric, **extra).inc(amount)

    def observe(self, name: str, value: float) -> None:
        """Into a latency histogram the engine keeps (vLLM's queue and prefill times); others keep none."""
        metric = getattr(self, name, None)
        if metric is not None:
            self._of(metric).observe(value)

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
        timing = config.timing
        # This launch's own speed: a planted slowdown times a lognormal draw (seeded by the OS, so two
        # launches of one configuration differ the way two launches of a real engine do).
        noise = random.Random(os.urandom(8)).lognormvariate(0.0, timing.run_noise) if timing.run_noise else 1.0
        self.speed = timing.slowdown * noise

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
        seconds = uncached / timing.prefill_tok_s + math.ceil(uncached / timing.chunk) * timing.chunk_overhead_s
        return seconds * self.speed

    def step_seconds(self) -> float:
        timing = self.config.timing
        spec = 1 + 0.15 * timing.draft_tokens if timing.draft_tokens else 1
        return (timing.step_base_s + timing.step_per_seq_s * max(1, self.running)) * spec * self.speed

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
        arrived = time.monotonic()
        async with self.slots:
            scheduled = time.monotonic()
            c.observe("queue_time", scheduled - arrived)
            self.waiting -= 1
            self.running += 1
            c.set(c.waiting, self.waiting)
            c.set(c.running, self.running)
            try:
                cached = self.cached_prefix(prompt_tokens)
                await asyncio.sleep(self.prefill_seconds(len(prompt_tokens) - cached))
                c.observe("prefill_time", time.monotonic() - scheduled)
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


