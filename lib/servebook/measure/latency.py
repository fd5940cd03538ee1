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
means. Only successful requests count, and in open-loop cells only those inside the measured window. These columns
are new beside older, nearest-rank ones (`ttft_p90_s`, `tpot_p90_s`, ...) that verdicts read, which keep their
definition so that runs recorded before and after judge alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from .client import RequestRecord

#: the per-request latencies reported, and the statistics of each
LATENCIES = ("ttft", "tpot", "itl", "e2e")
STATISTICS = ("mean", "p50", "p90", "p99")
#: the columns this module adds to cells.parquet, milliseconds for latencies
LATENCY_COLUMNS = [f"{name}_{stat}_ms" for name in LATENCIES for stat in STATISTICS] + [
    "request_rps", "output_tok_s", "total_tok_s"]


def quantile(values: Sequence[float], q: float) -> float | None:
    """The `q` quantile, linearly interpolated between order statistics (numpy's default; None without values):
    for [1, 2, 3, 4], p50 is 2.5 and p90 is 3.7."""
    if not values:
        return None
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _statistics(name: str, seconds: Sequence[float]) -> dict[str, float | None]:
    values = [1000 * v for v in seconds]
    return {f"{name}_mean_ms": sum(values) / len(values) if values else None,
            f"{name}_p50_ms": quantile(values, 0.5), f"{name}_p90_ms": quantile(values, 0.9),
            f"{name}_p99_ms": quantile(values, 0.99)}


#: one request as the figures read it: t_send, t_first, t_last, prompt_tokens, completion_tokens
Request = tuple[float, float | None, float | None, int | None, int | None]


def figures(requests: Iterable[Request], gaps: Sequence[float],
            duration_s: float | None = None) -> dict[str, float | None]:
    """A cell's figures from its successful requests and the chunk gaps of those requests. `duration_s`: the
    cell's wall time or an open-loop cell's window; by default the first send to the last finish of the requests."""
    done = [(send, first, last, prompt or 0, tokens) for send, first, last, prompt, tokens in requests
            if first is not None and last is not None]
    ttfts = [first - send for send, first, _, _, _ in done]
    e2es = [last - send for send, _, last, _, _ in done]
    tpots = [(last - first) / (tokens - 1) for _, first, last, _, tokens in done if tokens is not None and tokens > 1]
    if duration_s is None and done:
        duration_s = max(r[2] for r in done) - min(r[0] for r in done)
    output = sum(r[4] or 0 for r in done)
    prompt = sum(r[3] for r in done)

    def per_second(n: float) -> float | None:
        return n / duration_s if done and duration_s else None

    return {**_statistics("ttft", ttfts), **_statistics("tpot", tpots), **_statistics("itl", gaps),
            **_statistics("e2e", e2es), "request_rps": per_second(len(done)), "output_tok_s": per_second(output),
            "total_tok_s": per_second(prompt + output)}


def of_records(records: Sequence["RequestRecord"], duration_s: float | None = None) -> dict[str, float | None]:
    """The figures of measured requests (their chunk times as the client kept them)."""
    ok = [r for r in records if r.ok and r.t_first is not None and r.t_last is not None]
    gaps = [b - a for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)]
    return figures(((r.t_send, r.t_first, r.t_last, r.prompt_tokens, r.completion_tokens) for r in ok), gaps,
                   duration_s)


def value(v: Any) -> Any:
    """None for a missing value (None, NaN, pandas NA): parquet gives NaN where the run wrote None."""
    import pandas as pd

    return None if v is None or pd.isna(v) else v


def _cell_of_table(cell: dict[str, Any], requests: "pd.DataFrame", chunks: "pd.DataFrame | None") -> dict:
    """One cell's figures from the stored requests and chunks tables (a run sealed before these columns)."""
    mine = requests[(requests["cell_id"] == cell["cell_id"]) & requests["error"].isna()
                    & requests["completion_tokens"].notna()]
    duration = value(cell.get("wall_s"))
    from .kinds import traits_of  # the kinds import this module

    if traits_of(cell.get("kind")).open_loop:
        if "measured" in mine:
            mine = mine[mine["measured"].astype(bool)]
        achieved = cell.get("achieved_rps")
        # the window is not stored; the achieved rate is the measured window's successful requests over it
        duration = len(mine) / achieved if achieved and achieved == achieved and len(mine) else None
    gaps: list[float] = []
    if chunks is not None and not chunks.empty:
        own = chunks[chunks["request_id"].isin(set(mine["request_id"])) & chunks["gap_s"].notna()]
        gaps = [float(g) for g in own["gap_s"]]
    rows = ((float(r.t_send), value(r.t_first), value(r.t_last), value(r.prompt_tokens), value(r.completion_tokens))
            for r in mine.itertuples())
    return figures(rows, gaps, duration)


def with_latency(cells: "pd.DataFrame", requests: "pd.DataFrame | None",
                 chunks: "pd.DataFrame | None") -> "pd.DataFrame":
    """`cells` with the latency columns, computed from the run's requests and chunks where a run recorded before
    they existed lacks them; a run that has them is returned as it is, and nothing is written back."""
    if cells.empty or set(LATENCY_COLUMNS) <= set(cells.columns) or requests is None or requests.empty:
        return cells
    from .kinds import traits_of  # the kinds import this module

    found = [_cell_of_table({str(k): v for k, v in cell.items()}, requests, chunks)
             if not traits_of(cell.get("kind")).derived else {} for cell in cells.to_dict("records")]
    out = cells.copy()
    for column in LATENCY_COLUMNS:
        if column not in out:
            out[column] = [f.get(column) for f in found]
    return out
