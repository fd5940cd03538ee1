"""A stalled deployment: a stretch of a cell in which no stream received anything while requests were mid-stream.

A router, a replica or an engine that freezes (SIGSTOP, a hung scheduler, a swap storm) leaves the client waiting;
when it resumes, every request completes and the cell's figures just read slow (a 90 s freeze of the router made
510 tok/s read as 32). What gives it away is the cell's own arrivals: every content chunk, first token, finish and
failure of every stream, on the client's one monotonic clock. Between two consecutive arrivals nothing reached the
client at all; such a window is a stall when

- at least one request was mid-stream across it: it had received its first token before the window and ended
  after it (its own chunks are kept, so its silence is known). Requests still waiting for their first token do not
  count: a cold prefill of a long prompt is seconds of silence on a small host, and is the cell's TTFT, not a stall;
- and it is longer than the limit: the floor (`STALL_FLOOR_S`), and `STALL_FACTOR` times the cell's own longest
  ordinary wait, its median TTFT or the 90th percentile of its chunk gaps, whichever is longer. A decode stream
  legitimately waits while another request's prompt is read beside it (an engine without chunked prefill reads it
  whole), and that wait is at most about a first-token time; the median and the 90th percentile, not the maximum,
  so that the stall itself does not set its own limit.

Where the records say which replica served a request (several replicas without a router), each replica's streams
are judged apart, so a frozen replica is named and is found even while the other one serves on. Behind a router the
cell is judged as one. Cells whose chunk times are not kept (plan.record_chunks off) have no mid-stream request
and are not judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .figures.itl import chunk_gaps
from .figures.latency import quantile

if TYPE_CHECKING:
    from .transport.records import RequestRecord

#: nothing at all for this long while a request is mid-stream is a stall, however slow the cell is otherwise ...
STALL_FLOOR_S = 3.0
#: ... if it is also this many times the cell's own longest ordinary wait (median TTFT, 90th-percentile chunk gap)
STALL_FACTOR = 5.0


@dataclass(frozen=True)
class Stall:
    """The longest silence of a cell (or of one replica's streams) while requests were mid-stream."""

    gap_s: float
    #: when it began, from the cell's first send
    at_s: float
    #: requests mid-stream across it
    streams: int
    #: the replica whose streams fell silent (None: the cell's streams together)
    replica: int | None = None


@dataclass(frozen=True)
class StallLimit:
    seconds: float
    #: which term set it, for the reason's text
    basis: str


def stall_limit(records: Sequence["RequestRecord"]) -> StallLimit:
    """The longest silence the cell's own pace allows (see the module's doc)."""
    ok = [r for r in records if r.ok]
    ttft = quantile([r.ttft for r in ok if r.ttft is not None], 0.5) or 0.0
    gap = quantile([g for r in ok for g in chunk_gaps(r)], 0.9) or 0.0
    terms = [(STALL_FLOOR_S, f"the {STALL_FLOOR_S:g} s floor"),
             (STALL_FACTOR * ttft, f"{STALL_FACTOR:g}x the cell's median TTFT of {ttft:.2f} s"),
             (STALL_FACTOR * gap, f"{STALL_FACTOR:g}x its 90th-percentile chunk gap of {gap:.2f} s")]
    seconds, basis = max(terms, key=lambda term: term[0])
    return StallLimit(seconds, basis)


def longest_stall(records: Sequence["RequestRecord"]) -> Stall | None:
    """The longest silence while requests were mid-stream: the worst replica's where the records name replicas, the
    cell's otherwise (None: no request was ever mid-stream with its chunks kept)."""
    sends = [r.t_send for r in records if r.t_send]
    origin = min(sends) if sends else 0.0
    known = sorted({r.replica for r in records if r.replica is not None})
    replicas: list[int | None] = [*known] if known else [None]
    found = [s for k in replicas
             if (s := _silence([r for r in records if k is None or r.replica == k], origin, k)) is not None]
    return max(found, key=lambda s: s.gap_s, default=None)


def _silence(records: Sequence["RequestRecord"], origin: float, replica: int | None) -> Stall | None:
    arrivals = {t for r in records for t in (*r.chunk_times, r.t_first, r.t_last) if t is not None}
    if len(arrivals) < 2:
        return None
    events = np.array(sorted(arrivals))
    # Window i runs from events[i] to events[i + 1]; nothing arrived inside it. A request is mid-stream across it
    # when its first token came at or before its start and it ended at or after its end: as both are arrivals,
    # counted by the difference array below.
    opened = np.zeros(len(events), dtype=int)
    for r in records:
        if r.chunk_times and r.t_first is not None and r.t_last is not None and r.t_last > r.t_first:
            first, last = np.searchsorted(events, [r.t_first, r.t_last])
            opened[first] += 1
            opened[last] -= 1
    streams = np.cumsum(opened)[:-1]
    gaps = np.where(streams > 0, np.diff(events), 0.0)
    i = int(np.argmax(gaps))
    if gaps[i] <= 0:
        return None
    return Stall(float(gaps[i]), float(events[i] - origin), int(streams[i]), replica)
