"""Per-request statistics the cell kinds summarise their requests with (measure/kinds/)."""

from __future__ import annotations

import math
import statistics

from ..transport.client import RequestRecord


def ok_records(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok]


def by_slice(records: list[RequestRecord]) -> list[list[RequestRecord]]:
    """A cell's requests per slice, in order; an unsliced cell is one slice."""
    slices: dict[int, list[RequestRecord]] = {}
    for r in records:
        slices.setdefault(r.slice_index, []).append(r)
    return [slices[i] for i in sorted(slices)]


def _span(records: list[RequestRecord]) -> float | None:
    sends = [r.t_send for r in records]
    ends = [r.t_last for r in records if r.ok and r.t_last is not None]
    return (max(ends) - min(sends)) if ends and sends else None


def wall_of(records: list[RequestRecord]) -> float | None:
    """First send to last finish of the cell's requests that finished; for a sliced cell, the sum over its slices
    (between them the round's other seats measured, which is not this cell's time)."""
    spans = [s for s in (_span(part) for part in by_slice(records)) if s is not None]
    return sum(spans) if spans else None


def slice_windows(records: list[RequestRecord]) -> list[tuple[float, float]]:
    """Each slice's first send and last finish: the times the cell itself ran."""
    out = []
    for part in by_slice(records):
        ends = [r.t_last for r in part if r.t_last is not None]
        if part and ends:
            out.append((min(r.t_send for r in part), max(ends)))
    return out


def completion_of(records: list[RequestRecord]) -> int:
    return sum(r.completion_tokens or 0 for r in records if r.ok)


def ttfts_of(records: list[RequestRecord]) -> list[float]:
    return [r.ttft for r in records if r.ok and r.ttft is not None]


def prefill_rates_of(records: list[RequestRecord]) -> list[float]:
    return [r.prompt_tokens / r.ttft for r in records if r.ok and r.ttft and r.prompt_tokens]


def decode_rates_of(records: list[RequestRecord]) -> list[float]:
    return [r.decode_rate for r in records if r.ok and r.decode_rate is not None]


def median_of(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def se_pct(values: list[float]) -> float | None:
    """Per-request values' standard error of their mean, in percent of it."""
    values = [v for v in values if v > 0 and math.isfinite(v)]
    if len(values) < 2:
        return None
    return 100 * statistics.stdev(values) / statistics.fmean(values) / math.sqrt(len(values))


def steady_state(records: list[RequestRecord], concurrency: int) -> dict:
    """The steady state of each slice, their windows and tokens added up (a sliced cell's gaps are other seats')."""
    parts = [_steady_state(part, concurrency) for part in by_slice(records)]
    if len(parts) == 1:
        return parts[0]
    if any(p["steady_s"] is None for p in parts):
        return {"steady_tok_s": None, "steady_s": None, "ramp_up_s": None, "ramp_down_s": None}
    seconds = sum(p["steady_s"] for p in parts)
    return {"steady_tok_s": sum(p["steady_tok_s"] * p["steady_s"] for p in parts) / seconds, "steady_s": seconds,
            "ramp_up_s": sum(p["ramp_up_s"] for p in parts), "ramp_down_s": sum(p["ramp_down_s"] for p in parts)}


def _steady_state(records: list[RequestRecord], concurrency: int) -> dict:
    """The interval in which all `concurrency` requests were in flight, and the output rate inside it.

    The window opens when the c-th request is in flight and closes when, for the last time, one of
    c in-flight requests finishes; ramp-up (streams starting) and ramp-down (streams draining) are
    reported as their durations. Tokens are attributed to the window by each request's decode span
    (completion tokens spread evenly from first to last token), so no chunk timings are needed.
    """
    ok = [r for r in records if r.ok and r.t_last is not None]
    ends = [(r, r.t_last) for r in ok if r.t_last is not None]
    empty = {"steady_tok_s": None, "steady_s": None, "ramp_up_s": None, "ramp_down_s": None}
    if not ok:
        return empty
    events = sorted([(r.t_send, 1) for r in ok] + [(t, -1) for _, t in ends], key=lambda e: (e[0], -e[1]))
    in_flight, opened, closed = 0, None, None
    for t, step in events:
        if step < 0 and in_flight == concurrency:
            closed = t
        in_flight += step
        if in_flight == concurrency and opened is None:
            opened = t
    if opened is None or closed is None or closed <= opened:
        return empty
    tokens = 0.0
    for r, last in ends:
        if r.t_first is None or r.completion_tokens is None or r.completion_tokens < 2 or last <= r.t_first:
            continue
        overlap = min(last, closed) - max(r.t_first, opened)
        if overlap > 0:
            tokens += (r.completion_tokens - 1) * overlap / (last - r.t_first)
    first_send, last_end = min(r.t_send for r in ok), max(t for _, t in ends)
    return {"steady_tok_s": tokens / (closed - opened), "steady_s": closed - opened,
            "ramp_up_s": opened - first_send, "ramp_down_s": last_end - closed}


def total_reported(records: list[RequestRecord], field: str) -> int | None:
    """The sum of a usage field over requests, or None when any response left it out (never a silent 0)."""
    values = [getattr(r, field) for r in records]
    return None if any(v is None for v in values) else sum(values)


def reuse_summary(records: list[RequestRecord]) -> dict:
    """First-turn against next-turn TTFT, and how much of each next turn's prompt came from the cache."""
    first = [r for r in records if r.turn == 1]
    later = [r for r in records if r.turn is not None and r.turn > 1]
    cached = total_reported(later, "cached_tokens")
    prompt = total_reported(later, "prompt_tokens")
    return {"first_turn_ttft_s": median_of([r.ttft for r in first if r.ttft is not None]),
            "next_turn_ttft_s": median_of([r.ttft for r in later if r.ttft is not None]),
            "next_turn_within_se_pct": conversations_se_pct([(r.conversation, r.ttft) for r in later]),
            "cached_share": cached / prompt if cached is not None and prompt else None}


def conversations_se_pct(turns: list[tuple[int | None, float | None]]) -> float | None:
    """The standard error of a next-turn figure from its conversations, in percent: each conversation's mean, then
    their spread. A conversation's turns are no independent draws: on vLLM 8B, one conversation's next turns sat
    at 24-28 ms and the next one's at 38-40 ms within the same launch (2026-12-06), so the turns counted as
    independent would understate the error by a third."""
    by_conversation: dict[int | None, list[float]] = {}
    for conversation, ttft in turns:
        if ttft is not None and ttft > 0 and math.isfinite(ttft):
            by_conversation.setdefault(conversation, []).append(ttft)
    return se_pct([statistics.fmean(values) for values in by_conversation.values()])
