"""Trace replay: a request trace sent at its own (scaled) arrivals, its shared prompt blocks sharing their tokens."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from ....config.load import ReplayPlan
from ....config.plan import Plan
from ....config.traces import TraceRow, ideal_cached, read_rows, replayed
from ...contract import CellSpec, OnDone, Requests, Window
from ...transport.client import RequestRecord
from ...transport.senders import EngineWatch, Send, send_on_schedule
from ...validity import CellChecks
from ..base import KindBase
from ..registry import register
from .blocks import make_blocks, replay_figures, run_salt


@lru_cache(maxsize=4)
def _replayed(plan: ReplayPlan) -> tuple[TraceRow, ...]:
    """The requests the section replays, read once per process (a trace on object storage is fetched once, not
    for the plan's cells, then the send, then the summary)."""
    return tuple(replayed(read_rows(plan.trace), plan))


def _rows(plan: Plan) -> list[TraceRow]:
    assert plan.replay is not None  # a replay cell exists only with a replay section
    return list(_replayed(plan.replay))


class Replay(KindBase):
    name = "replay"
    order = 55
    checks = CellChecks(per_request_lengths=True)
    reports_slo = True  # attainment of plan.slo over the replayed requests, goodput per second of the trace

    def cells(self, plan: Plan) -> list[CellSpec]:
        if not plan.replay:
            return []
        rows = _rows(plan)
        return [CellSpec("replay", "replay", "prose", 0, len(rows), max(r.output_tokens for r in rows),
                         max(r.input_tokens for r in rows))]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Every request at its due time, whatever the engine's pace; prompts are built first (from the run's
        blocks, measure.kinds.replay.blocks), so that sending is all the cell does."""
        plan = workloads.plan.replay
        assert plan is not None
        rows = _rows(workloads.plan)
        # a salt per attempt: a cell measured again (remeasure_disturbed) must not find the first attempt's blocks
        attempt = workloads.cache["replay_attempts"] = workloads.cache.get("replay_attempts", 0) + 1
        blocks = make_blocks(await workloads.filler("prose"), run_salt(f"{workloads.tag}:{spec.cell_id}:{attempt}"))
        endpoint = workloads.endpoint
        cached = ideal_cached(rows, plan.block_tokens)
        ideal: list[int | None] = [None] * len(rows) if cached is None else list(cached)
        sends = [Send(workloads.record(spec, f"{spec.cell_id}-{i}", row.output_tokens, t_due=row.arrival_s,
                                       ideal_cached_tokens=ideal[i]),
                      workloads.request(row.output_tokens, prompt=blocks.prompt(row, i, plan.block_tokens),
                                        extra_body=endpoint.extras(row.output_tokens)))
                 for i, row in enumerate(rows)]
        start = time.monotonic() + 0.05  # after building the prompts
        for item, row in zip(sends, rows, strict=True):
            item.record.t_due = start + row.arrival_s
        sent = await send_on_schedule(workloads.openai, sends, on_done=on_done, watch=EngineWatch(workloads.alive_check))
        return sorted(sent, key=lambda r: r.t_due or 0.0)

    def window(self, spec: CellSpec, records: list[RequestRecord], plan: Plan) -> Window | None:
        """Every request of the cell is measured; the window's own figures are the hit rates, ideal and measured."""
        if not plan.replay:
            return None
        rows = _rows(plan)
        figures = replay_figures(rows, records, plan.replay)
        return Window(figures, records, figures["trace_span_s"] or None)

    def lag_limit_ms(self, plan: Plan) -> float | None:
        return plan.replay.max_lag_ms if plan.replay else None

    def label(self, spec: CellSpec) -> str:
        return f"trace replay, {spec.n_requests} requests"

    def line(self, summary: dict[str, Any]) -> str | None:
        ideal, measured = summary.get("ideal_hit_rate"), summary.get("measured_hit_rate")
        if measured is None:
            return None
        return (f"prefix hit rate {measured:.0%} measured, {'-' if ideal is None else f'{ideal:.0%}'} ideal; "
                f"TTFT p50 {(summary.get('ttft_s') or 0) * 1000:.0f} ms")


register(Replay())
