"""Measuring several replicas as one endpoint: every replica's counters, their shares and their balance.

Where each request goes (a router, or every replica in turn) is measure.transport.routing's.

Every replica's /metrics is scraped before and after each cell into one snapshot whose samples carry the replica's
index as a label (`servebook_replica`): summed over labels, as every counter lookup sums, the snapshot reconciles
the replicas' total against the client's; split by the label, it gives each replica's share.

Where the cell's requests know what a perfect prefix cache would serve of them (agent turns, trace replay, prompt
reuse: `ideal_cached_tokens`), the replicas' cached tokens, summed, over that ideal say how much of it the routing
kept (`cache_kept`): a router that sends a conversation's turns to another replica than the one holding its prefix
loses that prefix, and nothing else in the cell shows it (through a router servebook cannot tell which replica
served a request).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import httpx

from ...engines import ServerCounts
from ...engines.counters import Sample, Scrape
from ..cells import CellSummary, total_reported
from ..roles import MeasuredEngine
from ..transport.client import RequestRecord
from ..transport.scrape import scrape
from .reconcile import ClientCounts, reconcile

REPLICA_LABEL = "servebook_replica"


async def scrape_replicas(client: httpx.AsyncClient, urls: Sequence[str]) -> Scrape:
    """Every replica's /metrics at once, as one snapshot labelled by replica; available while any replica answers
    (a dead replica's counters are then missing, so a cell it died in cannot reconcile)."""
    scrapes = await asyncio.gather(*(scrape(client, url) for url in urls))
    samples = [Sample(s.name, tuple(sorted((*s.labels, (REPLICA_LABEL, str(i))))), s.value)
               for i, one in enumerate(scrapes) for s in one.samples]
    errors = [f"replica {i}: {one.error}" for i, one in enumerate(scrapes) if not one.available]
    return Scrape(t=min(one.t for one in scrapes), samples=samples, available=any(one.available for one in scrapes),
                  error="; ".join(errors) or None)


def of_replica(snapshot: Scrape, index: int) -> Scrape:
    """One replica's part of a labelled snapshot (unavailable when that replica did not answer)."""
    mine = str(index)
    samples = [s for s in snapshot.samples if dict(s.labels).get(REPLICA_LABEL) == mine]
    return Scrape(t=snapshot.t, samples=samples, available=bool(samples))


def balance(loads: Sequence[float]) -> float | None:
    """The least-loaded replica's share against an even split: 1.0 when every replica did the same work, 0.5 when
    the lightest did half its share, 0 when one did nothing. None without work to share."""
    total = sum(loads)
    return None if not loads or total <= 0 else min(loads) * len(loads) / total


def _counts(adapter: MeasuredEngine, before: Scrape, after: Scrape, index: int) -> ServerCounts | None:
    mine_after = of_replica(after, index)
    return adapter.server_counts(of_replica(before, index), mine_after) if mine_after.available else None


def replica_figures(adapter: MeasuredEngine, records: Sequence[RequestRecord], before: Scrape, after: Scrape,
                    replicas: int) -> CellSummary:
    """Each replica's requests (where servebook chose the replica), tokens from its own counters and their
    reconciliation with the client's where the requests are attributable, the balance of the generated tokens,
    and how many replicas still answered at the cell's end. Lists are JSON, one entry per replica."""
    counts = [_counts(adapter, before, after, i) for i in range(replicas)]
    generated = [None if c is None or c.generation_tokens is None else c.generation_tokens for c in counts]
    ok = [r for r in records if r.ok]
    attributed = any(r.replica is not None for r in records)
    requests = [sum(1 for r in records if r.replica == i) for i in range(replicas)] if attributed else None
    checks = None
    if attributed:
        checks = [reconcile(_client([r for r in ok if r.replica == i]), c).status for i, c in enumerate(counts)]
    known = [g for g in generated if g is not None]
    cached = [None if c is None else c.cached_tokens for c in counts]
    return CellSummary(**{
        "replicas_serving": sum(1 for c in counts if c is not None),
        "replica_requests": None if requests is None else json.dumps(requests),
        "replica_lost_requests": None if not attributed else json.dumps(
            [sum(1 for r in records if r.replica == i and not r.ok) for i in range(replicas)]),
        "replica_generation_tokens": json.dumps(generated),
        "replica_prompt_tokens": json.dumps([None if c is None else c.prompt_tokens for c in counts]),
        "replica_cached_tokens": json.dumps(cached),
        "replica_hit_rates": json.dumps([None if c is None else hit_rate(c) for c in counts]),
        "cache_kept": cache_kept(ok, cached),
        "replica_reconciliation": None if checks is None else ",".join(checks),
        "replica_balance": balance(known) if len(known) == replicas else None,
    })


def hit_rate(counts: ServerCounts) -> float | None:
    """A replica's cached prompt tokens over its prompt tokens, by its own counters (None: it served no prompt)."""
    if counts.cached_tokens is None or not counts.prompt_tokens:
        return None
    return counts.cached_tokens / counts.prompt_tokens


def cache_kept(served: Sequence[RequestRecord], cached: Sequence[float | None]) -> float | None:
    """The replicas' cached prompt tokens (their counters, summed) over what a perfect prefix cache would have served
    the cell's served requests: near 1 where every conversation found its prefix, near what chance leaves where
    routing ignores conversations. None where a request's ideal or a replica's counter is not known, or the ideal is
    0 (nothing to keep)."""
    ideal = total_reported(list(served), "ideal_cached_tokens")
    if not ideal or any(c is None for c in cached):
        return None
    return sum(c or 0.0 for c in cached) / ideal


def _client(records: Sequence[RequestRecord]) -> ClientCounts:
    rows = list(records)
    return ClientCounts(prompt_tokens=total_reported(rows, "prompt_tokens"),
                        cached_tokens=total_reported(rows, "cached_tokens"),
                        completion_tokens=total_reported(rows, "completion_tokens"))


def describe_losses(cells: Sequence[CellSummary]) -> str:
    """The requests a replica's death cost, per cell, and how many replicas served the last cell."""
    lost = [f"{c.get('errors')} request(s) lost in {c.get('cell_id')}" for c in cells if c.get("errors")]
    serving = next((c.get("replicas_serving") for c in reversed(cells) if c.get("replicas_serving") is not None),
                   None)
    return ", ".join(lost or ["no request lost"]) + ("" if serving is None else
                                                     f"; {serving} replica(s) answered at the last cell's end")
