"""Measuring a ready engine: warm-up, then every cell of the plan with a scrape on each side.

Scrapes are taken before a cell's first request is sent and after its last one has finished,
because a mid-cell scrape is partial for every engine (generation counters move at request end
on llama.cpp and SGLang).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from types import TracebackType
from typing import cast

from ..config.plan import Plan
from ..engines import EngineFailed
from ..engines.counters import Scrape, histogram_mean
from ..util.files import tail_of
from ..util.progress import Reporter, Task
from .cells import (
    CellSpec,
    CellSummary,
    cell_figures,
    drafter_figures,
    evidence,
    objective_figures,
    plan_cells,
    total_reported,
    with_engine_split,
    with_validity,
)
from .contract import OnDone, Requests
from .equivalence import SEED, compare_outputs, describe, greedy_outputs
from .figures.realism import cell_realism
from .figures.reasoning import client_split
from .figures.stats import slice_windows
from .gates import run_gate, run_needles
from .kinds import cell_line, kind_of, kinds, label
from .kinds.prefill.probes import probe_figures
from .log import CellOutcome, MeasurementLog
from .observers.cell import CellObserver, Watched, cell_observers
from .observers.gauges import GaugeSampler, gauge_client, gauge_figures
from .observers.gpu import GpuSampler, NvmlReader, summarize_gpu
from .observers.host import (
    ForeignLimit,
    SeatContention,
    busiest_thread_cpus,
    cpu_probe_ms,
    cpu_sample,
    engine_cpu_probe_ms,
    foreign_cores,
    host_cpus,
    own_cores,
    own_processes,
    process_trees,
    seated_cores,
    steal_cores,
    telemetry_rows,
    thread_ticks,
)
from .observers.reconcile import ClientCounts, reconcile
from .observers.replicas import replica_figures, scrape_replicas
from .prompts import decode_prompt, filler_text
from .roles import MeasuredEngine
from .transport.client import RequestRecord, StreamRequest, measuring_clients, stream_request
from .transport.endpoint import Endpoint
from .transport.scrape import scrape
from .turns import NoTurns, Turns
from .validity import cell_faults, codes_of, only_disturbed
from .warmup import Burst, warm_until_steady
from .workloads import Workloads

AliveCheck = Callable[[], None]


async def send_cell(workloads: Requests, spec: CellSpec, on_done: OnDone = lambda: None) -> list[RequestRecord]:
    """A cell's requests, sent as its kind sends them: the loop dispatches, and the kinds never import it."""
    return await kind_of(spec.kind).send(workloads, spec, on_done)


class Measurement:
    """One connection to a ready endpoint, measuring cells of `plan` into `log`."""

    def __init__(self, endpoint: Endpoint, plan: Plan, *, tag: str, alive_check: AliveCheck | None = None,
                 log: MeasurementLog | None = None, turns: Turns | NoTurns | None = None):
        self.endpoint = endpoint
        self.turns = turns or NoTurns()
        self.adapter: MeasuredEngine = endpoint.adapter
        self.plan = plan
        self.tag = tag
        self.alive_check = alive_check or (lambda: None)
        self.gpus = NvmlReader()
        self.log = log if log is not None else MeasurementLog()
        self.model_name = endpoint.model or "default"
        #: the cell being measured's count of the other seats' load on this engine's CPUs
        self._contention: SeatContention | None = None

    async def __aenter__(self) -> "Measurement":
        # The key goes with every request, /metrics and the tokenizer included (llama.cpp protects them all).
        self.http, self.openai = measuring_clients(self.endpoint.base_url, self.endpoint.api_key, self.endpoint.auth,
                                                   self.plan.request_timeout_s, self.endpoint.route)
        if self.endpoint.model is None:  # chosen by the caller (model.served_name, checked against /v1/models)
            models = await self.http.get(f"{self.endpoint.base_url}/v1/models")
            listed = models.json().get("data") if models.status_code == 200 else None
            self.model_name = listed[0]["id"] if listed else "default"
        self.workloads = Workloads(self.endpoint, self.plan, self.tag, self.http, self.openai, self.model_name)
        self.workloads.handover = self._handover
        self.workloads.alive_check = self.alive_check
        self.gauge_http = gauge_client(self.endpoint.auth)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        self.workloads.close()
        await self.http.aclose()
        await self.gauge_http.aclose()

    async def tokenize(self, text: str) -> list[int]:
        return await self.workloads.tokenize(text)

    async def warmup(self) -> None:
        """Unrecorded requests so first-use costs (page faults, thread pools) stay out of the cells."""
        extras = self.endpoint.extras(8)
        for i in range(self.plan.warmup_requests):
            record = RequestRecord(f"warmup-{i}", "warmup", 1, "prose", 8, t_send=0.0)
            await stream_request(self.openai, record, StreamRequest(
                self.model_name, 8, messages=decode_prompt("prose", i, f"{self.tag}:warmup:{i}"),
                extra_body=self.endpoint.for_chat(extras), keep_chunk_times=False))
            if record.error:
                self._warmup_failed(record)
        steady = self.plan.warmup_until_steady
        if steady is not None:
            concurrency = max(self.plan.decode.concurrency) if self.plan.decode else 1
            self.log.warmup = await warm_until_steady(self._burst(concurrency, steady.output_tokens), concurrency,
                                                      within_pct=steady.within_pct, max_bursts=steady.max_bursts)

    def _warmup_failed(self, record: RequestRecord) -> None:
        self.alive_check()
        raise EngineFailed("warmup_failed", f"a warm-up request failed: {record.error}", stage="warmup",
                           log_tail=tail_of(self.endpoint.engine_log) if self.endpoint.engine_log else "")

    def _burst(self, concurrency: int, output_tokens: int) -> Burst:
        extras = self.endpoint.for_chat(self.endpoint.extras(output_tokens))

        async def burst(index: int) -> list[RequestRecord]:
            records = [RequestRecord(f"warmup-burst-{index}-{i}", "warmup", concurrency, "prose", output_tokens,
                                     t_send=0.0) for i in range(concurrency)]
            await asyncio.gather(*(stream_request(self.openai, record, StreamRequest(
                self.model_name, output_tokens, extra_body=extras, keep_chunk_times=False,
                messages=decode_prompt("prose", i, f"{self.tag}:warmup-burst:{index}:{i}")))
                for i, record in enumerate(records)))
            for record in records:
                if record.error:
                    self._warmup_failed(record)
            return records

        return burst

    async def run_equivalence(self) -> None:
        plan = self.plan.equivalence
        assert plan is not None
        extras = {**self.endpoint.extras(plan.output_tokens), "seed": SEED}
        filler = await self.workloads.filler("prose")
        await greedy_outputs(self.openai, self.model_name, plan, filler, extras, self.tokenize, into=self.log.outputs)

    async def run_gates(self) -> None:
        for gate in self.plan.gates:
            if gate == "needle":
                async def count(text: str) -> int | None:
                    tokens = await self.adapter.tokenize(self.http, self.endpoint.base_url, text, self.model_name,
                                                         self.endpoint.auth)
                    return None if tokens is None else len(tokens)

                self.log.gate_results.extend(await run_needles(self.openai, self.model_name, self.plan.needle_tokens or [],
                                                               self.plan.gate_cases, filler_text(), count))
                continue
            self.log.gate_results.extend(await run_gate(self.openai, self.model_name, gate, self.plan.gate_cases))

    async def _handover(self, slice_index: int) -> None:
        """A sliced cell's pause: the other seats measure on their turns, which takes nothing from this engine's."""
        contention = self._contention
        if contention is not None:
            contention.pause()
        try:
            await self.turns.handover(slice_index)
        finally:
            if contention is not None:
                contention.resume()

    async def run_cell(self, spec: CellSpec, on_done: OnDone = lambda: None) -> CellOutcome:
        """One cell measured and recorded, every registered cell observer (measure.observers.cell) started before
        its first scrape and stopped after its last, however it ends."""
        observers = [make(Watched(self.endpoint, self.plan)) for make in cell_observers()]
        async with AsyncExitStack() as stops:
            for observer in observers:
                await observer.start()
                stops.push_async_callback(observer.stop)
            return await self._run_cell(spec, on_done, observers, stops)

    async def _run_cell(self, spec: CellSpec, on_done: OnDone, observers: list[CellObserver],
                        stops: AsyncExitStack) -> CellOutcome:
        pid = self.endpoint.engine_pid
        before = await self._scrape()
        probe_ms, engine_probe_ms = cpu_probe_ms(), engine_cpu_probe_ms(pid)
        # A resident round's other seats are the round's own load, never foreign: between a sliced cell's slices they
        # measure, by design, and while idle they may still poll (an idle SGLang 0.5.17 scheduler kept about 0.4 of
        # a core busy: six of them read as 2.4 foreign cores and failed every unsliced cell of a round, 2026-12-05).
        # Their load is kept beside the cell as seated_cpu_cores, a covariate that falls on every seat alike.
        seated = process_trees(self.turns.others())
        cpu_before, threads_before = cpu_sample(pid, also_own=seated), thread_ticks(pid)
        # ... unless they are held to this engine's CPUs: then they take those CPUs from it
        self._contention = contention = SeatContention(pid, seated)
        contention.resume()
        with GpuSampler(self.gpus) as gpu:
            async with self._gauge_sampler() as gauges:
                try:
                    records = await send_cell(self.workloads, spec, on_done)
                finally:
                    contention.pause()
                    self._contention = None
        if any(not r.ok for r in records):
            # A dead engine explains failed requests better than the requests do.
            try:
                self.alive_check()
            except BaseException:
                self.log.partial_records.extend(records)
                raise
        cpu_after = cpu_sample(pid, also_own=seated)
        after = await self._scrape()
        await stops.aclose()
        observed = {key: value for observer in observers for key, value in observer.evidence().items()}
        used = own_cores(cpu_before, cpu_after) if pid else None
        limit = ForeignLimit.of(self.plan.max_foreign_cpu_cores, used, host_cpus())
        summary = self._summarize(spec, records, before, after, observed,
                                  foreign_cores(cpu_before, cpu_after) if pid else None, gpu.samples,
                                  contending=contention.cores(), limit=limit)
        summary["own_cpu_cores"] = used
        if self.workloads.sent:  # outside the measured window and its counters: what the output was like
            probes = self.plan.decode.realism_probes if self.plan.decode else 0
            summary.update(await cell_realism(self.workloads, records, probes))  # type: ignore[typeddict-item]
        if self.endpoint.replica_urls:
            summary.update(replica_figures(self.adapter, records, before, after, len(self.endpoint.replica_urls)))
        # Covariates, not verdicts: how fast this machine's CPU ran the same work just before the cell, and how much
        # of it the hypervisor took during it (launches of one configuration on a lent H200 differed by 20-25% in
        # decode with the engine's own CPU use unchanged)
        summary["cpu_probe_ms"] = probe_ms
        summary["engine_cpu_probe_ms"] = engine_probe_ms
        summary["cpu_steal_cores"] = steal_cores(cpu_before, cpu_after)
        summary["seated_cpu_cores"] = seated_cores(cpu_before, cpu_after)
        summary["engine_cpus"] = busiest_thread_cpus(pid, since=threads_before)
        summary.update(gauge_figures(gauges, before, after))
        self._keep_observed(spec, summary, observers)
        outcome = CellOutcome(spec, records, before, after, summary)
        self.log.outcomes.append(outcome)
        self.log.telemetry.extend(telemetry_rows(spec.cell_id, cpu_before, cpu_after))
        self.log.telemetry.extend(sample.row(spec.cell_id) for sample in gpu.samples)
        self.log.gauges.extend(gauges.rows(spec.cell_id))
        return outcome

    def _keep_observed(self, spec: CellSpec, summary: CellSummary, observers: list[CellObserver]) -> None:
        """Each cell observer's columns in the cell's row, in its order (None where it saw nothing), and its raw rows."""
        for observer in observers:
            figures = observer.figures()
            summary.update({column: figures.get(column) for column in observer.columns})  # type: ignore[typeddict-item]
            self.log.telemetry.extend(observer.rows(spec.cell_id))

    def _gauge_sampler(self) -> GaugeSampler:
        """The engine's load gauges, read while the cell runs (plan.gauge_interval_ms; 0: not read)."""
        urls = self.endpoint.replica_urls or (self.endpoint.base_url,)
        return GaugeSampler(self.gauge_http, urls, self.adapter.gauges, self.plan.gauge_interval_ms / 1000 or None)

    async def _scrape(self) -> Scrape:
        """The engine's counters: every replica's, labelled by replica, where there are several."""
        if self.endpoint.replica_urls:
            return await scrape_replicas(self.http, self.endpoint.replica_urls)
        return await scrape(self.http, self.endpoint.base_url)

    def _summarize(self, spec: CellSpec, records: list[RequestRecord], before, after, observed: dict,
                   foreign: float | None, gpu_samples: list, contending: float | None = None,
                   limit: ForeignLimit | None = None) -> CellSummary:
        ok = [r for r in records if r.ok]
        reasoning, answer, split = client_split(ok)
        client = ClientCounts(prompt_tokens=total_reported(ok, "prompt_tokens"),
                              cached_tokens=total_reported(ok, "cached_tokens"),
                              completion_tokens=total_reported(ok, "completion_tokens"),
                              reasoning_tokens=reasoning, answer_tokens=answer, split=split)
        counts = self.adapter.server_counts(before, after) if self.adapter.reconciles else None
        reconciliation = reconcile(client, counts)
        # An open-loop cell's figures are its measured window's; its warm-up requests only count for validity.
        # Interference probes (plan.prefill.probes) are figures of their own, never the cell's.
        counted = [r for r in records if r.measured and not r.probe]
        figures = with_engine_split(cell_figures(spec, counted, self.endpoint.slots), counted,
                                    *(histogram_mean(before, after, name) if name else None
                                      for name in (self.adapter.queue_histogram, self.adapter.prefill_histogram,
                                                   self.adapter.ttft_histogram)))
        figures.update(objective_figures(spec, records, self.plan, figures["wall_s"]))
        figures.update(probe_figures([r for r in records if r.probe]))
        figures.update(drafter_figures(figures, counts, source=self.endpoint.draft_source))
        pid = self.endpoint.engine_pid
        limit = limit or ForeignLimit.of(self.plan.max_foreign_cpu_cores, None, None)
        # a resident round's other engines share the GPU by design, idle while this one measures (measure.turns)
        own = (own_processes(pid) | process_trees(self.turns.others())) if pid else set()
        gpu = summarize_gpu(gpu_samples, own, figures["completion_tokens"], figures["wall_s"],
                            windows=slice_windows(counted) if spec.slices > 1 else None)
        faults = cell_faults(evidence(
            spec, records, reconciliation, **observed,  # what the cell observers saw (compile lines)
            # Not checked (None) where servebook does not know the engine's processes (attach, compose).
            foreign_cpu_cores=foreign, foreign_cpu_limit=limit.cores, foreign_limit_basis=limit.basis,
            contending_cpu_cores=contending, gpu_foreign_pids=gpu["gpu_foreign_pids"] if pid else None,
            max_lag_ms=kind_of(spec.kind).lag_limit_ms(self.plan), context_tokens=self.endpoint.context_tokens))
        return with_validity({**figures, "foreign_cpu_cores": foreign, "foreign_cpu_limit": limit.cores if pid else None,
                              "contending_cpu_cores": contending, **gpu},
                             reconciliation, faults)


async def measure_plan(endpoint: Endpoint, plan: Plan, log: MeasurementLog, *, tag: str, alive_check: AliveCheck,
                       reporter: Reporter, on_cell: Callable[[], None] = lambda: None,
                       turns: Turns | NoTurns | None = None) -> None:
    """Warm up, measure every cell of the plan in order, then run the gates; progress per request. In a resident
    round (`turns`), each of those steps waits for this run's turn, so no two engines of the round ever measure at
    once; the run leaves the round however this ends."""
    turns = turns or NoTurns()
    try:
        turns.arrive()
        await _measure_steps(endpoint, plan, log, tag, alive_check, reporter, on_cell, turns)
        await turns.finish()
    finally:
        turns.leave()


async def _measure_steps(endpoint: Endpoint, plan: Plan, log: MeasurementLog, tag: str, alive_check: AliveCheck,
                         reporter: Reporter, on_cell: Callable[[], None], turns: Turns | NoTurns) -> None:
    cells = plan_cells(plan)
    total_requests = sum(c.n_requests for c in cells)
    async with Measurement(endpoint, plan, tag=tag, alive_check=alive_check, log=log, turns=turns) as m:
        with reporter.task("warm up", total=plan.warmup_requests, unit="requests") as task:
            async with turns.step():
                await m.warmup()
            task.update(plan.warmup_requests)
        if log.warmup is not None:
            reporter.log(f"  {log.warmup.describe()}")
        with reporter.task(f"measure {len(cells)} cells", total=total_requests, unit="requests") as task:
            for spec in cells:
                task.update(task.completed, description=f"measure: {label(spec)}")
                if spec.slices > 1:
                    await turns.align()
                async with turns.step():
                    outcome = await _measure_cell(m, spec, task, reporter)
                    on_cell()
                reporter.log(f"  {label(spec)}: {cell_line(spec, outcome.summary)}")
        for kind in kinds():
            if kind.derives(plan):
                rows = await kind.derive(m, plan, reporter, on_cell, turns)
                log.derived.extend(cast("list[CellSummary]", rows))
        if plan.equivalence:
            with reporter.task("output equivalence: greedy, alone and batched"):
                async with turns.step():
                    await m.run_equivalence()
            reporter.log("  " + describe(compare_outputs(log.outputs, log.outputs, "solo", "concurrent"),
                                         "the same prompts alone (batch invariance)"))
        if plan.gates:
            with reporter.task(f"gates: {', '.join(plan.gates)}"):
                async with turns.step():
                    await m.run_gates()


async def _measure_cell(m: Measurement, spec: CellSpec, task: Task, reporter: Reporter) -> CellOutcome:
    """One cell, measured again (up to plan.remeasure_disturbed times) while its only faults are the host's: a
    2-core CI machine or a lent VM can stall the client for 90 ms, and that says nothing about the candidate.
    A fault of the engine's own (counters, compilation) is recorded at once; the last attempt is what stays."""
    outcome = await m.run_cell(spec, on_done=task.advance)
    for _ in range(m.plan.remeasure_disturbed):
        codes = codes_of(outcome.summary.get("invalid_codes"), None)
        if outcome.summary.get("valid") or not only_disturbed(codes):
            break
        m.log.outcomes.remove(outcome)
        m.log.forget_samples(spec.cell_id)
        m.log.remeasured.setdefault(spec.cell_id, []).append(str(outcome.summary.get("invalid_reasons") or ""))
        reporter.log(f"  {label(spec)}: disturbed by the host ({', '.join(codes)}); measuring it again")
        task.update(task.completed - spec.n_requests)
        if spec.slices > 1:  # the attempt again from an even step, in mirrored order like the first
            await m.workloads.handover(0)
        outcome = await m.run_cell(spec, on_done=task.advance)
    return outcome

