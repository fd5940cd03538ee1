"""Measuring a ready engine: warm-up, then every cell of the plan with a scrape on each side.

Scrapes are taken before a cell's first request is sent and after its last one has finished,
because a mid-cell scrape is partial for every engine (generation counters move at request end
on llama.cpp and SGLang).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx
from openai import AsyncOpenAI

from .cells import CellSpec, summarize_cell
from .client import RequestRecord, StreamRequest, stream_request
from ..engines import EngineAdapter, EngineFailed, FailureCause
from ..util.files import tail_of
from ..util.progress import Reporter
from ..engines.counters import Scrape
from .scrape import scrape
from ..config.plan import Plan
from .prompts import corpus, decode_prompt, exact_length_prompt, filler_text, structured_format, structured_prompt
from .gates import run_gate, run_needles
from .gpu import GpuSampler, NvmlReader, summarize_gpu
from .host import DEFAULT_MAX_FOREIGN_CORES, cpu_sample, foreign_cores, own_processes, telemetry_rows
from .equivalence import SEED, compare_outputs, describe
from .reconcile import ClientCounts, reconcile
from .cells import plan_cells, total_reported


class WarmupFailed(RuntimeError):
    """The engine is up but cannot serve a first request: the candidate fails, it is not measured."""


@dataclass
class CellOutcome:
    spec: CellSpec
    records: list[RequestRecord]
    before: Scrape
    after: Scrape
    summary: dict


@dataclass
class MeasurementLog:
    """Everything measured so far; survives an engine death mid-plan so the raw rows are kept."""

    outcomes: list[CellOutcome] = field(default_factory=list)
    partial_records: list[RequestRecord] = field(default_factory=list)
    gate_results: list = field(default_factory=list)
    telemetry: list[dict] = field(default_factory=list)
    outputs: list[dict] = field(default_factory=list)  # the equivalence requests' greedy outputs

    def request_rows(self) -> list[dict]:
        rows = [r.row() for o in self.outcomes for r in o.records]
        return rows + [r.row() for r in self.partial_records]

    def chunk_rows(self) -> list[dict]:
        rows = []
        for record in [r for o in self.outcomes for r in o.records] + self.partial_records:
            previous = record.t_first
            tokens = record.chunk_tokens or [None] * len(record.chunk_times)
            for i, (t, n) in enumerate(zip(record.chunk_times, tokens)):
                rows.append({"request_id": record.request_id, "cell_id": record.cell_id, "index": i,
                             "t": t, "gap_s": None if i == 0 else t - previous, "tokens": n})
                previous = t
        return rows

    def scrape_rows(self) -> list[dict]:
        rows = []
        for o in self.outcomes:
            for phase, s in (("before", o.before), ("after", o.after)):
                for sample in s.samples:
                    rows.append({"cell_id": o.spec.cell_id, "phase": phase, "t": s.t, "name": sample.name,
                                 "labels": json.dumps(dict(sample.labels)), "value": sample.value})
        return rows

    def cell_rows(self) -> list[dict]:
        return [o.summary for o in self.outcomes]


class Measurement:
    def __init__(
        self,
        base_url: str,
        adapter: EngineAdapter,
        plan: Plan,
        *,
        tag: str,
        api_key: str = "servebook",
        alive_check: Callable[[], None] | None = None,
        engine_log: Path | None = None,
        request_extras: dict | None = None,
        engine_pid: int | None = None,
        model: str | None = None,
        slots: int | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.adapter = adapter
        self.plan = plan
        self.tag = tag
        self.api_key = api_key
        self.alive_check = alive_check or (lambda: None)
        self.engine_log = engine_log
        self.user_extras = dict(request_extras or {})
        self.engine_pid = engine_pid
        self.gpus = NvmlReader()
        self.log = MeasurementLog()
        self.model_name = model
        self.slots = slots
        self._fillers: dict[str, list[int]] = {}
        self._openers: list[int] = []
        self._prefill_count = 0

    async def __aenter__(self) -> "Measurement":
        # No keep-alive: llama-server closes idle and long-lived connections on its own schedule,
        # and a request sent on a connection the server just closed fails spuriously.
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=0)
        # The key goes with every request, /metrics and the tokenizer included (llama.cpp protects them all).
        self.http = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(self.plan.request_timeout_s, connect=10),
                                      headers=self._auth)
        self.openai = AsyncOpenAI(base_url=f"{self.base_url}/v1", api_key=self.api_key, http_client=self.http,
                                  max_retries=0, timeout=self.plan.request_timeout_s)
        if self.model_name is None:  # chosen by the caller (model.served_name, checked against /v1/models)
            models = await self.http.get(f"{self.base_url}/v1/models", headers=self._auth)
            listed = models.json().get("data") if models.status_code == 200 else None
            self.model_name = listed[0]["id"] if listed else "default"
        return self

    async def __aexit__(self, *exc) -> None:
        await self.http.aclose()

    @property
    def _auth(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _extras(self, output_tokens: int) -> dict:
        """The engine's way of forcing the length, then the candidate's own request fields on top."""
        return {**self.adapter.request_extras(output_tokens), **self.user_extras}

    async def tokenize(self, text: str) -> list[int]:
        tokens = await self.adapter.tokenize(self.http, self.base_url, text, self.model_name, self._auth)
        if tokens is None:
            raise RuntimeError(f"engine {self.adapter.kind} exposes no tokenizer endpoint, so prompts of exact "
                               "token length cannot be built; drop the prefill cells from the plan")
        return tokens

    async def warmup(self) -> None:
        """Unrecorded requests so first-use costs (page faults, thread pools) stay out of the cells."""
        extras = self._extras(8)
        for i in range(self.plan.warmup_requests):
            record = RequestRecord(f"warmup-{i}", "warmup", 1, "prose", 8, t_send=0.0)
            await stream_request(self.openai, record, StreamRequest(
                self.model_name, 8, messages=decode_prompt("prose", i, f"{self.tag}:warmup:{i}"), extra_body=extras,
                keep_chunk_times=False))
            if record.error:
                self.alive_check()
                raise WarmupFailed(record.error)

    async def _scrape(self) -> Scrape:
        return await scrape(self.http, self.base_url)

    async def _decode_requests(self, spec: CellSpec, on_done) -> list[RequestRecord]:
        """`concurrency` streams, each sending its next request when the last one finished, until the cell
        has its requests (and, with `min_s`, has lasted that long)."""
        extras = self._extras(spec.output_tokens)
        records: list[RequestRecord] = []
        started = time.monotonic()

        def more() -> bool:
            if len(records) < spec.n_requests:
                return True
            return spec.min_s is not None and len(records) < spec.max_requests and \
                time.monotonic() - started < spec.min_s

        async def stream() -> None:
            while more():
                i = len(records)
                record = RequestRecord(f"{spec.cell_id}-{i}", spec.cell_id, spec.concurrency, spec.category,
                                       spec.output_tokens, t_send=0.0)
                records.append(record)
                request = await self._decode_request(spec, i, extras)
                await stream_request(self.openai, record, request)
                on_done()

        await asyncio.gather(*(stream() for _ in range(spec.concurrency)))
        return records

    async def _decode_request(self, spec: CellSpec, i: int, extras: dict) -> StreamRequest:
        """Chat prompts from the category's corpus, or, when the plan sets prompt_tokens, token prompts of exactly
        that length that share no prefix; `structured` asks for JSON under a json_schema."""
        options = {"stream_options": self.adapter.stream_options(), "keep_chunk_times": self.plan.record_chunks}
        tag = f"{self.tag}:{spec.cell_id}:{i}"
        if spec.category == "structured":
            # No forced length under a grammar: an engine that must not stop where the JSON ends fails the request.
            free = {k: v for k, v in extras.items() if k not in ("ignore_eos", "min_tokens")}
            return StreamRequest(self.model_name, spec.output_tokens, messages=structured_prompt(i, tag),
                                 extra_body={**free, "response_format": structured_format(spec.output_tokens)},
                                 **options)
        if spec.prompt_tokens is None:
            return StreamRequest(self.model_name, spec.output_tokens, messages=decode_prompt(spec.category, i, tag),
                                 extra_body=extras, **options)
        prompt = await self._unique_prompt(spec.category, spec.prompt_tokens, tag)
        return StreamRequest(self.model_name, spec.output_tokens, prompt=prompt, extra_body=extras, **options)

    async def _filler(self, category: str) -> list[int]:
        if category not in self._fillers:
            text = filler_text() if category == "prose" else "\n\n".join(corpus(category))
            self._fillers[category] = await self.tokenize(text)
        return self._fillers[category]

    async def _unique_prompt(self, category: str, length: int, tag: str) -> list[int]:
        """Exactly `length` tokens whose first token no other prompt of this run starts with."""
        if not self._openers:
            # Engines reuse the longest cached common prefix, even a single token, so the
            # first token of every prompt differs from the first token of every other.
            self._openers = sorted(set(await self._filler("prose")))
        opener = self._openers[self._prefill_count % len(self._openers)]
        self._prefill_count += 1
        prefix = [opener] + await self.tokenize(f" [{tag}]\n")
        return exact_length_prompt(await self._filler(category), prefix, length)

    async def _wave_requests(self, spec: CellSpec, on_done) -> list[RequestRecord]:
        """Bursts of `concurrency` requests sent at once; the next burst when the last one finished."""
        extras = self._extras(spec.output_tokens)
        records: list[RequestRecord] = []

        async def one(i: int, prompt: list[int]) -> None:
            record = RequestRecord(f"{spec.cell_id}-{i}", spec.cell_id, spec.concurrency, spec.category,
                                   spec.output_tokens, t_send=0.0)
            records.append(record)
            await stream_request(self.openai, record, StreamRequest(
                self.model_name, spec.output_tokens, prompt=prompt, extra_body=extras,
                stream_options=self.adapter.stream_options(), keep_chunk_times=self.plan.record_chunks))
            on_done()

        for wave in range(spec.n_requests // spec.concurrency):
            ids = [wave * spec.concurrency + k for k in range(spec.concurrency)]
            # Prompts are built before the burst, so the burst itself is only sends.
            prompts = [await self._unique_prompt(spec.category, spec.prompt_tokens, f"{self.tag}:{spec.cell_id}:{i}")
                       for i in ids]
            await asyncio.gather(*(one(i, prompt) for i, prompt in zip(ids, prompts)))
        return records

    async def _reuse_requests(self, spec: CellSpec, on_done) -> list[RequestRecord]:
        """Conversations one after another; each turn resends the conversation so far plus `turn_tokens`."""
        reuse = self.plan.reuse
        extras = self._extras(spec.output_tokens)
        filler = await self._filler("prose")
        records: list[RequestRecord] = []
        for conversation in range(reuse.conversations):
            prompt = await self._unique_prompt("prose", reuse.first_prompt_tokens,
                                               f"{self.tag}:{spec.cell_id}:conversation-{conversation}")
            offset = conversation * 7919
            for turn in range(1, reuse.turns + 1):
                record = RequestRecord(f"{spec.cell_id}-{conversation}-{turn}", spec.cell_id, 1, spec.category,
                                       spec.output_tokens, t_send=0.0, turn=turn, conversation=conversation)
                records.append(record)
                await stream_request(self.openai, record, StreamRequest(
                    self.model_name, spec.output_tokens, prompt=list(prompt), extra_body=extras,
                    stream_options=self.adapter.stream_options(), keep_chunk_times=self.plan.record_chunks))
                on_done()
                start = (offset + turn * reuse.turn_tokens) % max(1, len(filler) - reuse.turn_tokens)
                prompt += filler[start:start + reuse.turn_tokens]
        return records

    async def _prefill_requests(self, spec: CellSpec, on_done) -> list[RequestRecord]:
        extras = self._extras(1)
        records = []
        started = time.monotonic()
        i = 0
        while i < spec.n_requests or (spec.min_s is not None and i < spec.max_requests
                                      and time.monotonic() - started < spec.min_s):
            prompt = await self._unique_prompt("prose", spec.prompt_tokens, f"{self.tag}:{spec.cell_id}:{i}")
            record = RequestRecord(f"{spec.cell_id}-{i}", spec.cell_id, 1, spec.category, 1, t_send=0.0)
            await stream_request(self.openai, record, StreamRequest(
                self.model_name, 1, prompt=prompt, extra_body=extras, stream_options=self.adapter.stream_options(),
                keep_chunk_times=self.plan.record_chunks))
            records.append(record)
            on_done()
            i += 1
        return records

    async def run_equivalence(self) -> None:
        """Each prompt alone, then all at once, greedy with a fixed seed; the prompts are the same in every run,
        so runs can be compared with each other (a drafter against the baseline)."""
        plan = self.plan.equivalence
        filler = await self._filler("prose")
        span = max(1, len(filler) - plan.prompt_tokens)
        prompts = [filler[(i * 331) % span:][:plan.prompt_tokens] for i in range(plan.prompts)]
        extras = {**self._extras(plan.output_tokens), "seed": SEED}

        async def one(i: int, prompt: list[int], mode: str) -> None:
            response = await self.openai.completions.create(model=self.model_name, prompt=prompt,
                                                            max_tokens=plan.output_tokens, temperature=0,
                                                            extra_body=extras)
            text = response.choices[0].text or ""
            self.log.outputs.append({"prompt": i, "mode": mode, "text": text, "tokens": await self.tokenize(text),
                                     "completion_tokens": response.usage.completion_tokens if response.usage else None})

        for i, prompt in enumerate(prompts):
            await one(i, prompt, "solo")
        await asyncio.gather(*(one(i, prompt, "concurrent") for i, prompt in enumerate(prompts)))

    async def run_gates(self) -> None:
        for gate in self.plan.gates:
            if gate == "needle":
                async def count(text: str) -> int | None:
                    tokens = await self.adapter.tokenize(self.http, self.base_url, text, self.model_name, self._auth)
                    return None if tokens is None else len(tokens)

                self.log.gate_results.extend(await run_needles(self.openai, self.model_name, self.plan.needle_tokens,
                                                               self.plan.gate_cases, filler_text(), count))
                continue
            self.log.gate_results.extend(await run_gate(self.openai, self.model_name, gate, self.plan.gate_cases))

    def _log_size(self) -> int:
        try:
            return self.engine_log.stat().st_size if self.engine_log else 0
        except OSError:
            return 0

    def _compilations_since(self, offset: int) -> list[str]:
        """Compile lines the engine logged inside the measured interval (they make a cell invalid)."""
        pattern = self.adapter.compile_pattern
        if pattern is None or self.engine_log is None:
            return []
        try:
            with open(self.engine_log, "rb") as log:
                log.seek(offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [line.strip() for line in text.splitlines() if pattern.search(line)]

    async def run_cell(self, spec: CellSpec, on_done: Callable[[], None] = lambda: None) -> CellOutcome:
        log_offset = self._log_size()
        before = await self._scrape()
        cpu_before = cpu_sample(self.engine_pid)
        runner = {"decode": self._decode_requests, "prefill": self._prefill_requests, "wave": self._wave_requests,
                  "reuse": self._reuse_requests}[spec.kind]
        with GpuSampler(self.gpus) as gpu:
            records = await runner(spec, on_done)
        if any(not r.ok for r in records):
            # A dead engine explains failed requests better than the requests do.
            try:
                self.alive_check()
            except BaseException:
                self.log.partial_records.extend(records)
                raise
        cpu_after = cpu_sample(self.engine_pid)
        after = await self._scrape()
        ok = [r for r in records if r.ok]
        client = ClientCounts(prompt_tokens=total_reported(ok, "prompt_tokens"),
                              cached_tokens=total_reported(ok, "cached_tokens"),
                              completion_tokens=total_reported(ok, "completion_tokens"))
        counts = self.adapter.server_counts(before, after) if self.adapter.reconciles else None
        reconciliation = reconcile(client, counts)
        compiled = self._compilations_since(log_offset)
        extra = [f"compilation inside the measured interval: {compiled[0]}"] if compiled else []
        foreign = foreign_cores(cpu_before, cpu_after) if self.engine_pid else None
        limit = self.plan.max_foreign_cpu_cores or DEFAULT_MAX_FOREIGN_CORES
        if foreign is not None and foreign > limit:
            extra.append(f"host busy: other processes used {foreign:.2f} CPU cores during the cell (limit {limit:g})")
        own = own_processes(self.engine_pid) if self.engine_pid else set()
        summary = summarize_cell(spec, records, reconciliation, extra, slots=self.slots)
        # Not checked (None) where servebook does not know the engine's processes (attach, compose).
        summary["foreign_cpu_cores"] = foreign
        summary.update(summarize_gpu(gpu.samples, own, summary["completion_tokens"], summary["wall_s"]))
        if self.engine_pid and summary["gpu_foreign_pids"]:
            reason = f"gpu busy: other processes ({summary['gpu_foreign_pids']}) on the engine's GPU during the cell"
            summary["invalid_reasons"] = "; ".join(r for r in (summary["invalid_reasons"], reason) if r)
            summary["valid"] = False
        outcome = CellOutcome(spec, records, before, after, summary)
        self.log.outcomes.append(outcome)
        self.log.telemetry.extend(telemetry_rows(spec.cell_id, cpu_before, cpu_after))
        self.log.telemetry.extend(sample.row(spec.cell_id) for sample in gpu.samples)
        return outcome


async def measure_plan(base_url: str, adapter: EngineAdapter, plan: Plan, log: MeasurementLog, *, tag: str,
                       alive_check: Callable[[], None], engine_log: Path, request_extras: dict,
                       reporter: Reporter, model: str | None = None, engine_pid: int | None = None,
                       on_cell: Callable[[], None] = lambda: None, api_key: str | None = None,
                       slots: int | None = None) -> None:
    """Warm up, measure every cell of the plan in order, then run the gates; progress per request."""
    cells = plan_cells(plan)
    total_requests = sum(c.n_requests for c in cells)
    async with Measurement(base_url, adapter, plan, tag=tag, alive_check=alive_check, engine_log=engine_log,
                           request_extras=request_extras, engine_pid=engine_pid, model=model, slots=slots,
                           api_key=api_key or "servebook") as m:
        m.log = log
        with reporter.task("warm up", total=plan.warmup_requests) as task:
            await m.warmup()
            task.update(plan.warmup_requests)
        with reporter.task(f"measure {len(cells)} cells", total=total_requests) as task:
            for spec in cells:
                task.update(task.completed, description=f"measure: {spec.label}")
                outcome = await m.run_cell(spec, on_done=task.advance)
                reporter.log(f"  {spec.label}: {_cell_line(spec, outcome.summary)}")
                on_cell()
        if plan.equivalence:
            with reporter.task("output equivalence: greedy, alone and batched"):
                await m.run_equivalence()
            reporter.log("  " + describe(compare_outputs(log.outputs, log.outputs, "solo", "concurrent"),
                                         "the same prompts alone (batch invariance)"))
        if plan.gates:
            with reporter.task(f"gates: {', '.join(plan.gates)}"):
                await m.run_gates()


def _cell_line(spec: CellSpec, s: dict) -> str:
    flag = "valid" if s["valid"] else f"INVALID ({s['invalid_reasons']})"
    if spec.kind == "reuse" and s.get("next_turn_ttft_s") is not None:
        share = "-" if s.get("cached_share") is None else f"{s['cached_share']:.0%}"
        figure = f"next-turn TTFT {s['next_turn_ttft_s'] * 1000:.0f} ms, {share} of it cached"
    elif spec.kind == "wave" and s["aggregate_tok_s"]:
        figure = f"{s['aggregate_tok_s']:.1f} tok/s aggregate, TTFT p90 {(s['ttft_p90_s'] or 0) * 1000:.0f} ms"
    elif spec.kind == "decode" and s["aggregate_tok_s"]:
        figure = f"{s['aggregate_tok_s']:.1f} tok/s aggregate"
    elif s.get("prefill_tok_s"):
        figure = f"{s['prefill_tok_s']:.0f} tok/s prefill"
    else:
        figure = "no figure"
    return f"{figure}; {s['reconciliation']}; {flag}"


def inactive_drafter(drafter: str, adapter: EngineAdapter, log: MeasurementLog, engine_log: Path):
    """A configured drafter that never drafted means the engine did not run the candidate as stated
    (llama.cpp, for one, logs a drafter it cannot load and serves on without it)."""
    # An n-gram drafter legitimately drafts nothing when the output never repeats itself.
    if drafter in ("none", "ngram") or not log.outcomes:
        return None
    counts = adapter.server_counts(log.outcomes[0].before, log.outcomes[-1].after)
    if counts is None or counts.draft_tokens is None or counts.draft_tokens > 0:
        return None
    errors = adapter.error_lines(engine_log.read_text(errors="replace")[-4_000_000:])
    hint = next((line for line in errors if "spec" in line.lower() or "draft" in line.lower()), None)
    requests = sum(len(o.records) for o in log.outcomes)
    message = f"drafter {drafter} configured, but the engine drafted no tokens in {requests} requests"
    return EngineFailed(FailureCause("drafter_inactive", message + (f"; engine log: {hint}" if hint else "")),
                        tail_of(engine_log), None)
