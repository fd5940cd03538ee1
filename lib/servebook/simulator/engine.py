"""The simulated engine: slots, a timing model, a prompt cache, and each engine's counters."""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import time
import zlib
from array import array

from .config import SimConfig
from .metrics import Counters

SYSTEM_PROMPT = "You are a helpful assistant. Answer the user."
_WORD = re.compile(r"\w+|[^\w\s]")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def tokenize(text: str) -> list[int]:
    """A stable word-level tokenizer: the same text always gives the same ids."""
    return [100 + zlib.crc32(w.encode()) % 50_000 for w in _WORD.findall(text)]


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length in tokens of the common prefix of two prompts held as 8-byte token ids, by bisection on byte
    strings compared in C: token by token in Python, 64 held prompts of 8K tokens took the simulator 50 ms a request,
    which agent sessions resending such prompts made the client's wait (memoryview slices compare item by item)."""
    low, high = 0, min(len(a), len(b)) // 8
    while low < high:
        mid = (low + high + 1) // 2
        if a[:8 * mid] == b[:8 * mid]:
            low = mid
        else:
            high = mid - 1
    return low


class Engine:
    def __init__(self, config: SimConfig):
        self.config = config
        self.counters = Counters(config)
        self.slots = asyncio.Semaphore(config.timing.slots)
        self.running = 0
        self.waiting = 0
        self.ready = False
        self.history: list[bytes] = []
        self.measured_tokens = 0
        self.measured_requests = 0
        self.rng = random.Random(config.port)
        timing = config.timing
        # This launch's own speed: a planted slowdown times a lognormal draw (seeded by the OS, so two
        # launches of one configuration differ the way two launches of a real engine do).
        noise = random.Random(os.urandom(8)).lognormvariate(0.0, timing.run_noise) if timing.run_noise else 1.0
        self.speed = timing.slowdown * noise

    def cached_prefix(self, tokens: list[int]) -> int:
        if not self.config.prefix_caching:
            return 0
        held = array("q", tokens).tobytes()
        best = max((_common_prefix(previous, held) for previous in self.history), default=0)
        self.history = (self.history + [held])[-64:]
        return min(best, len(tokens) - 1)

    def prefill_seconds(self, uncached: int) -> float:
        timing = self.config.timing
        seconds = uncached / timing.prefill_tok_s + math.ceil(uncached / timing.chunk) * timing.chunk_overhead_s
        return seconds * self.speed

    def step_seconds(self) -> float:
        return self.config.timing.step_seconds(self.running, self.speed)

    def tokens_this_step(self) -> tuple[int, int]:
        """(tokens emitted, drafted) for one decode step; a drafter emits runs of accepted tokens."""
        k = self.config.timing.draft_tokens
        if not k:
            return 1, 0
        accepted = 0
        while accepted < k and self.rng.random() < self.config.timing.acceptance:
            accepted += 1
        return accepted + 1, k

    async def generate(self, prompt_tokens: list[int], max_tokens: int, ignore_eos: bool, min_tokens: int,
                       streaming: bool = True):
        """Yields (tokens in chunk) as the engine would stream them, honouring slots and timing."""
        c, flavor = self.counters, self.config.flavor
        stream = {"is_streaming": "true" if streaming else "false"}
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
                c.observe("ttft", time.monotonic() - arrived)
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
                    c.inc(c.verify, 1 if drafted else 0)
                    if drafted:
                        c.set(c.verify_width, drafted + 1)
                    yield n, cached
                finish = "length" if produced >= max_tokens else "stop"
                if flavor == "llamacpp":
                    c.inc(c.generated, produced)
                elif flavor == "sglang":  # prompt, cached and generated all land at request end
                    c.inc(c.prompt, len(prompt_tokens), **stream)
                    c.inc(c.cached, cached)
                    c.inc(c.generated, produced, **stream)
                    c.inc(c.requests, 1, **stream)
                else:
                    c.inc(c.success, 1, finished_reason=finish)
            finally:
                self.running -= 1
                c.set(c.running, self.running)


