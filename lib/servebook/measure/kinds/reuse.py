"""Prompt reuse: agent-style conversations whose every turn resends the conversation so far and appends to it."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...config.plan import Plan
from ..contract import CellSpec, OnDone, Requests
from ..figures.stats import ok_records, reuse_summary
from ..transport.client import RequestRecord
from .base import KindBase
from .registry import register


class Reuse(KindBase):
    name = "reuse"
    order = 30
    within_columns: Mapping[str, str] = MappingProxyType({"next_turn_ttft_s": "next_turn_within_se_pct"})

    def cells(self, plan: Plan) -> list[CellSpec]:
        reuse = plan.reuse
        if not reuse:
            return []
        return [CellSpec("reuse", "reuse", "prose", 1, reuse.conversations * reuse.turns, reuse.output_tokens,
                         reuse.first_prompt_tokens)]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Conversations one after another; each turn resends the conversation so far plus `turn_tokens`."""
        reuse = workloads.plan.reuse
        assert reuse is not None  # a reuse cell exists only when the plan has a reuse section
        extras = workloads.endpoint.extras(spec.output_tokens)
        filler = await workloads.filler("prose")
        records: list[RequestRecord] = []
        for conversation in range(reuse.conversations):
            prompt = await workloads.unique_prompt("prose", reuse.first_prompt_tokens,
                                                   f"{workloads.tag}:{spec.cell_id}:conversation-{conversation}")
            offset = conversation * 7919
            before: RequestRecord | None = None
            for turn in range(1, reuse.turns + 1):
                record = workloads.record(spec, f"{spec.cell_id}-{conversation}-{turn}", spec.output_tokens,
                                          turn=turn, conversation=conversation, ideal_cached_tokens=_ideal(before))
                records.append(record)
                before = record
                await workloads.stream(record, workloads.request(
                    spec.output_tokens, prompt=list(prompt), extra_body=extras))
                on_done()
                start = (offset + turn * reuse.turn_tokens) % max(1, len(filler) - reuse.turn_tokens)
                prompt += filler[start:start + reuse.turn_tokens]
        return records

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        return reuse_summary(ok_records(records))

    def label(self, spec: CellSpec) -> str:
        return f"prompt reuse, {spec.n_requests} turns"

    def line(self, summary: dict[str, Any]) -> str | None:
        if summary.get("next_turn_ttft_s") is None:
            return None
        share = summary.get("cached_share")
        return (f"next-turn TTFT {(summary.get('next_turn_ttft_s') or 0) * 1000:.0f} ms, "
                f"{'-' if share is None else f'{share:.0%}'} of it cached")


def _ideal(before: RequestRecord | None) -> int | None:
    """What a perfect prefix cache serves of a turn: the turn before's whole prompt, which this one extends (its
    reply is not resent); none of the first turn, whose opening no other prompt shares; unknown after a turn whose
    prompt the engine did not count."""
    if before is None:
        return 0
    return before.prompt_tokens if before.ok else None


register(Reuse())
