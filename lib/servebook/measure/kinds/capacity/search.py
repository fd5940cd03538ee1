"""Capacity under objectives: the highest request rate at which a share of requests still meets them.

The search spends probes where they decide: steps of x4 from the low end until the objectives fail, then
geometric bisection of the bracket. The answer is read from every probe afterwards, not from the last one:
attainment is fitted as a non-increasing function of the rate (isotonic regression, weighted by requests), so
a noisy probe cannot put a hole in the curve. The capacity is where that fit crosses the target, between the
last probe that holds and the next. Its interval runs from the highest rate that certainly holds (the probe's
exact binomial interval above the target) to the lowest that certainly fails. A capacity whose next probe
collapses (attainment below half the target within the search's precision) is a cliff: a little more load
and most users miss.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ....config.load import CapacitySearch


@dataclass(frozen=True)
class Probe:
    rate: float
    requests: int
    attainment: float | None
    low: float | None  # exact 95% binomial interval of the attainment
    high: float | None
    valid: bool = True
    #: the client could not offer this load (client_lag): the search cannot tell anything above it
    client_limited: bool = False
    #: stalled reads dropped from the probe (disturbed by them alone): their latency is in doubt, so the attainment
    #: is the other requests', and the probe counts
    stalls_dropped: int = 0

    def holds(self, target: float) -> bool:
        return (self.valid or self.stalls_dropped > 0) and self.attainment is not None and self.attainment >= target

    def tells(self, target: float) -> bool:
        """Whether the probe says anything: a valid one does, and so does one whose stalled reads were dropped from
        it; so does one whose client fell behind if the objectives failed even so (the client offered less than
        asked, and the engine missed them anyway)."""
        return self.attainment is not None and (self.valid or self.stalls_dropped > 0
                                                or (self.client_limited and self.attainment < target))


def probe_counted(row: dict[str, Any]) -> bool:
    """Whether a probe's recorded row counted in its capacity (what `Probe.tells` said of it as it ran): valid, or
    its stalled requests dropped (`slo_dropped_requests`), or its client behind a load that failed anyway. A probe
    thrown out says neither "held" nor "missed" wherever it is shown."""
    codes = str(row.get("invalid_codes") or "").split(",")
    dropped = row.get("slo_dropped_requests")
    met = row.get("slo_met")
    return bool(row.get("valid")) or (dropped is not None and dropped == dropped and dropped > 0) \
        or ("client_lag" in codes and met is not None and met == met and not met)


#: the bracketing step: x4 reaches 1,024 from 1 in five probes, and geometric bisection narrows a x4 bracket to 5%
#: in five more, so a capacity anywhere in [1, 1024] requests/s is found within 5% in at most 11 probes
STEP = 4.0


class _Search:
    """One search's state: every probe so far, the highest rate the objectives held at and the lowest they failed."""

    def __init__(self, probe: Callable[[float, int], Awaitable[Probe]], spec: CapacitySearch, target: float):
        self.probe, self.spec, self.target = probe, spec, target
        self.probes: list[Probe] = []
        self.good: float | None = None
        self.bad: float | None = None

    async def holds(self, rate: float) -> bool | None:
        """Whether the objectives hold at `rate`; None when the client could not offer it (nothing is learnt, and
        nothing above it can be told). A probe invalid for another reason (a failed reconciliation, a busy host)
        says nothing either way: it is probed once more, and if that fails too the search ends there. Taking it as a
        failure sent a one-slot search on the tiny model down to 0.5 requests/s from a 2 requests/s probe whose
        requests had all met the objectives."""
        spec = self.spec
        narrowing = self.good is not None and self.bad is not None
        for _ in range(2):
            found = await self.probe(rate, spec.narrowing_requests if narrowing else spec.min_requests)
            self.probes.append(found)
            if found.client_limited and not found.tells(self.target):
                return None
            if found.valid or found.stalls_dropped or found.client_limited or len(self.probes) >= spec.max_probes:
                break
        if not found.tells(self.target):
            return None
        return found.holds(self.target)

    async def bracket(self) -> bool:
        """Steps of x4 from `low_rps`, up while the objectives hold and down while they fail; False where a probe
        could tell nothing, which ends the search."""
        spec, rate = self.spec, self.spec.low_rps
        while len(self.probes) < spec.max_probes:
            verdict = await self.holds(rate)
            if verdict is None:
                return False
            if verdict:
                self.good = rate
                if self.bad is not None or rate >= spec.high_rps:
                    break
                rate = min(rate * STEP, spec.high_rps)
            else:
                self.bad = rate
                if self.good is not None or rate <= spec.low_rps / STEP ** 3:
                    break
                rate = rate / STEP
        return True

    async def narrow(self) -> None:
        """Geometric bisection of the bracket until it is within the precision or the probes are spent."""
        spec = self.spec
        while self.good is not None and self.bad is not None and len(self.probes) < spec.max_probes \
                and (self.bad / self.good - 1) * 100 > spec.precision_pct:
            middle = math.sqrt(self.good * self.bad)
            verdict = await self.holds(middle)
            if verdict is None:
                return
            if verdict:
                self.good = middle
            else:
                self.bad = middle


async def search(probe: Callable[[float, int], Awaitable[Probe]], spec: CapacitySearch, target: float) -> list[Probe]:
    """Probe rates until the bracket [holds, fails] is within the precision or the probes are spent: steps of x4
    from `low_rps` (up while the objectives hold, down while they fail), then geometric bisection. `probe(rate,
    requests)` measures a window holding at least `requests` arrivals: `min_requests` while bracketing, where the
    objectives hold or fail by far, and `narrowing_requests` inside the bracket, where they are decided by the
    rare bursts a short window may not catch."""
    found = _Search(probe, spec, target)
    if await found.bracket():
        await found.narrow()
    return found.probes


def capacity_of(probes: list[Probe], target: float, precision_pct: float = 5.0) -> dict[str, Any]:
    """The capacity row's figures from every probe (see the module's doc)."""
    import numpy as np
    from scipy.optimize import isotonic_regression

    usable = sorted((p for p in probes if p.tells(target) and p.requests), key=lambda p: p.rate)
    empty = {"capacity_rps": None, "capacity_low_rps": None, "capacity_high_rps": None, "capacity_cliff": None,
             "capacity_probes": len(probes),
             "capacity_client_limited": any(p.client_limited and not p.tells(target) for p in probes)}
    if not usable:
        return empty
    fitted = isotonic_regression(np.array([p.attainment for p in usable]),
                                 weights=np.array([float(p.requests) for p in usable]), increasing=False).x
    holding = [i for i, f in enumerate(fitted) if f >= target]
    capacity = None
    if holding:
        # Between the last probe that holds and the next, where the fitted attainment crosses the target: the
        # probed rates alone would quantize every run of a candidate to the same grid point, and a verdict over
        # runs would see no spread at all.
        i = holding[-1]
        capacity = usable[i].rate
        if i + 1 < len(usable) and fitted[i] > fitted[i + 1]:
            share = (fitted[i] - target) / (fitted[i] - fitted[i + 1])
            capacity = float(usable[i].rate + share * (usable[i + 1].rate - usable[i].rate))
    certain = [p.rate for p in usable if p.low is not None and p.low >= target]
    failing = [p.rate for p in usable if p.high is not None and p.high < target and (capacity is None
                                                                                      or p.rate > capacity)]
    above = [(p, f) for p, f in zip(usable, fitted, strict=True) if capacity is not None and p.rate > capacity]
    cliff = bool(above) and bool(above[0][1] < target / 2 and
                                 (above[0][0].rate - (capacity or 0)) / max(capacity or 1e-9, 1e-9) * 100
                                 <= 2 * precision_pct)
    low = min(max(certain), capacity) if certain and capacity is not None else None
    return {**empty, "capacity_rps": capacity, "capacity_low_rps": low,
            "capacity_high_rps": min(failing) if failing else None,
            "capacity_cliff": cliff if capacity is not None else None}


def capacity_row(probes: list[Probe], rows: list[dict[str, Any]], target: float, precision_pct: float) -> dict[str, Any]:
    """The run's capacity as a row of cells.parquet (kind `capacity`), so that verdicts judge it like any cell:
    valid when its probes are (disturbed probes only limit the search), reconciled when they all are."""
    from ...validity import DISTURBANCES, only_disturbed

    codes = [[code for code in str(row.get("invalid_codes") or "").split(",") if code] for row in rows]
    faults = sorted({code for found in codes if not only_disturbed(found) for code in found
                     if code not in DISTURBANCES})
    reasons = "; ".join(str(row.get("invalid_reasons")) for row, found in zip(rows, codes, strict=True)
                        if set(found) & set(faults) and not only_disturbed(found))
    status = "ok" if all(row.get("reconciliation") == "ok" for row in rows) else \
        next(str(row.get("reconciliation")) for row in rows if row.get("reconciliation") != "ok")
    return {"cell_id": "capacity", "kind": "capacity", "category": "prose", "concurrency": 0,
            "requests": sum(p.requests for p in probes), "errors": sum(int(row.get("errors") or 0) for row in rows),
            "completion_tokens": sum(int(row.get("completion_tokens") or 0) for row in rows),
            **capacity_of(probes, target, precision_pct), "reconciliation": status,
            "reconciliation_message": f"{len(rows)} probes, each reconciled on its own",
            "valid": not faults, "invalid_codes": ",".join(faults), "invalid_reasons": reasons,
            "arrival_seed": next((row.get("arrival_seed") for row in rows), None)}


def figure(row: dict, key: str) -> float | None:
    """A capacity figure of a row, None where none was found: a row read back from cells.parquet holds NaN where
    the search wrote None, and NaN is neither None nor a rate."""
    value = row.get(key)
    return None if value is None or value != value else float(value)


def describe_capacity(row: dict, objectives: str) -> str:
    """'holds 11.8 requests/s [11.1, 12.4] at TTFT <= 2 s for 90% of requests (9 probes)'."""
    capacity = figure(row, "capacity_rps")
    if capacity is None:
        return f"the objectives ({objectives}) held at no probed rate ({int(figure(row, 'capacity_probes') or 0)} probes)"
    low, high = figure(row, "capacity_low_rps"), figure(row, "capacity_high_rps")
    interval = "" if low is None and high is None else \
        f" [{'-' if low is None else f'{low:.3g}'}, {'-' if high is None else f'{high:.3g}'}]"
    notes = ("; a cliff: just above it most requests miss" if row.get("capacity_cliff") else "") + \
        ("; the client could not offer more, so it is a lower bound" if row.get("capacity_client_limited") else "")
    probes = int(figure(row, "capacity_probes") or 0)
    return f"holds {capacity:.3g} requests/s{interval} at {objectives} ({probes} probes){notes}"
