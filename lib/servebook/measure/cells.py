"""Cells: the measured points of a plan, and their summary numbers.

The summary follows the metric definitions in design.md exactly; a cell whose requests did not
do what was asked (wrong length, an error, a cache hit in a cold cell, counters that disagree)
is kept with its numbers but marked invalid with the reason.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

from .client import RequestRecord
from ..config.plan import Plan
from .reconcile import Reconciliation


@dataclass(frozen=True)
class CellSpec:
    cell_id: str
    kind: Literal["decode", "prefill"]
    category: str
    concurrency: int
    n_requests: int
    output_tokens: int
    prompt_tokens: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "decode":
            return f"decode {self.category} x{self.concurrency}"
        return f"cold prefill {self.prompt_tokens} tokens"


def plan_cells(plan: Plan) -> list[CellSpec]:
    cells: list[CellSpec] = []
    if plan.decode:
        for category in plan.decode.categories:
            for c in plan.decode.concurrency:
                cells.append(CellSpec(f"decode-{category}-c{c}", "decode", category, c,
                                      c * plan.decode.rounds, plan.decode.output_tokens))
    if plan.prefill:
        for n in plan.prefill.prompt_tokens:
            cells.append(CellSpec(f"prefill-{n}", "prefill", "prose", 1, plan.prefill.requests, 1, n))
    return cells


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _p90(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def summarize_cell(spec: CellSpec, records: list[RequestRecord], reconciliation: Reconciliation,
                   extra_reasons: list[str] | None = None) -> dict:
    ok = [r for r in records if r.ok]
    errors = [r for r in records if not r.ok]
    reasons: list[str] = list(extra_reasons or [])
    if errors:
        reasons.append(f"{len(errors)} of {len(records)} requests failed ({errors[0].error})")
    wrong_length = [r for r in ok if r.completion_tokens != spec.output_tokens]
    if wrong_length:
        got = sorted({r.completion_tokens for r in wrong_length})
        reasons.append(f"{len(wrong_length)} requests returned {got} tokens instead of {spec.output_tokens}")
    if spec.kind == "prefill":
        wrong_prompt = [r for r in ok if r.prompt_tokens != spec.prompt_tokens]
        if wrong_prompt:
            reasons.append(f"{len(wrong_prompt)} prompts were {sorted({r.prompt_tokens for r in wrong_prompt})} "
                           f"tokens instead of {spec.prompt_tokens}")
        warm = [r for r in ok if r.cached_tokens]
        if warm:
            reasons.append(f"not cold: {len(warm)} requests hit the prompt cache "
                           f"({max(r.cached_tokens for r in warm)} cached tokens)")
    if reconciliation.status == "mismatch":
        reasons.append(f"counters disagree: {reconciliation.message}")

    sends = [r.t_send for r in records]
    ends = [r.t_last for r in ok if r.t_last is not None]
    wall = (max(ends) - min(sends)) if ends and sends else None
    completion = sum(r.completion_tokens for r in ok)
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    rates = [r.decode_rate for r in ok if r.decode_rate is not None]
    prefill_rates = [r.prompt_tokens / r.ttft for r in ok if r.ttft and r.prompt_tokens]
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
        "errors": len(errors),
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "cached_tokens": sum(r.cached_tokens or 0 for r in ok),
        "completion_tokens": completion,
        "wall_s": wall,
        "aggregate_tok_s": completion / wall if wall and spec.kind == "decode" else None,
        "per_request_tok_s": _median(rates),
        "ttft_s": _median(ttfts),
        "ttft_p90_s": _p90(ttfts),
        "prefill_tok_s": _median(prefill_rates) if spec.kind == "prefill" else None,
        "draft_acceptance": (sum(accepted) / sum(drafted)) if drafted and sum(drafted) else None,
        "reconciliation": reconciliation.status,
        "reconciliation_message": reconciliation.message,
        "valid": not reasons,
        "invalid_reasons": "; ".join(reasons),
    }
