"""Decode: closed-loop streams at a concurrency with a forced output length, per prompt category."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ...config.plan import Plan
from ..contract import CellSpec, OnDone, Requests
from ..figures.itl import itl_figures
from ..figures.stats import completion_of, decode_rates_of, se_pct, steady_state, wall_of
from ..prompts import completion_prompt, decode_prompt, structured_format, structured_prompt
from ..transport.client import RequestRecord, StreamRequest
from ..validity import CellChecks
from .base import KindBase
from .registry import register


class Decode(KindBase):
    name = "decode"
    order = 10
    headline: str | None = "aggregate_tok_s"
    checks = CellChecks(unshared_prompts=True)
    reports_slo = True
    by_concurrency = True

    def cells(self, plan: Plan) -> list[CellSpec]:
        decode = plan.decode
        if not decode:
            return []
        return [CellSpec(f"decode-{category}-c{c}", "decode", category, c, c * decode.rounds, decode.output_tokens,
                         prompt_tokens=decode.prompt_tokens, min_s=decode.min_cell_s, slices=decode.slices)
                for category in decode.categories for c in decode.concurrency]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """`concurrency` streams, each sending its next request when the last one finished, until the cell
        has its requests (and, with `min_s`, has lasted that long). A sliced cell does that in `slices` equal
        shares of requests and time, handing the round's turn on between them (workloads.handover)."""
        extras = workloads.endpoint.extras(spec.output_tokens)
        records: list[RequestRecord] = []
        share = spec.n_requests // spec.slices
        for index in range(spec.slices):
            if index:
                await workloads.handover(index)
            await _closed_loop(workloads, spec, records, extras, on_done, slice_index=index,
                               until=len(records) + share, longest=len(records) + spec.max_requests // spec.slices)
        return records

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        wall = wall_of(records)
        return {"aggregate_tok_s": completion_of(records) / wall if wall else None,
                **steady_state(records, spec.concurrency), "within_se_pct": se_pct(decode_rates_of(records)),
                **itl_figures(records)}

    def label(self, spec: CellSpec) -> str:
        return f"decode {spec.category} x{spec.concurrency}"

    def line(self, summary: dict[str, Any]) -> str | None:
        aggregate = summary.get("aggregate_tok_s")
        return f"{aggregate:.1f} tok/s aggregate" if aggregate else None


async def _closed_loop(workloads: Requests, spec: CellSpec, records: list[RequestRecord], extras: dict[str, Any],
                       on_done: OnDone, *, slice_index: int, until: int, longest: int) -> None:
    """One slice: `concurrency` streams until `records` holds `until` requests and the slice has lasted its share
    of min_s (never beyond `longest` requests)."""
    started = time.monotonic()
    min_s = spec.min_s / spec.slices if spec.min_s is not None else None

    def more() -> bool:
        if len(records) < until:
            return True
        return min_s is not None and len(records) < longest and time.monotonic() - started < min_s

    async def stream() -> None:
        while more():
            i = len(records)
            record = workloads.record(spec, f"{spec.cell_id}-{i}", spec.output_tokens, slice_index=slice_index)
            records.append(record)
            await workloads.stream(record, await _request(workloads, spec, i, extras, record))
            on_done()

    await asyncio.gather(*(stream() for _ in range(spec.concurrency)))


async def _request(workloads: Requests, spec: CellSpec, i: int, extras: dict[str, Any],
                   record: RequestRecord) -> StreamRequest:
    """Chat prompts from the category's corpus, or, when the plan sets prompt_tokens, token prompts of exactly
    that length that share no prefix; `structured` asks for JSON under a json_schema."""
    tag = f"{workloads.tag}:{spec.cell_id}:{i}"
    if spec.category == "structured":
        # No forced length under a grammar: an engine that must not stop where the JSON ends fails the request.
        free = {k: v for k, v in extras.items() if k not in ("ignore_eos", "min_tokens")}
        return workloads.request(spec.output_tokens, messages=structured_prompt(i, tag), keep_text=True,
                                 extra_body={**free, "response_format": structured_format(spec.output_tokens)})
    if spec.prompt_tokens is None and workloads.plan.decode and workloads.plan.decode.prompt_style == "completion":
        return workloads.request(spec.output_tokens, prompt=completion_prompt(spec.category, i, tag),
                                 extra_body=extras, keep_text=True)
    if spec.prompt_tokens is None:
        return workloads.request(spec.output_tokens, messages=decode_prompt(spec.category, i, tag),
                                 extra_body=extras, keep_text=True)
    prompt = await workloads.unique_prompt(spec.category, spec.prompt_tokens, tag, record)
    return workloads.request(spec.output_tokens, prompt=prompt, extra_body=extras, keep_text=True)


register(Decode())
