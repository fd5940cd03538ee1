"""Interference probes: short decode requests sent while a long prefill runs (plan.prefill.probes).

An engine that prefills a long prompt in one chunk holds every running decode for that chunk's whole compute; in
smaller chunks, interleaved with decode steps, it holds each for less. The probes are the decodes that feel it: the
first leaves before the prefill request, which is sent once that probe is decoding; then one leaves every
`interval_ms` while the prefill request is in flight (none while `max_in_flight` are), each with a cold prompt of
its own, and the next prefill request waits until they have all finished. Their longest chunk gaps are the stall
of a decode already running, their TTFT how long a newcomer waits behind the prefill.

Probes are recorded with the cell's requests (`RequestRecord.probe`): the engine's counters count them, so the
cell's reconciliation and validity do too, but the cell's own figures never do; theirs are `probe_*`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ....config.plan import ProbePlan
from ...figures.itl import chunk_gaps, itl_figures
from ...figures.latency import quantile
from ...figures.stats import ttfts_of
from ...prompts import exact_length_prompt
from ...transport.client import RequestRecord

if TYPE_CHECKING:
    from ...contract import CellSpec, Requests

#: the probe columns a cell row gets where the plan sends probes
PROBE_COLUMNS = ("probe_requests", "probe_ttft_p50_s", "probe_ttft_p95_s", "probe_itl_p50_s", "probe_itl_p95_s",
                 "probe_itl_p99_s", "probe_itl_max_s", "probe_ttft_n", "probe_itl_n")


async def beside(workloads: "Requests", spec: "CellSpec", plan: ProbePlan, main: Awaitable[Any],
                 probes: list[RequestRecord], batch: int) -> None:
    """Await `main` (one prefill request) with probes beside it, appending their records to `probes`: the first
    leaves before it, and `main` is sent once that probe is decoding (a decode in flight when the prefill starts,
    which is what a long prefill chunk stalls); then one every interval while `main` is in flight. Returns when
    `main` and every probe have finished. `batch`: the prefill request's index in its cell."""
    tag = await workloads.tokenize(f" [{workloads.tag}:{spec.cell_id}:probes:{batch}]\n")
    filler = await workloads.filler("prose")
    extras = workloads.endpoint.extras(plan.output_tokens)
    sent: list[asyncio.Task] = []

    async def probe() -> None:
        prompt = exact_length_prompt(filler, [await workloads.opener(), *tag], plan.prompt_tokens)
        record = workloads.record(spec, f"{spec.cell_id}-probe-{len(probes)}", plan.output_tokens, probe=True)
        probes.append(record)
        # the probes' chunk times are their figures, whatever plan.record_chunks says of the cell's
        request = replace(workloads.request(plan.output_tokens, prompt=prompt, extra_body=extras),
                          keep_chunk_times=True)
        sent.append(asyncio.create_task(workloads.stream(record, request)))

    await probe()
    first = probes[-1]
    while first.t_first is None and not sent[0].done():
        await asyncio.sleep(_DECODING_POLL_S)
    prefill = asyncio.ensure_future(main)
    interval, due = plan.interval_ms / 1000, time.monotonic()
    while not prefill.done():
        # on schedule, but never a burst to catch up after the client was held up
        due = max(due + interval, time.monotonic())
        await asyncio.wait([prefill], timeout=due - time.monotonic())
        if not prefill.done() and sum(not task.done() for task in sent) < plan.max_in_flight:
            await probe()
    await asyncio.gather(prefill, *sent)


#: how often the first probe is looked at until its first token is in (the prefill is sent then)
_DECODING_POLL_S = 0.001


def probe_figures(probes: list[RequestRecord]) -> dict[str, Any]:
    """The probes' figures, apart from the cell's: how many, their TTFT p50 and p95, and their chunk gaps' p50,
    p95, p99 and longest (seconds); empty where the cell sent none."""
    if not probes:
        return {}
    ttfts = ttfts_of(probes)
    gaps = itl_figures(probes, "probe_itl")
    # the samples behind the percentiles (measure.figures.tails), last so that rows recorded before keep their columns' order
    counted = {"probe_ttft_n": len(ttfts),
               "probe_itl_n": sum(len(chunk_gaps(r)) for r in probes if r.ok and r.chunk_times)}
    return {"probe_requests": len(probes), "probe_ttft_p50_s": quantile(ttfts, 0.5),
            "probe_ttft_p95_s": quantile(ttfts, 0.95), **{k: gaps[k] for k in PROBE_COLUMNS if k in gaps}, **counted}
