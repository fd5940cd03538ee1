"""Request traces: JSONL files of arrivals and lengths, with the prefix structure a Mooncake trace records.

One request a line. The arrival is `timestamp` in milliseconds (Mooncake's, and the peers' replay formats); the
lengths are `input_length` / `output_length` (Mooncake), or the plain names the peers' replay files use
(`prompt_tokens`, `input_tokens`, `prompt_len`; `output_tokens`, `max_tokens`, `output_len`). A Mooncake line adds
`hash_ids`: one id per block of `block_tokens` prompt tokens (512 in the published traces, the last block may be
partial), and two requests with the same id share that block's tokens. A trace is a local path, a file servebook
ships (`shipped:mooncake-small.jsonl`, from data/traces/), or any fsspec URL (`s3://bucket/trace.jsonl`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..util.errors import InputError
from .load import ReplayPlan

#: the prefix of a trace servebook ships in data/traces/
SHIPPED = "shipped:"
_INPUT = ("input_length", "prompt_tokens", "input_tokens", "prompt_len")
_OUTPUT = ("output_length", "output_tokens", "max_tokens", "output_len")
#: the longest replay a plan may ask for without saying so: as replay.max_duration_s allows at most. A trace whose
#: stamps run hours or years ahead (a unit mistaken, a stamp from another clock) would otherwise wait them out.
LONGEST_REPLAY_S = 3600.0


@dataclass(frozen=True)
class TraceRow:
    arrival_s: float  # from the trace's first request
    input_tokens: int
    output_tokens: int
    #: Mooncake's block ids of the prompt, in order; None in a trace without prefix structure
    hash_ids: tuple[int, ...] | None = None


def trace_text(source: str | Path) -> str:
    """The trace's text, from a path, a shipped trace or an fsspec URL."""
    name = str(source)
    if name.startswith(SHIPPED):
        from ..util.resources import shipped

        resource = shipped("traces", name[len(SHIPPED):])
        if not resource.is_file():
            raise InputError(f"{name}: servebook ships no such trace (data/traces/)")
        return _decoded(name, resource.read_bytes())
    if "://" in name:
        import fsspec

        try:
            with fsspec.open(name, "rb") as handle:
                return _decoded(name, handle.read())
        except FileNotFoundError:
            raise InputError(f"{name}: no trace at that URL") from None
        except (ValueError, ImportError) as error:  # fsspec: "Protocol not known", or a protocol's package missing
            raise InputError(f"{name}: cannot open that URL ({error})") from None
    if not Path(name).is_file():
        raise InputError(f"{name}: no such trace file (a path, shipped:NAME or an fsspec URL)")
    return _decoded(name, Path(name).read_bytes())


def _decoded(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{name}: the trace is not UTF-8 text (byte {error.start}); a trace is JSON lines") from None


def _first(item: dict, names: tuple[str, ...]) -> int:
    for name in names:
        if name in item:
            return int(item[name])
    raise KeyError(" or ".join(names))


def _row(item: object) -> TraceRow:
    if not isinstance(item, dict):
        raise TypeError(f"the line is a JSON {type(item).__name__}, not an object")
    hashes = item.get("hash_ids")
    if hashes is not None and (not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes)):
        raise TypeError("hash_ids must be a list of integers")
    row = TraceRow(float(item["timestamp"]) / 1000, _first(item, _INPUT), _first(item, _OUTPUT),
                   None if hashes is None else tuple(hashes))
    if row.input_tokens < 1 or row.output_tokens < 1:
        raise ValueError("lengths must be at least 1")
    if not math.isfinite(row.arrival_s):  # JSON's NaN and Infinity parse, and would send everything at once
        raise ValueError(f"timestamp {item['timestamp']!r} is not a finite number")
    return row


def read_rows(source: str | Path) -> list[TraceRow]:
    """Every request of a trace, in arrival order, its arrivals counted from the first."""
    rows = []
    for number, line in enumerate(trace_text(source).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(_row(json.loads(line)))
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(f"{source}:{number}: a trace line needs timestamp (ms), input_length and output_length "
                             f"(or prompt_tokens and output_tokens), and hash_ids as a list of integers if any "
                             f"({error})") from None
    if not rows:
        raise InputError(f"{source}: the trace has no requests")
    start = min(r.arrival_s for r in rows)
    ordered = sorted(rows, key=lambda r: r.arrival_s)  # stable: requests of one instant keep the trace's order
    return [TraceRow(r.arrival_s - start, r.input_tokens, r.output_tokens, r.hash_ids) for r in ordered]


def ideal_hit_rate(rows: list[TraceRow], block_tokens: int = 512) -> float | None:
    """The share of the trace's prompt tokens a perfect prefix cache serves (`ideal_cached`); None for a trace
    without hash_ids."""
    cached = ideal_cached(rows, block_tokens)
    prompt = sum(r.input_tokens for r in rows)
    return None if cached is None or not prompt else sum(cached) / prompt


def ideal_cached(rows: list[TraceRow], block_tokens: int = 512) -> list[int] | None:
    """Per request, the prompt tokens a perfect prefix cache (unbounded, never evicting) serves: the leading run of
    its blocks that earlier requests already had at the same place after the same blocks (a prefix cache reuses a
    common prefix only), a partial block counting the tokens both hold; capped one token short of the prompt, as
    an engine computes at least the last prompt token to sample the first output. None for a trace without
    hash_ids."""
    if not rows or any(r.hash_ids is None for r in rows):
        return None
    seen: dict[tuple[int, ...], int] = {}  # a prefix of blocks, to the most tokens of its last block seen
    out = []
    for row in rows:
        lengths = block_lengths(row, block_tokens)
        blocks = (row.hash_ids or ())[:len(lengths)]
        hit, matching = 0, True
        for j, length in enumerate(lengths[:len(blocks)]):
            key = blocks[:j + 1]
            held = seen.get(key, 0)
            if matching:
                hit += min(held, length)
                matching = held >= length
            seen[key] = max(held, length)
        out.append(min(hit, row.input_tokens - 1))
    return out


def block_lengths(row: TraceRow, block_tokens: int = 512) -> list[int]:
    """The prompt's tokens per block: full blocks, the last cut to the prompt's length; blocks beyond the hash ids
    (a trace whose ids cover less than its input_length) are the request's own."""
    full, rest = divmod(row.input_tokens, block_tokens)
    return [block_tokens] * full + ([rest] if rest else [])


def replayed(rows: list[TraceRow], plan: ReplayPlan) -> list[TraceRow]:
    """The requests a replay sends: arrivals scaled by `time_scale`, cut to `max_requests` and `max_duration_s`,
    outputs of at least 2 tokens (an inter-token time each)."""
    out = [TraceRow(r.arrival_s * plan.time_scale, r.input_tokens, max(r.output_tokens, 2), r.hash_ids)
           for r in rows]
    if plan.max_duration_s is not None:
        out = [r for r in out if r.arrival_s <= plan.max_duration_s]
    return out[:plan.max_requests] if plan.max_requests else out


def longest_replayed(plan: ReplayPlan) -> int:
    """Prompt and output tokens of the longest request a replay sends, for the check before launch; InputError for
    a replay longer than `LONGEST_REPLAY_S` that no max_duration_s bounds."""
    rows = replayed(read_rows(plan.trace), plan)
    span = rows[-1].arrival_s if rows else 0.0
    if span > LONGEST_REPLAY_S:
        raise InputError(f"replay.trace {plan.trace}: its arrivals span {span:,.0f} s after time_scale "
                         f"{plan.time_scale:g}, past the {LONGEST_REPLAY_S:g} s a replay may take; set "
                         "replay.max_duration_s (or max_requests, or a smaller time_scale), or check the stamps are "
                         "in milliseconds")
    return max(r.input_tokens + r.output_tokens for r in rows)
