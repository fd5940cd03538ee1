"""Waves: bursts of requests sent at once, typically more than the candidate has slots; the queue wait shows in
TTFT and in aggregate throughput."""

from __future__ import annotations

import asyncio
from typing import Any

from ...config.plan import Plan
from ..contract import CellSpec, OnDone, Requests
from ..figures.stats import completion_of, wall_of
from ..transport.client import RequestRecord
from ..validity import CellChecks
from .base import KindBase
from .registry import register


class Wave(KindBase):
    name = "wave"
    order = 40
    checks = CellChecks(unshared_prompts=True)
    reports_slo = True
    by_concurrency = True

    def cells(self, plan: Plan) -> list[CellSpec]:
        waves = plan.waves
        if not waves:
            return []
        return [CellSpec(f"wave-c{c}", "wave", "prose", c, c * waves.waves, waves.output_tokens, waves.prompt_tokens)
                for c in waves.concurrency]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Bursts of `concurrency` requests sent at once; the next burst when the last one finished."""
        extras = workloads.endpoint.extras(spec.output_tokens)
        records: list[RequestRecord] = []
        length = spec.prompt_tokens or 0

        async def one(record: RequestRecord, prompt: list[int]) -> None:
            records.append(record)
            await workloads.stream(record, workloads.request(spec.output_tokens, prompt=prompt,
                                                                             extra_body=extras))
            on_done()

        for wave in range(spec.n_requests // spec.concurrency):
            burst = [workloads.record(spec, f"{spec.cell_id}-{i}", spec.output_tokens)
                     for i in range(wave * spec.concurrency, (wave + 1) * spec.concurrency)]
            # Prompts are built before the burst, so the burst itself is only sends.
            prompts = [await workloads.unique_prompt(spec.category, length, f"{workloads.tag}:{r.request_id}", r)
                       for r in burst]
            await asyncio.gather(*(one(r, prompt) for r, prompt in zip(burst, prompts, strict=True)))
        return records

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        wall = wall_of(records)
        return {"aggregate_tok_s": completion_of(records) / wall if wall else None,
                "slots": slots, "queued": max(0, spec.concurrency - slots) if slots else None}

    def label(self, spec: CellSpec) -> str:
        return f"waves of {spec.concurrency} requests"

    def line(self, summary: dict[str, Any]) -> str | None:
        aggregate = summary.get("aggregate_tok_s")
        if not aggregate:
            return None
        return f"{aggregate:.1f} tok/s aggregate, TTFT p90 {(summary.get('ttft_p90_s') or 0) * 1000:.0f} ms"


register(Wave())
