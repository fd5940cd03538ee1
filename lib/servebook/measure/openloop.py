"""Open-loop cells: the schedule of arrivals and lengths, and what a cell of them reports against objectives.

The schedule is drawn before the cell starts, from a seed (the plan's, moved by the run's interleaving round, see
`arrival_seed`), so sending is all the client does while the cell runs. Each request records when it was due and
when it left; a client that fell behind its schedule measured its own pace, not the engine's, and the cell says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.load import Lengths, LoadPlan, ServiceObjectives
from ..config.plan import Plan
from ..config.traces import read_rows
from .transport.client import RequestRecord


@dataclass(frozen=True)
class Arrival:
    due_s: float  # from the start of the cell (the warm-up included)
    prompt_tokens: int
    output_tokens: int
    measured: bool  # inside the measured window, not the warm-up


def _draw_lengths(rng: Any, spec: Lengths, n: int) -> list[int]:
    import numpy as np

    if spec.distribution == "fixed":
        values = np.full(n, float(spec.mean))
    elif spec.distribution == "uniform":
        values = rng.uniform(spec.low, (spec.high or spec.mean) + 1, n)
    else:  # lognormal with the given mean and CV
        sigma = math.sqrt(math.log(1 + spec.cv ** 2))
        values = rng.lognormal(math.log(spec.mean) - sigma ** 2 / 2, sigma, n)
    low, high = spec.low or 1, spec.high or 1 << 30
    return [int(min(max(round(v), low), high)) for v in values]


def read_trace(path: str | Path) -> list[tuple[float, int, int]]:
    """(arrival in s from the first, input tokens, output tokens) per line of a JSONL trace (config.traces: Mooncake's
    lines or the plain formats; their hash_ids are the replay kind's)."""
    return [(r.arrival_s, r.input_tokens, r.output_tokens) for r in read_rows(path)]


def schedule(plan: LoadPlan, rate: float, trace: list[tuple[float, int, int]] | None = None) -> list[Arrival]:
    """The cell's arrivals at `rate` requests/s over the warm-up and the measured window.

    Drawn arrivals are one seeded stream of unit-rate gaps, compressed to `rate`: the i-th request has the same
    place in the burst pattern, and the same lengths, at every rate and in every launch that uses the seed. Two
    configurations probed at different rates (as a capacity search does) then meet the same bursts, and the
    difference of their capacities does not carry the luck of two independent patterns (common random numbers).
    A longer window keeps the earlier arrivals and adds more."""
    import numpy as np

    total = plan.warmup_s + plan.duration_s
    if trace:
        # The trace's own rate (its gaps over its span) brought to `rate`; repeated, a period of n mean gaps.
        scale = (len(trace) - 1) / max(trace[-1][0], 1e-9) / rate if len(trace) > 1 else 1.0
        period = len(trace) / rate
        rows = [(t * scale, i, o) for t, i, o in trace]
        repeated = [(t + k * period, i, o) for k in range(int(total / period) + 1) for t, i, o in rows]
        chosen = [row for row in repeated if row[0] < total]
        return [Arrival(t, i, max(o, 2), t >= plan.warmup_s) for t, i, o in chosen]
    # Gamma inter-arrival times with mean 1 and CV `burstiness` (shape 1/CV^2; shape 1 is Poisson), in unit time.
    shape = 1.0 / plan.burstiness ** 2
    gaps_rng, horizon, unit = np.random.default_rng([plan.seed, 0]), total * rate, np.zeros(0)
    while not len(unit) or unit[-1] < horizon:  # blocks of one stream: the same prefix however far it is drawn
        more = gaps_rng.gamma(shape, 1.0 / shape, 256)
        unit = np.concatenate([unit, (unit[-1] if len(unit) else 0.0) + np.cumsum(more)])
    times = [float(t) / rate for t in unit if t < horizon]
    prompts = _draw_lengths(np.random.default_rng([plan.seed, 1]), plan.prompt_tokens, len(times))
    outputs = _draw_lengths(np.random.default_rng([plan.seed, 2]), plan.output_tokens, len(times))
    return [Arrival(t, p, max(o, 2), t >= plan.warmup_s) for t, p, o in zip(times, prompts, outputs, strict=True)]


def plan_of_round(plan: Plan, round_: int) -> Plan:
    """The plan as a run of interleaving round `round_` measures it: its open-loop arrivals drawn from the round's
    seed. The run is still recorded under the plan as written; each load cell records the seed it used."""
    if plan.load is None:
        return plan
    return plan.model_copy(update={"load": plan.load.model_copy(update={"seed": arrival_seed(plan.load.seed, round_)})})


def arrival_seed(seed: int, round_: int) -> int:
    """The arrivals' seed of a run in interleaving round `round_` (0-based): the plan's own in the first round, the
    next one in the next. The runs of one round share their arrivals, so that the round's block in the verdict's
    model takes the pattern's luck out of every comparison; rounds differ, so that the runs together average over
    patterns rather than repeat one."""
    return seed + round_


def probe_window(plan: LoadPlan, rate: float, base_s: float, min_requests: int) -> float:
    """A capacity probe's measured window: `base_s`, or longer until it holds `min_requests` measured arrivals.
    Stretching to `min_requests / rate` holds that many only on average: Poisson arrivals put 33 in a window meant
    for 40, and 33 requests that all meet the objectives cannot show 90% attainment at 95% (its exact bound is
    89.4%). The arrivals are a seeded stream, so a longer window keeps the earlier arrivals and adds more."""
    window = max(base_s, min_requests / rate)
    for _ in range(8):
        measured = [a.due_s for a in schedule(plan.model_copy(update={"duration_s": window * 2}), rate) if a.measured]
        if len(measured) > min_requests:
            return max(window, measured[min_requests - 1] - plan.warmup_s + 0.5 / rate)
        window *= 2
    return window


def load_for(spec: Any, plan: LoadPlan) -> LoadPlan:
    """The load section as one cell uses it: a capacity probe measures its own window."""
    window = getattr(spec, "window_s", None)
    return plan if window is None else plan.model_copy(update={"duration_s": window})


def meets(r: RequestRecord, slo: ServiceObjectives) -> bool:
    if not r.ok or r.t_first is None or r.t_last is None:
        return False
    tokens = r.completion_tokens or 0
    tpot = (r.t_last - r.t_first) / (tokens - 1) if tokens > 1 else 0.0
    return ((slo.ttft_s is None or (r.ttft or 0.0) <= slo.ttft_s)
            and (slo.tpot_s is None or tpot <= slo.tpot_s)
            and (slo.e2e_s is None or r.t_last - r.t_send <= slo.e2e_s))


def effective_requests(met: list[bool]) -> float:
    """How many independent requests a probe's outcomes (in arrival order) are worth. Requests that arrive in one
    Poisson burst queue together and miss together: near capacity, a 80-request probe's attainment varies about
    five times as much as a binomial share of 80 would (0.18 against 0.033 in the simulator's own schedule replayed
    over 150 seeds). The variance inflation is read from the outcomes' autocorrelation, summed in pairs of lags
    until a pair is no longer positive (Geyer's initial positive sequence), and is never taken below 1."""
    import numpy as np

    n = len(met)
    x = np.asarray(met, dtype=float)
    p = float(x.mean()) if n else 0.0
    if n < 8 or p in (0.0, 1.0):
        return float(n)
    x = x - p
    variance = float(x @ x) / n

    def rho(lag: int) -> float:
        return float(x[:-lag] @ x[lag:]) / n / variance if lag < n else 0.0

    inflation, m = -1.0, 0
    while 2 * m + 1 < n:
        pair = (1.0 if m == 0 else rho(2 * m)) + rho(2 * m + 1)
        if pair <= 0:
            break
        inflation += 2 * pair
        m += 1
    return n / max(1.0, inflation)


def attainment(records: list[RequestRecord], slo: ServiceObjectives, window_s: float | None) -> dict[str, Any]:
    """The share of requests that met every objective, with its 95% Clopper-Pearson interval at the probe's
    effective number of requests (`effective_requests`); goodput (requests meeting the objectives per second of the
    window); and whether the share reaches the objective's."""
    n = len(records)
    if not n:
        return {"slo_attainment": None, "slo_attainment_low": None, "slo_attainment_high": None, "goodput_rps": None,
                "slo_met": None, "slo_effective_requests": None}
    outcomes = [meets(r, slo) for r in sorted(records, key=lambda r: r.t_send or 0.0)]
    share, low, high, worth = attainment_interval(outcomes)
    return {"slo_attainment": share, "slo_attainment_low": low, "slo_attainment_high": high,
            "goodput_rps": sum(outcomes) / window_s if window_s else None, "slo_met": share >= slo.attainment,
            "slo_effective_requests": worth}


def attainment_interval(outcomes: list[bool]) -> tuple[float, float, float, float]:
    """(share met, 95% low, 95% high, effective requests): the exact binomial interval's beta quantiles at the
    outcomes' effective number of requests, of which the same share met."""
    from scipy import stats

    n, met = len(outcomes), sum(outcomes)
    share, worth = met / n, effective_requests(outcomes)
    low = 0.0 if met == 0 else float(stats.beta.ppf(0.025, share * worth, (1 - share) * worth + 1))
    high = 1.0 if met == n else float(stats.beta.ppf(0.975, share * worth + 1, (1 - share) * worth))
    return share, low, high, worth


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank `q` quantile of recorded values (None without any)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def load_figures(records: list[RequestRecord], plan: LoadPlan, rate: float) -> dict[str, Any]:
    """An open-loop cell's own figures over its measured window: the rate offered and achieved, latency
    percentiles per request (TTFT, time per output token, end to end) and how late the client sent."""
    measured = [r for r in records if r.measured]
    ok = [r for r in measured if r.ok and r.t_first is not None and r.t_last is not None]
    tpots = [(r.t_last - r.t_first) / (r.completion_tokens - 1) for r in ok  # type: ignore[operator]
             if (r.completion_tokens or 0) > 1]
    lags = [max(0.0, r.t_send - r.t_due) for r in records if r.t_due is not None]
    return {
        "offered_rps": rate, "achieved_rps": len(ok) / plan.duration_s,
        "ttft_p50_s": percentile([r.ttft for r in ok if r.ttft is not None], 0.5),
        "tpot_p50_s": percentile(tpots, 0.5), "tpot_p90_s": percentile(tpots, 0.9),
        "e2e_p90_s": percentile([r.t_last - r.t_send for r in ok if r.t_last is not None], 0.9),
        "send_lag_p99_ms": None if not lags else 1000 * (percentile(lags, 0.99) or 0.0),
    }
