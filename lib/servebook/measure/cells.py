"""Cells: the measured points of a plan, and their summary numbers.

The summary follows the metric definitions in design.md exactly; a cell whose requests did not
do what was asked (wrong length, an error, a cache hit in a cold cell, counters that disagree)
is kept with its numbers but marked invalid with the reason.
"""

from __future__ import annotations

import statistics
from typing import Any, TypedDict, cast

from ..config.plan import Plan
from ..engines import ServerCounts
from .figures.latency import of_records
from .figures.reasoning import reasoning_figures
from .figures.stats import median_of, reuse_summary, se_pct, steady_state, total_reported, ttfts_of, wall_of
from .kinds import CellSpec, kind_of, plan_cells
from .observers.reconcile import Reconciliation
from .openloop import attainment, percentile
from .transport.client import RequestRecord
from .validity import CellEvidence, InvalidReason, cell_faults, join_codes, join_texts

__all__ = ["CellSpec", "CellSummary", "cell_figures", "drafter_figures", "evidence", "objective_figures",
           "plan_cells", "reuse_summary", "se_pct", "steady_state", "summarize_cell", "total_reported",
           "with_engine_split", "with_validity"]


class CellSummary(TypedDict, total=False):
    """One row of cells.parquet. Every cell has the first group; kind-specific figures are absent elsewhere. Each
    column's type, unit, title and definition are its entry in config.columns (tests/unit/config/test_columns.py
    fails on a field without one)."""

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
    #: the tokens the engine's drafter proposed in the cell (its per-request counts, else its counters' change); 0 is
    #: a drafter that proposed nothing, whose cost is then its overhead alone; None: no drafter, or not reported
    draft_tokens: float | None
    #: of those, the tokens the target model accepted, and accepted over drafted
    draft_accepted_tokens: float | None
    draft_acceptance: float | None
    #: "engine": the acceptance was earned on the output; "synthetic": a benchmarking setting fixed it
    draft_source: str | None
    #: tokens the target model emitted per forward pass: completion over (completion - accepted); 1 without a
    #: drafter, the drafter's whole possible gain with one (vLLM's "mean acceptance length" over every step)
    tokens_per_step: float | None
    # output realism of decode cells (measure.figures.realism; docs/metrics.md): what the drafter's gain was earned on
    ngram_share: float | None
    loop_share: float | None
    forced_tail_share: float | None
    realism_requests: int | None
    output_sample: str | None
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
    #: the next-turn TTFT's standard error from the cell's conversations, in percent (their means' spread)
    next_turn_within_se_pct: float | None
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
    #: a capacity probe disturbed by stalled reads alone: those dropped from it, its objectives' figures the rest's
    slo_dropped_requests: int | None
    # host and GPU telemetry, added by the measurement loop (None: not checked)
    foreign_cpu_cores: float | None
    #: the limit foreign_cpu_cores was held to (measure.observers.host.ForeignLimit: relative to the cores the run left idle)
    foreign_cpu_limit: float | None
    #: CPU cores the run's own processes (client, engine, a round's other seats) kept busy during the cell
    own_cpu_cores: float | None
    cpu_probe_ms: float | None
    #: the same probe on the CPUs the engine is held to (None: it is not held)
    engine_cpu_probe_ms: float | None
    cpu_steal_cores: float | None
    #: CPU cores a resident round's other seats kept busy during the cell (None: no other seats)
    seated_cpu_cores: float | None
    #: of those, the cores they kept busy on the CPUs this engine is held to while it measured (0: it is not held)
    contending_cpu_cores: float | None
    engine_cpus: str | None
    gpu_energy_j: float | None
    gpu_power_w: float | None
    gpu_sm_clock_mhz: float | None
    joules_per_token: float | None
    tok_s_per_w: float | None
    gpu_throttle: str | None
    gpu_foreign_pids: str | None
    # several replicas (measure.observers.replicas): JSON lists, one entry per replica, and the balance of their work
    replicas_serving: int | None
    replica_requests: str | None
    replica_lost_requests: str | None
    replica_generation_tokens: str | None
    replica_prompt_tokens: str | None
    replica_cached_tokens: str | None
    #: each replica's cached over prompt tokens by its counters (JSON), and their cached tokens over the ideal
    replica_hit_rates: str | None
    cache_kept: float | None
    replica_reconciliation: str | None
    replica_balance: float | None
    # the peers' latency percentiles (ms) and throughputs (measure.figures.latency.LATENCY_COLUMNS)
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
    #: the samples behind each latency's statistics: requests, or chunk gaps for ITL (measure.figures.tails)
    ttft_n: int | None
    tpot_n: int | None
    itl_n: int | None
    e2e_n: int | None
    # reasoning models (measure.figures.reasoning; docs/reasoning.md): medians over requests, sums of tokens
    reasoning_ttft_s: float | None
    answer_ttft_s: float | None
    reasoning_tokens: int | None
    answer_tokens: int | None
    reasoning_tok_s: float | None
    answer_tok_s: float | None
    #: "split": every stream's reasoning and answer told apart; "total_only": reconciled on their total; None: no
    #: stream reasoned
    reasoning_split: str | None
    # inter-token latency of closed-loop decode cells (measure.figures.itl): chunk gaps in seconds, and per token
    itl_p50_s: float | None
    itl_p95_s: float | None
    itl_p99_s: float | None
    itl_max_s: float | None
    itl_tokens_per_chunk: float | None
    itl_token_p50_s: float | None
    itl_token_p99_s: float | None
    # interference probes beside prefill requests (measure.kinds.prefill.probes; plan.prefill.probes)
    probe_requests: int | None
    probe_ttft_p50_s: float | None
    probe_ttft_p95_s: float | None
    probe_itl_p50_s: float | None
    probe_itl_p95_s: float | None
    probe_itl_p99_s: float | None
    probe_itl_max_s: float | None
    probe_ttft_n: int | None
    probe_itl_n: int | None
    # the engine's load during the cell (measure.observers.gauges; plan.gauge_interval_ms)
    kv_usage_peak: float | None
    running_peak: float | None
    waiting_peak: float | None
    preemptions: float | None
    gauge_samples: int | None


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
    """The cell's numbers by the metric definitions, whatever their validity: every cell's, with its kind's own
    figures (measure/kinds/) in their place among them."""
    ok = [r for r in records if r.ok]
    wall = wall_of(records)
    ttfts = ttfts_of(records)
    engine_prompt = [r.server_prompt_ms / 1000 for r in ok if r.server_prompt_ms is not None and r.ttft is not None]
    outside = [r.ttft - r.server_prompt_ms / 1000 for r in ok if r.server_prompt_ms is not None and r.ttft is not None]
    drafted = [r.server_draft_tokens for r in ok if r.server_draft_tokens is not None]
    accepted = [r.server_draft_accepted for r in ok if r.server_draft_accepted is not None]
    every = {
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
        "completion_tokens": sum(r.completion_tokens or 0 for r in ok),
        "wall_s": wall,
        "aggregate_tok_s": None,  # decode and wave cells (their kinds)
        "steady_tok_s": None, "steady_s": None, "ramp_up_s": None, "ramp_down_s": None,  # decode cells
        "per_request_tok_s": median_of([r.decode_rate for r in ok if r.decode_rate is not None]),
        "ttft_s": median_of(ttfts),
        "ttft_p90_s": percentile(ttfts, 0.9),
        "prefill_tok_s": None,  # prefill cells
        # TTFT split where the engine reports its own prompt time (llama.cpp's timings): the engine's prompt
        # processing, and everything else (client, network, queue, scheduling, the first decode step).
        "engine_prompt_s": median_of(engine_prompt),
        "engine_queue_s": None,
        "engine_ttft_s": None,
        # the requests' own version of the headline figure: a kind's own (decode rates, prompt rates), else TTFTs
        "within_se_pct": se_pct(ttfts),
        "ttft_outside_engine_s": median_of(outside),
    }
    own = kind_of(spec.kind).figures(spec, records, slots)
    return {**{key: own.get(key, value) for key, value in every.items()},
            **{key: value for key, value in own.items() if key not in every},  # the kind's figures no other has
            **_drafted(sum(drafted) if drafted else None, sum(accepted) if accepted else None,
                       sum(r.completion_tokens or 0 for r in ok)),
            # the peers' percentiles and throughputs (measure.figures.latency); an open-loop cell's are its window's
            **of_records(records, wall), **reasoning_figures(records)}


def drafter_figures(figures: dict[str, Any], counts: ServerCounts | None, *, source: str | None) -> dict[str, Any]:
    """A drafter's figures from the engine's counters where its requests reported none: engines that count drafts
    per interval, not per request (vLLM's spec_decode counters, which exist only with a drafter). A drafter that
    proposed nothing is 0 drafted tokens with no acceptance (nothing to accept), never a missing figure; a candidate
    without a drafter has neither (llama.cpp counts 0 drafted tokens per request with no drafter too)."""
    if source is None:
        return {**_drafted(None, None, 0), "draft_source": None}
    if figures.get("draft_tokens") is not None or counts is None or counts.draft_tokens is None:
        return {"draft_source": source}
    return {**_drafted(counts.draft_tokens, counts.accepted_tokens or 0.0, figures.get("completion_tokens") or 0),
            "draft_source": source}


def _drafted(drafted: float | None, accepted: float | None, completion: float) -> dict[str, Any]:
    """A drafter's evidence in a cell: drafted and accepted tokens, their ratio, and tokens per forward pass."""
    if drafted is None:
        return {"draft_tokens": None, "draft_accepted_tokens": None, "draft_acceptance": None,
                "tokens_per_step": None}
    accepted = accepted or 0.0
    steps = completion - accepted
    return {"draft_tokens": drafted, "draft_accepted_tokens": accepted,
            "draft_acceptance": accepted / drafted if drafted else None,
            "tokens_per_step": completion / steps if completion and steps > 0 else None}


def evidence(spec: CellSpec, records: list[RequestRecord], reconciliation: Reconciliation,
             **host: Any) -> CellEvidence:
    """What the validity of a cell is decided from; `host`: compilations, foreign CPU and GPU use."""
    return CellEvidence(spec.kind, spec.category, spec.output_tokens, spec.prompt_tokens, records, reconciliation,
                        concurrency=spec.concurrency, checks=kind_of(spec.kind).checks, **host)


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
    """An open-loop cell's window figures (its kind's `window`), and the attainment of the plan's objectives with
    goodput (per second of `wall_s`, the cell's own, outside open-loop cells) of every kind that reports them;
    empty where neither applies."""
    kind = kind_of(spec.kind)
    out: dict[str, Any] = {}
    window = kind.window(spec, records, plan)
    if window is not None:
        out.update(window.figures)
        measured, seconds = window.measured, window.seconds
    else:
        measured, seconds = records, wall_s
    if plan.slo and kind.reports_slo:
        out.update(attainment(measured, plan.slo, seconds))
    return out
