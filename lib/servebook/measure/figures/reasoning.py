"""A reasoning model's cell figures: its thinking and its answer told apart, from the requests' own records.

Each chat stream's reasoning deltas and answer deltas were kept apart by the client (measure.transport.client):
when the first of each arrived, how many tokens were reasoning and whence that count. Over a cell these give the
time to the first
reasoning token and to the first answer token (the wait a user of a reasoning model has before the answer starts),
the reasoning and answer tokens, and each phase's own decode rate, medians over requests as the other per-request
figures are. docs/reasoning.md defines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..observers.reconcile import SplitStatus
from ..transport.client import RequestRecord
from .stats import median_of

#: the columns this module adds to cells.parquet (None where no stream carried reasoning, or for a journal written
#: before them)
REASONING_COLUMNS = ("reasoning_ttft_s", "answer_ttft_s", "reasoning_tokens", "answer_tokens", "reasoning_tok_s",
                     "answer_tok_s", "reasoning_split")


def is_reasoning(record: RequestRecord) -> bool:
    """Whether the request's stream carried reasoning, or its engine counted some."""
    return record.reasoning_chunks > 0 or bool(record.reasoning_tokens)


def split_status(records: Sequence[RequestRecord]) -> SplitStatus | None:
    """"split" when every successful stream's reasoning count is known and some stream reasoned, "total_only" when
    some reasoned and a count is unknown; None when none reasoned (nothing to tell apart)."""
    ok = [r for r in records if r.ok]
    if not any(is_reasoning(r) for r in ok):
        return None
    return "split" if all(r.reasoning_tokens is not None for r in ok) else "total_only"


def client_split(records: Sequence[RequestRecord]) -> tuple[int | None, int | None, SplitStatus | None]:
    """The cell's reasoning and answer tokens (None unless every successful stream's split is known), and its status."""
    status = split_status(records)
    if status != "split":
        return None, None, status
    ok = [r for r in records if r.ok]
    return sum(r.reasoning_tokens or 0 for r in ok), sum(r.answer_tokens or 0 for r in ok), status


def reasoning_figures(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The cell's reasoning figures. The time to the first answer token is a figure of every chat cell (it is the TTFT
    where nothing reasons); the rest only where some stream reasoned."""
    ok = [r for r in records if r.ok]
    reasoning, answer, status = client_split(ok)
    figures: dict[str, Any] = dict.fromkeys(REASONING_COLUMNS)
    figures["answer_ttft_s"] = median_of([t for r in ok if (t := r.answer_ttft) is not None])
    if status is None:
        return figures
    figures.update(
        reasoning_ttft_s=median_of([t for r in ok if (t := r.reasoning_ttft) is not None]),
        reasoning_tokens=reasoning, answer_tokens=answer,
        reasoning_tok_s=median_of([v for r in ok if (v := r.reasoning_rate) is not None]),
        answer_tok_s=median_of([v for r in ok if (v := r.answer_rate) is not None]),
        reasoning_split=status)
    return figures
