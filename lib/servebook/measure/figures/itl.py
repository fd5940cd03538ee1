"""Inter-token latency as users feel it: the distribution of the gaps between a request's streamed chunks.

A gap runs from one content chunk to the next of the same request. TTFT is not a gap; the first gap after it (first
content chunk to second) is one: it is the first decode step, and a prefill batched beside it stalls it as much as
any later one (vLLM's ITL counts it too). Gaps are pooled over the cell's successful requests and their percentiles
interpolate linearly (measure.figures.latency.quantile), so `itl_p99_s` is the peers' `itl_p99_ms` in seconds.

A speculative engine sends a drafter's accepted run as one chunk of several tokens, so a chunk gap is not a per-token
figure: `*_tokens_per_chunk` is completion tokens over content chunks, and `*_token_p50_s` / `*_token_p99_s` divide
each gap by the tokens of the chunk that ended it, where those are known (the engine reported usage on every chunk,
or every chunk carried one token because there were as many chunks as tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .latency import quantile

if TYPE_CHECKING:
    from ..transport.client import RequestRecord


def chunk_gaps(record: "RequestRecord") -> list[float]:
    """The gaps between a request's consecutive content chunks (seconds)."""
    times = record.chunk_times
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def chunk_token_counts(record: "RequestRecord") -> list[int] | None:
    """The tokens each content chunk carried, where known: as the engine's per-chunk usage says, or one each where
    the request had as many content chunks as completion tokens; None otherwise."""
    n = len(record.chunk_times)
    tokens = record.chunk_tokens
    if n and len(tokens) == n and all(t is not None for t in tokens):
        return [int(t) for t in tokens if t is not None]
    if n and record.completion_tokens == n:
        return [1] * n
    return None


def per_token_gaps(record: "RequestRecord") -> list[float]:
    """Each gap divided by the tokens of the chunk that ended it (none where the tokens are not known; a chunk the
    engine says carried no new token leaves its gap to the next)."""
    counts = chunk_token_counts(record)
    if counts is None:
        return []
    out, waited = [], 0.0
    for gap, tokens in zip(chunk_gaps(record), counts[1:], strict=True):
        waited += gap
        if tokens >= 1:
            out.append(waited / tokens)
            waited = 0.0
    return out


def itl_figures(records: Sequence["RequestRecord"], prefix: str = "itl") -> dict[str, Any]:
    """A cell's ITL figures of its successful requests' chunk gaps: p50, p95, p99 and the longest gap (seconds),
    mean tokens per chunk, and the per-token p50 and p99 (None where no chunk times were kept)."""
    ok = [r for r in records if r.ok and r.chunk_times]
    gaps = [gap for r in ok for gap in chunk_gaps(r)]
    per_token = [gap for r in ok for gap in per_token_gaps(r)]
    chunks = sum(len(r.chunk_times) for r in ok)
    tokens = sum(r.completion_tokens or 0 for r in ok)
    return {f"{prefix}_p50_s": quantile(gaps, 0.5), f"{prefix}_p95_s": quantile(gaps, 0.95),
            f"{prefix}_p99_s": quantile(gaps, 0.99), f"{prefix}_max_s": max(gaps) if gaps else None,
            f"{prefix}_tokens_per_chunk": tokens / chunks if chunks else None,
            f"{prefix}_token_p50_s": quantile(per_token, 0.5), f"{prefix}_token_p99_s": quantile(per_token, 0.99)}
