"""Latency percentiles and throughputs of a cell, as the serving benchmarks define them.

`vllm bench serve` prints these for every run, AIPerf and guidellm the same figures under other names, and a reader
who has used any of them looks for them first. Definitions (docs/metrics.md has the peers' names side by side):

- TTFT: send to the first content-bearing chunk, per request.
- TPOT: (end to end - TTFT) / (completion_tokens - 1), per request of at least two tokens (vLLM's TPOT,
  AIPerf's and guidellm's "inter-token latency").
- ITL: every gap between consecutive content chunks of a request, pooled over the cell's requests (vLLM's ITL,
  AIPerf's "inter-chunk latency"); a chunk may carry several tokens (speculative decoding), so it is a chunk gap.
- E2E: send to the last chunk, per request.
- Request throughput: successful requests / the cell's duration; total-token throughput: their prompt and
  completion tokens / the same duration. The duration is first send to last finish (vLLM's benchmark duration),
  or an open-loop cell's measured window.

Percentiles interpolate linearly between order statistics (numpy's default, which vLLM uses); means are plain
means. Each latency's samples are counted beside its figures (`ttft_n`, ...: requests, or chunk gaps for ITL), so
that a percentile read from too few of them is marked insufficient wherever it is shown (measure.figures.tails). Only
successful requests count, and in open-loop cells only those inside the measured window. These columns are new
beside older, nearest-rank ones (`ttft_p90_s`, `tpot_p90_s`, ...) that verdicts read, which keep their definition
so that runs recorded before and after judge alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..transport.client import RequestRecord

#: the per-request latencies reported, and the statistics of each
LATENCIES = ("ttft", "tpot", "itl", "e2e")
STATISTICS = ("mean", "p50", "p90", "p99")
#: the samples behind each latency's statistics (requests, or chunk gaps for ITL): what a percentile rests on
#: (measure.figures.tails judges whether it is enough)
COUNT_COLUMNS = [f"{name}_n" for name in LATENCIES]
#: the columns this module adds to cells.parquet, milliseconds for latencies; the counts came last, after the
#: throughputs, so that cells recorded before them keep their columns in place
LATENCY_COLUMNS = [f"{name}_{stat}_ms" for name in LATENCIES for stat in STATISTICS] + [
    "request_rps", "output_tok_s", "total_tok_s"] + COUNT_COLUMNS
_QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _interpolated(ordered: "Sequence[float] | np.ndarray", q: float) -> float:
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (at - low))


def quantile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile, linearly interpolated between order statistics (numpy's default; None without values):
    for [1, 2, 3, 4], p50 is 2.5 and p90 is 3.7."""
    return _interpolated(sorted(values), q) if len(values) else None


def _statistics(name: str, seconds: np.ndarray) -> dict[str, float | None]:
    values = 1000 * seconds
    if not len(values):
        return {f"{name}_{stat}_ms": None for stat in STATISTICS}
    ordered = np.sort(values)
    # The mean adds left to right (cumsum), as figures always did: np.sum adds pairwise and differs in the last
    # bits, and a page must not change because a run's figures were stored at seal rather than computed for it.
    return {f"{name}_mean_ms": float(np.cumsum(values)[-1] / len(values)),
            **{f"{name}_{stat}_ms": _interpolated(ordered, q) for stat, q in _QUANTILES.items()}}


def _floats(values: Iterable[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def of_arrays(send: np.ndarray, first: np.ndarray, last: np.ndarray, prompt: np.ndarray, tokens: np.ndarray,
               gaps: np.ndarray, duration_s: float | None) -> dict[str, float | None]:
    """The figures of one cell from its requests as columns (NaN: not recorded), each request a row."""
    done = ~np.isnan(first) & ~np.isnan(last)
    send, first, last, prompt, tokens = send[done], first[done], last[done], prompt[done], tokens[done]
    many = tokens > 1  # a one-token request has no time per output token
    tpots = (last[many] - first[many]) / (tokens[many] - 1)
    if duration_s is None and len(send):
        duration_s = float(last.max() - send.min())
    # token counts are whole numbers, so their sum is exact however it is added
    output, prompt_sum = float(np.nan_to_num(tokens).sum()), float(np.nan_to_num(prompt).sum())

    def per_second(n: float) -> float | None:
        return float(n / duration_s) if len(send) and duration_s else None

    return {**_statistics("ttft", first - send), **_statistics("tpot", tpots), **_statistics("itl", gaps),
            **_statistics("e2e", last - send), "request_rps": per_second(len(send)),
            "output_tok_s": per_second(output), "total_tok_s": per_second(prompt_sum + output),
            "ttft_n": len(send), "tpot_n": len(tpots), "itl_n": len(gaps), "e2e_n": len(send)}


#: one request as the figures read it: t_send, t_first, t_last, prompt_tokens, completion_tokens
Request = tuple[float, float | None, float | None, int | None, int | None]


def figures(requests: Iterable[Request], gaps: Sequence[float],
            duration_s: float | None = None) -> dict[str, float | None]:
    """A cell's figures from its successful requests and the chunk gaps of those requests. `duration_s`: the
    cell's wall time or an open-loop cell's window; by default the first send to the last finish of the requests."""
    rows = list(requests)
    send, first, last, prompt, tokens = (_floats(column) for column in zip(*rows, strict=True)) if rows else \
        (np.empty(0),) * 5
    return of_arrays(send, first, last, prompt, tokens, _floats(gaps), duration_s)


def of_records(records: Sequence["RequestRecord"], duration_s: float | None = None) -> dict[str, float | None]:
    """The figures of measured requests (their chunk times as the client kept them)."""
    ok = [r for r in records if r.ok and r.t_first is not None and r.t_last is not None]
    gaps = [b - a for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)]
    return figures(((r.t_send, r.t_first, r.t_last, r.prompt_tokens, r.completion_tokens) for r in ok), gaps,
                   duration_s)
