"""A trace replayed with its prefix structure: every hash id one block of tokens, the same wherever it occurs.

A block's tokens are drawn from the run's filler text, deterministically from the block's id and a per-run salt:
within a run, two requests that share an id share those tokens exactly (token-id prompts, nothing retokenized), so
the engine's prefix cache can reuse what the trace says it could; across runs the salt differs, so no run finds its
blocks cached by an earlier one on the same engine. A block starts with a few tokens that spell its id (first its id
plus the salt, so two blocks of one run differ at their first token unless their ids are n apart, and the same block
of two runs differs there too): a cache matches them token by token and stops at the first block that differs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ....config.load import ReplayPlan
from ....config.traces import TraceRow, block_lengths, ideal_hit_rate
from ...openloop import percentile
from ...transport.client import RequestRecord


def run_salt(tag: str) -> int:
    """The salt of a run's blocks, from its tag (the run id)."""
    return int.from_bytes(hashlib.sha256(f"replay:{tag}".encode()).digest()[:6], "big")


@dataclass(frozen=True)
class BlockMaker:
    """Token blocks of a run: `vocabulary` the distinct tokens a block's head is spelled in, `filler` the running
    text its body is cut from."""

    vocabulary: tuple[int, ...]
    filler: tuple[int, ...]
    salt: int

    def block(self, hash_id: int, length: int) -> list[int]:
        """Block `hash_id`'s first `length` tokens (a partial block is a prefix of the full one)."""
        n, s = len(self.vocabulary), self.salt
        head = [(hash_id + s) % n, (hash_id // n) % n, (hash_id // n ** 2) % n, (s // n) % n, (s // n ** 2) % n]
        tokens = [self.vocabulary[i] for i in head]
        start = (hash_id * 7919 + s) % len(self.filler)
        while len(tokens) < length:
            take = self.filler[start:start + length - len(tokens)]
            tokens.extend(take)
            start = 0
        return tokens[:length]

    def prompt(self, row: TraceRow, index: int, block_tokens: int) -> list[int]:
        """The request's prompt of exactly `input_tokens`: its blocks in order, the last cut; blocks its hash ids do
        not cover (a plain trace has none) are its own, spelled from ids no hash id of a trace uses."""
        hashes = row.hash_ids or ()
        out: list[int] = []
        for j, length in enumerate(block_lengths(row, block_tokens)):
            own = -(index * 4096 + j + 1)  # negative: never a trace's id
            out.extend(self.block(hashes[j] if j < len(hashes) else own, length))
        return out


def make_blocks(filler: list[int], salt: int) -> BlockMaker:
    vocabulary = tuple(sorted(set(filler)))
    if len(vocabulary) < 16:
        raise ValueError("the filler text has too few distinct tokens to spell block ids")
    return BlockMaker(vocabulary, tuple(filler), salt)


def replay_figures(rows: list[TraceRow], records: list[RequestRecord], plan: ReplayPlan) -> dict[str, float | None]:
    """The trace's ideal prefix hit rate (config.traces) beside the one measured (cached over prompt tokens, as
    the responses report them and the engine's counters are reconciled with), the replayed span, and the rate."""
    ok = [r for r in records if r.ok]
    prompt = sum(r.prompt_tokens or 0 for r in ok)
    cached = [r.cached_tokens for r in ok]
    measured = None if not prompt or any(c is None for c in cached) else sum(c or 0 for c in cached) / prompt
    span = rows[-1].arrival_s if rows else 0.0
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    return {"ideal_hit_rate": ideal_hit_rate(rows, plan.block_tokens), "measured_hit_rate": measured,
            "trace_span_s": span, "trace_rps": (len(rows) - 1) / span if span > 0 else None,
            # the replay's own judged TTFT: a column apart from decode's ttft_p90_s, so a rule names which it means
            "replay_ttft_p90_s": percentile(ttfts, 0.9) if ttfts else None,
            # the requests it rests on (measure.figures.tails: a p90 needs 64 at 99% confidence)
            "replay_ttft_n": len(ttfts)}
