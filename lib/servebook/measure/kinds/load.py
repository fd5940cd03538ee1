"""Open-loop load: requests sent on a seeded schedule at each rate, whatever the engine's pace."""

from __future__ import annotations

import time
from typing import Any

from ...config.plan import Plan
from ..contract import CellSpec, OnDone, Requests, Window
from ..figures.latency import of_records
from ..openloop import load_figures, load_for, read_trace, schedule
from ..transport.client import RequestRecord
from ..transport.senders import Connection, EngineWatch, Send, processes_for, send_on_schedule
from ..validity import CellChecks
from .base import KindBase
from .registry import register


class Load(KindBase):
    name = "load"
    order = 50
    checks = CellChecks(per_request_lengths=True)
    reports_slo = True
    open_loop = True

    def cells(self, plan: Plan) -> list[CellSpec]:
        load = plan.load
        if not load:
            return []
        trace = read_trace(load.trace) if load.trace else None
        return [CellSpec(f"load-{rate:g}rps", "load", "prose", 0, len(schedule(load, rate, trace)),
                         load.output_tokens.mean, load.prompt_tokens.mean, rate=rate) for rate in load.rates_rps]

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Requests sent on the plan's schedule at `spec.rate`, whatever the engine's pace: each waits for its due
        time, not for other requests. Prompts are built first, so that sending is all the cell does."""
        assert workloads.plan.load is not None and spec.rate is not None  # a load cell exists only with a section
        plan = load_for(spec, workloads.plan.load)
        if plan.trace and "trace" not in workloads.cache:
            workloads.cache["trace"] = read_trace(plan.trace)  # once per run, not once per cell
        arrivals = schedule(plan, spec.rate, workloads.cache.get("trace"))
        prompts = [await workloads.unique_prompt("prose", max(a.prompt_tokens, 32),
                                                 f"{workloads.tag}:{spec.cell_id}:{i}")
                   for i, a in enumerate(arrivals)]
        endpoint = workloads.endpoint
        sends = [Send(workloads.record(spec, f"{spec.cell_id}-{i}", a.output_tokens, t_due=a.due_s,
                                       measured=a.measured),
                      workloads.request(a.output_tokens, prompt=prompt, extra_body=endpoint.extras(a.output_tokens)))
                 for i, (a, prompt) in enumerate(zip(arrivals, prompts, strict=True))]
        processes = processes_for(spec.rate, plan.client_processes, output_tokens=plan.output_tokens.mean)
        if processes > 1:
            connection = Connection(endpoint.base_url, endpoint.api_key, dict(endpoint.auth),
                                    workloads.plan.request_timeout_s, endpoint.route)
            records = await workloads.senders.send(connection, sends, processes, on_done=on_done,
                                                   alive_check=workloads.alive_check)
        else:
            start = time.monotonic() + 0.05
            for item in sends:
                item.record.t_due = start + (item.record.t_due or 0.0)
            records = await send_on_schedule(workloads.openai, sends, on_done=on_done,
                                             watch=EngineWatch(workloads.alive_check))
        return sorted(records, key=lambda r: r.t_due or 0.0)

    def window(self, spec: CellSpec, records: list[RequestRecord], plan: Plan) -> Window | None:
        """The arrivals of the measured window (after the load's warm-up) over the window's length."""
        if not plan.load or not spec.rate:
            return None
        load = load_for(spec, plan.load)
        out: dict[str, Any] = dict(load_figures(records, load, spec.rate))
        measured = [r for r in records if r.measured]
        completion = sum(r.completion_tokens or 0 for r in measured if r.ok)
        out["aggregate_tok_s"] = completion / load.duration_s  # output of the window's arrivals per second of it
        out["arrival_seed"] = plan.load.seed
        out.update(of_records(measured, load.duration_s))
        return Window(out, measured, load.duration_s)

    def lag_limit_ms(self, plan: Plan) -> float | None:
        return plan.load.max_lag_ms if plan.load else None

    def label(self, spec: CellSpec) -> str:
        return f"open loop at {spec.rate:g} requests/s"

    def line(self, summary: dict[str, Any]) -> str | None:
        return (f"{summary.get('achieved_rps') or 0:.2f} requests/s done of {summary.get('offered_rps') or 0:g} "
                f"offered, TTFT p50 {(summary.get('ttft_p50_s') or 0) * 1000:.0f} ms")


register(Load())
