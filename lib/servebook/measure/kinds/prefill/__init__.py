"""Cold prefill: prompts of exact sizes, each starting with its own token so that nothing is cached, one token out."""

from __future__ import annotations

import time
from typing import Any

from ....config.plan import Plan
from ...contract import CellSpec, OnDone, Requests
from ...figures.stats import median_of, prefill_rates_of, se_pct
from ...transport.client import RequestRecord
from ...validity import CellChecks
from ..base import KindBase
from ..registry import register
from .probes import beside


class Prefill(KindBase):
    name = "prefill"
    order = 20
    headline: str | None = "prefill_tok_s"
    checks = CellChecks(cold_exact_prompts=True)

    def cells(self, plan: Plan) -> list[CellSpec]:
        prefill = plan.prefill
        if not prefill:
            return []
        return [CellSpec(f"prefill-{n}", "prefill", "prose", 1, prefill.requests, 1, n, min_s=prefill.min_cell_s)
                for n in prefill.prompt_tokens]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """One request after another; with plan.prefill.probes, short decodes beside each (measure.kinds.prefill.probes),
        recorded after the cell's own requests."""
        extras = workloads.endpoint.extras(1)
        records: list[RequestRecord] = []
        probes: list[RequestRecord] = []
        plan = workloads.plan.prefill.probes if workloads.plan.prefill else None
        started = time.monotonic()
        length = spec.prompt_tokens or 0
        while len(records) < spec.n_requests or (spec.min_s is not None and len(records) < spec.max_requests
                                                 and time.monotonic() - started < spec.min_s):
            i = len(records)
            record = workloads.record(spec, f"{spec.cell_id}-{i}", 1)
            prompt = await workloads.unique_prompt("prose", length, f"{workloads.tag}:{spec.cell_id}:{i}", record)
            sent = workloads.stream(record, workloads.request(1, prompt=prompt, extra_body=extras))
            if plan is None:
                await sent
            else:
                await beside(workloads, spec, plan, sent, probes, batch=i)
            records.append(record)
            on_done()
        return records + probes

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        rates = prefill_rates_of(records)
        return {"prefill_tok_s": median_of(rates), "within_se_pct": se_pct(rates)}

    def label(self, spec: CellSpec) -> str:
        return f"cold prefill {spec.prompt_tokens} tokens"

    def line(self, summary: dict[str, Any]) -> str | None:
        rate = summary.get("prefill_tok_s")
        return f"{rate or 0:.0f} tok/s prefill" if rate else None


register(Prefill())
