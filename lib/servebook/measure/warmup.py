"""Warming an engine up until it is steady, not for a fixed count.

A fixed number of warm-up requests is either too few (CUDA graphs for larger batches, allocator growth and
page faults still land in the first cell) or wasted time. After the plan's fixed requests, bursts at the
decode plan's highest concurrency are sent until two bursts in a row agree on their aggregate decode rate
within the plan's tolerance, or the plan's limit on bursts is reached; each burst's rate is kept with the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from .transport.client import RequestRecord

Burst = Callable[[int], Awaitable[list[RequestRecord]]]


def burst_rate(records: Sequence[RequestRecord]) -> float | None:
    """Aggregate completion tokens per second over one burst: first send to last token; None if any failed."""
    if not records or any(r.error or r.t_last is None or r.completion_tokens is None for r in records):
        return None
    span = max(r.t_last for r in records if r.t_last is not None) - min(r.t_send for r in records)
    tokens = sum(r.completion_tokens or 0 for r in records)
    return tokens / span if span > 0 else None


def is_steady(rates: Sequence[float], within_pct: float) -> bool:
    """The last two bursts agree within `within_pct` percent of the slower one."""
    if len(rates) < 2:
        return False
    previous, last = rates[-2], rates[-1]
    return abs(last - previous) <= within_pct / 100 * min(previous, last)


@dataclass
class WarmupTrace:
    """What warming up took: each burst's aggregate decode rate, and whether the engine became steady."""

    concurrency: int
    rates: list[float] = field(default_factory=list)
    steady: bool = False

    def describe(self) -> str:
        rates = ", ".join(f"{r:.0f}" for r in self.rates)
        state = f"steady after {len(self.rates)} bursts" if self.steady else f"not steady after {len(self.rates)} bursts"
        return f"warm-up at {self.concurrency} streams: {state} ({rates} tok/s)"


async def warm_until_steady(burst: Burst, concurrency: int, *, within_pct: float, max_bursts: int) -> WarmupTrace:
    """Send bursts of `concurrency` streams until `is_steady` or `max_bursts`; a failed burst raises via `burst`."""
    trace = WarmupTrace(concurrency)
    for index in range(max_bursts):
        rate = burst_rate(await burst(index))
        if rate is None:
            continue
        trace.rates.append(rate)
        if is_steady(trace.rates, within_pct):
            trace.steady = True
            break
        await asyncio.sleep(0)
    return trace
