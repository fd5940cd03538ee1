"""The request patterns of each cell kind: closed-loop decode streams, cold prefill, waves, prompt reuse.

Each pattern sends its requests, records them, and calls `on_done` after each one (progress);
what the requests mean (validity, figures) is decided elsewhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
from openai import AsyncOpenAI

from ..config.plan import Plan
from ..util.errors import InputError
from .cells import CellSpec
from .client import RequestRecord, StreamRequest, stream_request
from .endpoint import Endpoint
from .openloop import load_for, read_trace, schedule
from .prompts import corpus, decode_prompt, exact_length_prompt, filler_text, structured_format, structured_prompt
from .senders import Connection, Send, Senders, processes_for, send_on_schedule

OnDone = Callable[[], None]


class Workloads:
    def __init__(self, endpoint: Endpoint, plan: Plan, tag: str, http: httpx.AsyncClient, openai: AsyncOpenAI,
                 model: str):
        self.endpoint, self.plan, self.tag = endpoint, plan, tag
        self.http, self.openai, self.model = http, openai, model
        self._fillers: dict[str, list[int]] = {}
        self._openers: list[int] = []
        self._prefill_count = 0
        self._trace: list[tuple[float, int, int]] | None = None
        self.senders = Senders()  # sending processes for loads beyond one process's pace, started on first use

    def close(self) -> None:
        self.senders.close()

    async def run(self, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        runner = {"decode": self.decode, "prefill": self.prefill, "wave": self.waves, "reuse": self.reuse,
                  "load": self.load}[spec.kind]
        return await runner(spec, on_done)

    async def tokenize(self, text: str) -> list[int]:
        adapter = self.endpoint.adapter
        tokens = await adapter.tokenize(self.http, self.endpoint.base_url, text, self.model, self.endpoint.auth)
        if tokens is None:
            # Refused before launch where the adapter knows it has no tokenizer; this is the server saying so.
            raise InputError(f"engine {adapter.kind} at {self.endpoint.base_url} answers no tokenizer request, so "
                             "prompts of exact token length cannot be built; drop the prefill, reuse and wave "
                             "cells (and decode.prompt_tokens) from the plan")
        return tokens

    def _record(self, spec: CellSpec, request_id: str, output_tokens: int, **extra: Any) -> RequestRecord:
        return RequestRecord(request_id, spec.cell_id, spec.concurrency, spec.category, output_tokens, t_send=0.0,
                             **extra)

    def _request(self, output_tokens: int, **fields: Any) -> StreamRequest:
        return StreamRequest(self.model, output_tokens, stream_options=self.endpoint.adapter.stream_options(),
                             keep_chunk_times=self.plan.record_chunks, server_timings=self.endpoint.adapter.server_timings,
                             **fields)

    async def decode(self, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """`concurrency` streams, each sending its next request when the last one finished, until the cell
        has its requests (and, with `min_s`, has lasted that long)."""
        extras = self.endpoint.extras(spec.output_tokens)
        records: list[RequestRecord] = []
        started = time.monotonic()

        def more() -> bool:
            if len(records) < spec.n_requests:
                return True
            return spec.min_s is not None and len(records) < spec.max_requests and \
                time.monotonic() - started < spec.min_s

        async def stream() -> None:
            while more():
                i = len(records)
                record = self._record(spec, f"{spec.cell_id}-{i}", spec.output_tokens)
                records.append(record)
                await stream_request(self.openai, record, await self._decode_request(spec, i, extras))
                on_done()

        await asyncio.gather(*(stream() for _ in range(spec.concurrency)))
        return records

    async def _decode_request(self, spec: CellSpec, i: int, extras: dict[str, Any]) -> StreamRequest:
        """Chat prompts from the category's corpus, or, when the plan sets prompt_tokens, token prompts of exactly
        that length that share no prefix; `structured` asks for JSON under a json_schema."""
        tag = f"{self.tag}:{spec.cell_id}:{i}"
        if spec.category == "structured":
            # No forced length under a grammar: an engine that must not stop where the JSON ends fails the request.
            free = {k: v for k, v in extras.items() if k not in ("ignore_eos", "min_tokens")}
            return self._request(spec.output_tokens, messages=structured_prompt(i, tag),
                                 extra_body={**free, "response_format": structured_format(spec.output_tokens)})
        if spec.prompt_tokens is None:
            return self._request(spec.output_tokens, messages=decode_prompt(spec.category, i, tag), extra_body=extras)
        prompt = await self.unique_prompt(spec.category, spec.prompt_tokens, tag)
        return self._request(spec.output_tokens, prompt=prompt, extra_body=extras)

    async def filler(self, category: str) -> list[int]:
        if category not in self._fillers:
            text = filler_text() if category == "prose" else "\n\n".join(corpus(category))
            self._fillers[category] = await self.tokenize(text)
        return self._fillers[category]

    async def unique_prompt(self, category: str, length: int, tag: str) -> list[int]:
        """Exactly `length` tokens whose first token no other prompt of this run starts with."""
        if not self._openers:
            # Engines reuse the longest cached common prefix, even a single token, so the
            # first token of every prompt differs from the first token of every other.
            self._openers = sorted(set(await self.filler("prose")))
        opener = self._openers[self._prefill_count % len(self._openers)]
        self._prefill_count += 1
        prefix = [opener] + await self.tokenize(f" [{tag}]\n")
        return exact_length_prompt(await self.filler(category), prefix, length)

    async def waves(self, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Bursts of `concurrency` requests sent at once; the next burst when the last one finished."""
        extras = self.endpoint.extras(spec.output_tokens)
        records: list[RequestRecord] = []
        length = spec.prompt_tokens or 0

        async def one(i: int, prompt: list[int]) -> None:
            record = self._record(spec, f"{spec.cell_id}-{i}", spec.output_tokens)
            records.append(record)
            await stream_request(self.openai, record, self._request(spec.output_tokens, prompt=prompt,
                                                                    extra_body=extras))
            on_done()

        for wave in range(spec.n_requests // spec.concurrency):
            ids = [wave * spec.concurrency + k for k in range(spec.concurrency)]
            # Prompts are built before the burst, so the burst itself is only sends.
            prompts = [await self.unique_prompt(spec.category, length, f"{self.tag}:{spec.cell_id}:{i}")
                       for i in ids]
            await asyncio.gather(*(one(i, prompt) for i, prompt in zip(ids, prompts)))
        return records

    async def reuse(self, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Conversations one after another; each turn resends the conversation so far plus `turn_tokens`."""
        reuse = self.plan.reuse
        assert reuse is not None  # a reuse cell exists only when the plan has a reuse section
        extras = self.endpoint.extras(spec.output_tokens)
        filler = await self.filler("prose")
        records: list[RequestRecord] = []
        for conversation in range(reuse.conversations):
            prompt = await self.unique_prompt("prose", reuse.first_prompt_tokens,
                                              f"{self.tag}:{spec.cell_id}:conversation-{conversation}")
            offset = conversation * 7919
            for turn in range(1, reuse.turns + 1):
                record = self._record(spec, f"{spec.cell_id}-{conversation}-{turn}", spec.output_tokens, turn=turn,
                                      conversation=conversation)
                records.append(record)
                await stream_request(self.openai, record, self._request(spec.output_tokens, prompt=list(prompt),
                                                                        extra_body=extras))
                on_done()
                start = (offset + turn * reuse.turn_tokens) % max(1, len(filler) - reuse.turn_tokens)
                prompt += filler[start:start + reuse.turn_tokens]
        return records

    async def prefill(self, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        extras = self.endpoint.extras(1)
        records: list[RequestRecord] = []
        started = time.monotonic()
        length = spec.prompt_tokens or 0
        while len(records) < spec.n_requests or (spec.min_s is not None and len(records) < spec.max_requests
                                                 and time.monotonic() - started < spec.min_s):
            i = len(records)
            prompt = await self.unique_prompt("prose", length, f"{self.tag}:{spec.cell_id}:{i}")
            record = self._record(spec, f"{spec.cell_id}-{i}", 1)
            await stream_request(self.openai, record, self._request(1, prompt=prompt, extra_body=extras))
            records.append(record)
            on_done()
        return records

    async def load(self, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Requests sent on the plan's schedule at `spec.rate`, whatever the engine's pace: each waits for its due
        time, not for other requests. Prompts are built first, so that sending is all the cell does."""
        assert self.plan.load is not None and spec.rate is not None  # a load cell exists only with a load section
        plan = load_for(spec, self.plan.load)
        if plan.trace and self._trace is None:
            self._trace = read_trace(plan.trace)  # once per run, not once per cell
        arrivals = schedule(plan, spec.rate, self._trace)
        prompts = [await self.unique_prompt("prose", max(a.prompt_tokens, 32), f"{self.tag}:{spec.cell_id}:{i}")
                   for i, a in enumerate(arrivals)]
        sends = [Send(self._record(spec, f"{spec.cell_id}-{i}", a.output_tokens, t_due=a.due_s, measured=a.measured),
                      self._request(a.output_tokens, prompt=prompt, extra_body=self.endpoint.extras(a.output_tokens)))
                 for i, (a, prompt) in enumerate(zip(arrivals, prompts))]
        processes = processes_for(spec.rate, plan.client_processes, output_tokens=plan.output_tokens.mean)
        if processes > 1:
            connection = Connection(self.endpoint.base_url, self.endpoint.api_key, dict(self.endpoint.auth),
                                    self.plan.request_timeout_s)
            records = await self.senders.send(connection, sends, processes, on_done=on_done)
        else:
            start = time.monotonic() + 0.05
            for item in sends:
                item.record.t_due = start + (item.record.t_due or 0.0)
            await send_on_schedule(self.openai, sends, on_done=on_done)
            records = [item.record for item in sends]
        return sorted(records, key=lambda r: r.t_due or 0.0)

