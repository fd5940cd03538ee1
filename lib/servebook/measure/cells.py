"""Cells: the measured points of a plan, and their summary numbers.

The summary follows the metric definitions in design.md exactly; a cell whose requests did not
do what was asked (wrong length, an error, a cache hit in a cold cell, counters that disagree)
is kept with its numbers but marked invalid with the reason.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

from ..config.plan import Plan
from .client import RequestRecord
from .latency import of_records
from .openloop import attainment, load_figures, load_for, percentile, read_trace, schedule
from .reconcile import Reconciliation
from .validity import CellEvidence, InvalidReason, cell_faults, join_codes, join_texts


@dataclass(frozen=True)
class CellSpec:
    cell_id: str
    kind: Literal["decode", "prefill", "reuse", "wave", "load"]
    category: str
    concurrency: int
    n_requests: int
    output_tokens: int
    prompt_tokens: int | None = None
    min_s: float | None = None  # keep sending (at the same concurrency) until the cell lasted this long
    rate: float | None = None  # open-loop cells: requests per second
    window_s: float | None = None  # open-loop cells: the measured window, when not the load section's (probes)

    @property
    def max_requests(self) -> int:
        """A bound on a cell extended by `min_s`, so a very slow engine cannot keep it going forever."""
        return self.n_requests if self.min_s is None else max(self.n_requests, 64 * self.concurrency)

    @property
    def label(self) -> str:
        if self.kind == "decode":
            return f"decode {self.category} x{self.concurrency}"
        if self.kind == "reuse":
            return f"prompt reuse, {self.n_requests} turns"
        if self.kind == "wave":
            return f"waves of {self.concurrency} requests"
        if self.kind == "load":
            return f"open loop at {self.rate:g} requests/s"
        return f"cold prefill {self.prompt_tokens} tokens"


class CellSummary(TypedDict, total=False):
    """One row of cells.parquet. Every cell has the first group; kind-specific figures are absent elsewhere."""

    cell_id: str
    kind: str
    category: str
    concurrency: int
    target_prompt_tokens: int | None
    output_tokens: int
    requests: int
    errors: int
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int
    wall_s: float | None
    aggregate_tok_s: float | None
    steady_tok_s: float | None
    steady_s: float | None
    ramp_up_s: float | None
    ramp_down_s: float | None
    per_request_tok_s: float | None
    ttft_s: float | None
    ttft_p90_s: float | None
    prefill_tok_s: float | None
    #: the engine's own prompt time: the median of its per-request timings (llama.cpp), else the cell's mean from
    #: its prefill histogram (vLLM); TTFT minus it (and the queue) is the rest of the wait
    engine_prompt_s: float | None
    #: the engine's own queueing time, the cell's mean from its histogram (vLLM; None where none is reported)
    engine_queue_s: float | None
    #: the engine's own time to first token, the cell's mean from its histogram (vLLM's starts when its front end
    #: has the request, so the client's TTFT minus it is what lies before: HTTP, the body's parsing, the network)
    engine_ttft_s: float | None
    #: the standard error of the cell's headline figure that its own requests explain, in percent (per-request
    #: values' CV over the square root of their number: Kalibera and Jones' within-launch level)
    within_se_pct: float | None
    ttft_outside_engine_s: float | None
    draft_acceptance: float | None
    reconciliation: str
    reconciliation_message: str
    valid: bool
    #: fault codes, comma-separated (measure.validity.InvalidCode); decisions read these
    invalid_codes: str
    #: the same faults in prose, "; "-separated, for readers
    invalid_reasons: str
    # reuse cells
    first_turn_ttft_s: float | None
    next_turn_ttft_s: float | None
    cached_share: float | None
    # wave cells
    slots: int | None
    queued: int | None
    # open-loop cells (measure.openloop), over the measured window
    offered_rps: float | None
    achieved_rps: float | None
    ttft_p50_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    e2e_p90_s: float | None
    send_lag_p99_ms: float | None
    #: the seed the cell's arrivals were drawn from (the plan's, moved by the run's round: openloop.arrival_seed)
    arrival_seed: int | None
    # against the plan's objectives (plan.slo), in decode, wave and load cells
    slo_attainment: float | None
    slo_attainment_low: float | None
    slo_attainment_high: float | None
    #: what the requests are worth as independent ones, their outcomes' autocorrelation counted (openloop)
    slo_effective_requests: float | None
    goodput_rps: float | None
    slo_met: bool | None
    # host and GPU telemetry, added by the measurement loop (None: not checked)
    foreign_cpu_cores: float | None
    cpu_probe_ms: float | None
    cpu_steal_cores: float | None
    engine_cpus: str | None
    gpu_energy_j: float | None
    gpu_power_w: float | None
    gpu_sm_clock_mhz: float | None
    joules_per_token: float | None
    tok_s_per_w: float | None
    gpu_throttle: str | None
    gpu_foreign_pids: str | None
    # the peers' latency percentiles (ms) and throughputs (measure.latency.LATENCY_COLUMNS)
    ttft_mean_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    tpot_mean_ms: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    itl_mean_ms: float | None
    itl_p50_ms: float | None
    itl_p90_ms: float | None
    itl_p99_ms: float | None
    e2e_mean_ms: float | None
    e2e_p50_ms: float | None
    e2e_p90_ms: float | None
    e2e_p99_ms: float | None
    request_rps: float | None
    output_tok_s: float | None
    total_tok_s: float | None


def plan_cells(plan: Plan) -> list[CellSpec]:
    cells: list[CellSpec] = []
    if plan.decode:
        for category in plan.decode.categories:
            for c in plan.decode.concurrency:
                cells.append(CellSpec(f"decode-{category}-c{c}", "decode", category, c,
                                      c * plan.decode.rounds, plan.decode.output_tokens,
                                      prompt_tokens=plan.decode.prompt_tokens, min_s=plan.decode.min_cell_s))
    if plan.prefill:
        for n in plan.prefill.prompt_tokens:
            cells.append(CellSpec(f"prefill-{n}", "prefill", "prose", 1, plan.prefill.requests, 1, n,
                                  min_s=plan.prefill.min_cell_s))
    if plan.reuse:
        reuse = plan.reuse
        cells.append(CellSpec("reuse", "reuse", "prose", 1, reuse.conversations * reuse.turns, reuse.output_tokens,
                              reuse.first_prompt_tokens))
    if plan.waves:
        for c in plan.waves.concurrency:
            cells.append(CellSpec(f"wave-c{c}", "wave", "prose", c, c * plan.waves.waves, plan.waves.output_tokens,
                                  plan.waves.prompt_tokens))
    if plan.load:
        trace = read_trace(plan.load.trace) if plan.load.trace else None
        for rate in plan.load.rates_rps:
            arrivals = schedule(plan.load, rate, trace)
            cells.append(CellSpec(f"load-{rate:g}rps", "load", "prose", 0, len(arrivals),
                                  plan.load.output_tokens.mean, plan.load.prompt_tokens.mean, rate=rate))
    return cells


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def se_pct(values: list[float]) -> float | None:
    """Per-request values' standard error of their mean, in percent of it."""
    values = [v for v in values if v > 0 and math.isfinite(v)]
    if len(values) < 2:
        return None
    return 100 * statistics.stdev(values) / statistics.fmean(values) / math.sqrt(len(values))


def steady_state(records: list[RequestRecord], concurrency: int) -> dict:
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
    return {"first_turn_ttft_s": _median([r.ttft for r in first if r.ttft is not None]),
            "next_turn_ttft_s": _median([r.ttft for r in later if r.ttft is not None]),
            "cached_share": cached / prompt if cached is not None and prompt else None}


def with_engine_split(figures: dict[str, Any], records: list[RequestRecord], queue_s: float | None,
                      prefill_s: float | None, engine_ttft_s: float | None = None) -> dict[str, Any]:
    """The TTFT split from the engine's histograms (cell means) where it reports no per-request timings: its
    queueing, its prompt processing, its own time to first token, and the rest of the client's mean TTFT
    (client, network, first step)."""
    if figures.get("engine_prompt_s") is not None or prefill_s is None:
        return {**figures, "engine_queue_s": queue_s, "engine_ttft_s": engine_ttft_s}
    ttfts = [r.ttft for r in records if r.ok and r.ttft is not None]
    outside = statistics.fmean(ttfts) - prefill_s - (queue_s or 0.0) if ttfts else None
    return {**figures, "engine_prompt_s": prefill_s, "engine_queue_s": queue_s, "engine_ttft_s": engine_ttft_s,
            "ttft_outside_engine_s": outside}


def cell_figures(spec: CellSpec, records: list[RequestRecord], slots: int | None = None) -> dict[str, Any]:
    """The cell's numbers by the metric definitions, whatever their validity."""
    ok = [r for r in records if r.ok]
    sends = [r.t_send for r in records]
    ends = [r.t_last for r in ok if r.t_last is not None]
    wall = (max(ends) - min(sends)) if ends and sends else None
    completion = sum(r.completion_tokens or 0 for r in ok)
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    rates = [r.decode_rate for r in ok if r.decode_rate is not None]
    prefill_rates = [r.prompt_tokens / r.ttft for r in ok if r.ttft and r.prompt_tokens]
    engine_prompt = [r.server_prompt_ms / 1000 for r in ok if r.server_prompt_ms is not None and r.ttft is not None]
    outside = [r.ttft - r.server_prompt_ms / 1000 for r in ok if r.server_prompt_ms is not None and r.ttft is not None]
    drafted = [r.server_draft_tokens for r in ok if r.server_draft_tokens is not None]
    accepted = [r.server_draft_accepted for r in ok if r.server_draft_accepted is not None]
    return {
        "cell_id": spec.cell_id,
        "kind": spec.kind,
        "category": spec.category,
        "concurrency": spec.concurrency,
        "target_prompt_tokens": spec.prompt_tokens,
        "output_tokens": spec.output_tokens,
        "requests": len(records),
        "errors": len(records) - len(ok),
        "prompt_tokens": total_reported(ok, "prompt_tokens"),
        "cached_tokens": total_reported(ok, "cached_tokens"),
        "completion_tokens": completion,
        "wall_s": wall,
        "aggregate_tok_s": completion / wall if wall and spec.kind in ("decode", "wave") else None,
        **(steady_state(records, spec.concurrency) if spec.kind == "decode" else
           {"steady_tok_s": None, "steady_s": None, "ramp_up_s": None, "ramp_down_s": None}),
        "per_request_tok_s": _median(rates),
        "ttft_s": _median(ttfts),
        "ttft_p90_s": percentile(ttfts, 0.9),
        "prefill_tok_s": _median(prefill_rates) if spec.kind == "prefill" else None,
        # TTFT split where the engine reports its own prompt time (llama.cpp's timings): the engine's prompt
        # processing, and everything else (client, network, queue, scheduling, the first decode step).
        "engine_prompt_s": _median(engine_prompt),
        "engine_queue_s": None,
        "engine_ttft_s": None,
        # the requests' own version of the headline figure: decode rates, prompt rates, or times to first token
        "within_se_pct": se_pct(rates if spec.kind == "decode" else prefill_rates if spec.kind == "prefill" else ttfts),
        "ttft_outside_engine_s": _median(outside),
        **(reuse_summary(ok) if spec.kind == "reuse" else {}),
        **({"slots": slots, "queued": max(0, spec.concurrency - slots) if slots else None}
           if spec.kind == "wave" else {}),
        "draft_acceptance": (sum(accepted) / sum(drafted)) if drafted and sum(drafted) else None,
        # the peers' percentiles and throughputs (measure.latency); an open-loop cell's are its window's
        **of_records(records, wall),
    }


def evidence(spec: CellSpec, records: list[RequestRecord], reconciliation: Reconciliation,
             **host: Any) -> CellEvidence:
    """What the validity of a cell is decided from; `host`: compilations, foreign CPU and GPU use."""
    return CellEvidence(spec.kind, spec.category, spec.output_tokens, spec.prompt_tokens, records, reconciliation,
                        concurrency=spec.concurrency, **host)


def with_validity(figures: dict[str, Any], reconciliation: Reconciliation,
                  faults: list[InvalidReason]) -> CellSummary:
    """The recorded cell row: its figures, the reconciliation, and its faults as codes with text beside them."""
    row = {**figures, "reconciliation": reconciliation.status, "reconciliation_message": reconciliation.message,
           "valid": not faults, "invalid_codes": join_codes(faults), "invalid_reasons": join_texts(faults)}
    return cast(CellSummary, row)


def summarize_cell(spec: CellSpec, records: list[RequestRecord], reconciliation: Reconciliation,
                   slots: int | None = None) -> CellSummary:
    """A cell's row from its requests and counters alone (no host telemetry)."""
    faults = cell_faults(evidence(spec, records, reconciliation))
    return with_validity(cell_figures(spec, records, slots), reconciliation, faults)


def objective_figures(spec: CellSpec, records: list[RequestRecord], plan: Plan,
                      wall_s: float | None = None) -> dict[str, Any]:
    """An open-loop cell's window figures (measure.openloop), and every decode, wave and load cell's attainment of
    the plan's objectives with goodput (per second of `wall_s`, the cell's own, outside open-loop cells); empty
    where neither applies."""
    out: dict[str, Any] = {}
    window = None
    if spec.kind == "load" and plan.load and spec.rate:
        load = load_for(spec, plan.load)
        out.update(load_figures(records, load, spec.rate))
        measured = [r for r in records if r.measured]
        window = load.duration_s
        completion = sum(r.completion_tokens or 0 for r in measured if r.ok)
        out["aggregate_tok_s"] = completion / window  # output of the window's arrivals per second of the window
        out["arrival_seed"] = plan.load.seed
        out.update(of_records(measured, window))
    else:
        measured, window = records, wall_s
    if plan.slo and spec.kind in ("decode", "wave", "load"):
        out.update(attainment(measured, plan.slo, window))
    return out

