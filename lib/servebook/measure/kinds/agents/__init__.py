"""Concurrent agent sessions: open-loop arrivals of sessions whose turns resend a history that grows with the
engine's replies, tool schemas in every request, tool results after a think time, sub-agents sharing a prefix."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ....config.agents import AgentsPlan
from ....config.plan import Plan
from ...contract import CellSpec, OnDone, Requests
from ...transport.client import RequestRecord
from ...validity import CellChecks
from ..base import KindBase
from ..registry import register
from .agenda import SessionAgenda, agenda, turn_count
from .session_figures import agents_figures
from .sessions import send_sessions


@lru_cache(maxsize=4)
def _agenda(plan: AgentsPlan) -> tuple[SessionAgenda, ...]:
    return tuple(agenda(plan))


class Agents(KindBase):
    name = "agents"
    order = 57  # after trace replay
    headline: str | None = "session_p95_turn_ttft_s"
    checks = CellChecks(per_request_lengths=True, session_turns=True)

    def cells(self, plan: Plan) -> list[CellSpec]:
        section = plan.agents
        if section is None:
            return []
        sessions = _agenda(section)
        return [CellSpec("agents", "agents", "prose", section.sessions, turn_count(list(sessions)),
                         section.output_tokens.longest, section.system_tokens + section.tool_schema_tokens
                         + section.repo_map_tokens, rate=section.arrival_rate_per_s)]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        return await send_sessions(workloads, spec, on_done)

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        return agents_figures(records)

    def lag_limit_ms(self, plan: Plan) -> float | None:
        return plan.agents.max_lag_ms if plan.agents else None

    def label(self, spec: CellSpec) -> str:
        return f"agent sessions, {spec.concurrency} arriving at {spec.rate or 0:g}/s, {spec.n_requests} turns"

    def line(self, summary: dict[str, Any]) -> str | None:
        p95 = summary.get("session_p95_turn_ttft_s")
        if p95 is None:
            return None
        ideal, measured = summary.get("ideal_hit_rate"), summary.get("measured_hit_rate")
        rate = "-" if measured is None else f"{measured:.0%}"
        return (f"session p95 turn TTFT {1000 * p95:.0f} ms, {summary.get('session_turns_per_s') or 0:.2f} turns/s "
                f"per session; prefix hit rate {rate} measured, {'-' if ideal is None else f'{ideal:.0%}'} ideal")


register(Agents())
