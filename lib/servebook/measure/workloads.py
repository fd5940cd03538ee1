"""What every cell kind sends its requests with: the run's clients, prompts of exact token length, records.

Each kind's own pattern (closed-loop decode streams, cold prefill, waves, prompt reuse, open-loop load) is in its
module under measure/kinds/; what the requests mean (validity, figures) is decided elsewhere.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from openai import AsyncOpenAI

from ..config.plan import Plan
from ..util.errors import InputError
from .contract import CellSpec, OnDone
from .prompts import corpus, exact_length_prompt, filler_text
from .transport.client import RequestRecord, StreamRequest
from .transport.direct import Streams, stream_direct
from .transport.endpoint import Endpoint
from .transport.senders import Senders
from .transport.sse import SseClient

__all__ = ["OnDone", "Workloads"]


async def _no_handover(slice_index: int) -> None:
    return None


class Workloads:
    def __init__(self, endpoint: Endpoint, plan: Plan, tag: str, http: httpx.AsyncClient, openai: AsyncOpenAI,
                 model: str, streams: Streams | None = None):
        self.endpoint, self.plan, self.tag = endpoint, plan, tag
        self.http, self.openai, self.model = http, openai, model
        self._streams = streams
        self._fillers: dict[str, list[int]] = {}
        self._openers: list[int] = []
        self._prefill_count = 0
        #: what a kind reads once per run and keeps (the load kind's trace)
        self.cache: dict[str, Any] = {}
        self.senders = Senders()  # sending processes for loads beyond one process's pace, started on first use
        #: a sliced cell's pause between its slices: hand the round's turn on and wait for it (measure.turns);
        #: measured alone, the next slice follows at once
        self.handover: Callable[[int], Awaitable[None]] = _no_handover
        #: raises EngineFailed once the engine is dead (the run's check); an open-loop schedule stops on it
        self.alive_check: Callable[[], None] = lambda: None
        #: what was sent for each request whose text is kept (decode cells), until the cell's realism reads it
        self.sent: dict[str, StreamRequest] = {}

    @property
    def streams(self) -> Streams:
        """The agents cell's streams, sent without the SDK or httpx (measure.transport.direct); made on first use, so a
        plan without that cell needs no endpoint for them."""
        if self._streams is None:
            self._streams = SseClient(self.plan.request_timeout_s, self.endpoint.route)
        return self._streams

    async def stream(self, record: RequestRecord, request: StreamRequest) -> RequestRecord:
        """One measured stream, without the SDK or httpx (measure.transport.direct), as the agents cell's: through
        them an 8K-token prompt's first token came 1.8 ms later on a quiet 2-core host than through asyncio's
        transports (2.4 ms against 0.5-0.6 ms from a server that answers at once, benchmarks/ttft_floor.py): time
        that counted as the engine's."""
        if request.keep_text:
            self.sent[record.request_id] = request
        return await stream_direct(self.streams, self.endpoint.base_url, self.endpoint.auth, record, request)

    def close(self) -> None:
        self.senders.close()

    async def tokenize(self, text: str) -> list[int]:
        adapter = self.endpoint.adapter
        tokens = await adapter.tokenize(self.http, self.endpoint.base_url, text, self.model, self.endpoint.auth)
        if tokens is None:
            # Refused before launch where the adapter knows it has no tokenizer; this is the server saying so.
            raise InputError(f"engine {adapter.kind} at {self.endpoint.base_url} answers no tokenizer request, so "
                             "prompts of exact token length cannot be built; drop the prefill, reuse and wave "
                             "cells (and decode.prompt_tokens) from the plan")
        return tokens

    def record(self, spec: CellSpec, request_id: str, output_tokens: int, **extra: Any) -> RequestRecord:
        return RequestRecord(request_id, spec.cell_id, spec.concurrency, spec.category, output_tokens, t_send=0.0,
                             **extra)

    def request(self, output_tokens: int, **fields: Any) -> StreamRequest:
        if fields.get("messages") is not None:
            fields["extra_body"] = self.endpoint.for_chat(fields.get("extra_body"))
        return StreamRequest(self.model, output_tokens, stream_options=self.endpoint.adapter.stream_options(),
                             keep_chunk_times=self.plan.record_chunks, server_timings=self.endpoint.adapter.server_timings,
                             absent_cached_is_zero=self.endpoint.absent_cached_is_zero, **fields)

    async def filler(self, category: str) -> list[int]:
        if category not in self._fillers:
            text = filler_text() if category == "prose" else "\n\n".join(corpus(category))
            self._fillers[category] = await self.tokenize(text)
        return self._fillers[category]

    async def opener(self) -> int:
        """A first token no other prompt of this run starts with (until the filler's distinct tokens run out)."""
        if not self._openers:
            # Engines reuse the longest cached common prefix, even a single token, so the
            # first token of every prompt differs from the first token of every other.
            self._openers = sorted(set(await self.filler("prose")))
        # Each run starts at its own place in the openers: a server servebook attaches to has kept the last run's
        # prompts in its prefix cache, and SGLang's radix tree and llama.cpp's slots reuse even one shared token.
        start = zlib.crc32(self.tag.encode()) if self.tag else 0
        opener = self._openers[(start + self._prefill_count) % len(self._openers)]
        self._prefill_count += 1
        return opener

    async def unique_prompt(self, category: str, length: int, tag: str,
                            record: RequestRecord | None = None) -> list[int]:
        """Exactly `length` tokens whose first token no other prompt of this run starts with; `record`, when given,
        keeps the length of the opening (opener and tag) that makes it unique."""
        prefix = [await self.opener()] + await self.tokenize(f" [{tag}]\n")
        if record is not None:
            record.opening_tokens = len(prefix)
        return exact_length_prompt(await self.filler(category), prefix, length)
