"""The figures of an agents cell, from its turns: per turn, per session, and the cell's own.

A session here is a parent with its sub-agents (their turns are part of what the parent's user waits through; the
parent waits for them). Its duration runs from its first turn's send to its last turn's finish.

- session_p95_turn_ttft_s: per session, the 95th percentile (nearest rank) of its turns' TTFTs; the cell's figure
  is the median over sessions: the slow turns a typical session meets.
- session_turns_per_s: per session, its turns over its duration; the median over sessions.
- ideal / measured hit rate: ideal cached tokens (measure.kinds.agents.sessions) over prompt tokens, and cached over prompt
  tokens as the responses report them (the engine's counter is reconciled with their sum), over the turns that
  were served.
- overflow share: turns that did not fit the context over all turns; parse-failure share: asked tool calls that
  did not parse over those asked.
"""

from __future__ import annotations

import statistics
from typing import Any

from ...figures.stats import median_of, se_pct, total_reported
from ...openloop import percentile
from ...transport.client import RequestRecord


def root_of(r: RequestRecord) -> int:
    """The parent session a turn belongs to (a sub-agent's turns are its parent's)."""
    return r.parent_conversation if r.parent_conversation is not None else (r.conversation or 0)


def sessions_of(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    out: dict[int, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(root_of(r), []).append(r)
    return dict(sorted(out.items()))


def session_row(session: int, turns: list[RequestRecord]) -> dict[str, Any]:
    """One session's figures: its turns, duration, rate of turns, tokens and its p95 turn TTFT."""
    ok = [r for r in turns if r.ok]
    ends = [r.t_last for r in ok if r.t_last is not None]
    duration = max(ends) - min(r.t_send for r in turns) if ends else None
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    return {"session": session, "turns": len(turns), "subagents": len({r.conversation for r in turns} - {session}),
            "duration_s": duration, "turns_per_s": len(ok) / duration if duration else None,
            "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
            "cached_tokens": sum(r.cached_tokens or 0 for r in ok),
            "completion_tokens": sum(r.completion_tokens or 0 for r in ok),
            "p95_turn_ttft_s": percentile(ttfts, 0.95),
            "overflowed": any(r.context_overflow for r in turns), "failed": any(not r.ok for r in turns)}


def hit_rates(records: list[RequestRecord]) -> tuple[float | None, float | None]:
    """(ideal, measured) prefix hit rates over the served turns; None where a turn's figure is not known."""
    ok = [r for r in records if r.ok]
    prompt = total_reported(ok, "prompt_tokens")
    if not prompt:
        return None, None
    ideal, cached = total_reported(ok, "ideal_cached_tokens"), total_reported(ok, "cached_tokens")
    return (None if ideal is None else ideal / prompt), (None if cached is None else cached / prompt)


def agents_figures(records: list[RequestRecord]) -> dict[str, Any]:
    """The cell's own figures from its turns."""
    rows = [session_row(s, turns) for s, turns in sessions_of(records).items()]
    ok = [r for r in records if r.ok]
    ideal, measured = hit_rates(records)
    asked = [r for r in records if r.tool_call_parsed is not None]
    lags = [max(0.0, r.t_send - r.t_due) for r in records if r.t_due is not None]
    turn_ttfts = [r.ttft for r in ok if r.ttft is not None]
    p95s = [row["p95_turn_ttft_s"] for row in rows if row["p95_turn_ttft_s"] is not None]
    return {
        "sessions": len(rows), "subagents": sum(row["subagents"] for row in rows), "turns": len(records),
        "session_p95_turn_ttft_s": median_of(p95s),
        # the within-run error of the headline figure: the sessions', not the turns' (their spread over sessions)
        "within_se_pct": se_pct(p95s),
        "session_turns_per_s": median_of([row["turns_per_s"] for row in rows if row["turns_per_s"] is not None]),
        "session_duration_s": median_of([row["duration_s"] for row in rows if row["duration_s"] is not None]),
        "session_tokens": median_of([float(row["prompt_tokens"] + row["completion_tokens"]) for row in rows]),
        "turn_ttft_p95_s": percentile(turn_ttfts, 0.95),
        "ideal_hit_rate": ideal, "measured_hit_rate": measured,
        "context_tokens_max": max((r.prompt_tokens or 0 for r in ok), default=None),
        "overflow_share": sum(r.context_overflow for r in records) / len(records) if records else None,
        "parse_failure_share": (sum(not r.tool_call_parsed for r in asked) / len(asked)) if asked else None,
        "send_lag_p50_ms": None if not lags else 1000 * statistics.median(lags),
        "send_lag_p99_ms": None if not lags else 1000 * (percentile(lags, 0.99) or 0.0),
    }
