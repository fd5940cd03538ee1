"""The replicas of one candidate, side by side per cell (measure.observers.replicas): each one's share of the
requests and the tokens, its own prefix hit rate, the balance of their work and how much of the ideal prefix cache
the routing kept."""

from __future__ import annotations

import json
from typing import Any

from ..measure.kinds import traits_of
from ..util.render import Table
from .tables import _rows, fmt, records

REPLICA_TITLE = "Replicas per cell"
REPLICA_DEFINITIONS = [
    "Per replica, in replica order, from each replica's own counters: generated tokens, and its cached prompt tokens "
    "over its prompt tokens (hit rate). Requests: where servebook chose the replica (no router); a router's choices "
    "are not seen from the client. Balance: the lightest replica's share of the generated tokens against an even "
    "split (1.0: even). Cache kept: the replicas' cached tokens, summed, over what a perfect prefix cache would have "
    "served the cell's requests (agent turns, trace replay, prompt reuse): a conversation sent to another replica "
    "than the one holding its prefix loses it.",
]


def _each(value: Any, spec: str) -> str:
    """A per-replica JSON list as 'a / b' ('-' for a replica without the figure, or a cell without the list)."""
    if not isinstance(value, str):
        return "-"
    try:
        items = json.loads(value)
    except ValueError:
        return "-"
    return " / ".join(fmt(v, spec) for v in items) if isinstance(items, list) else "-"


def replica_table(cells, label: str | None = None) -> Table | None:
    """Per cell of a candidate with several replicas: serving replicas, requests and tokens per replica, hit rates,
    balance and the share of the ideal cache kept."""
    rows = [c for c in records(cells) if not traits_of(c.get("kind")).derived
            and isinstance(c.get("replica_generation_tokens"), str)]
    if not rows:
        return None
    table = Table(([label.capitalize()] if label else []) + ["Cell", "Serving", "Requests", "Generated tokens",
                                                             "Hit rate", "Balance", "Cache kept"],
                  title=REPLICA_TITLE)
    for cell in _rows(rows, ["order"]) if label else rows:
        requests = cell.get("replica_requests")
        table.add(([cell[label]] if label else []) + [
            cell["cell_id"], fmt(cell.get("replicas_serving"), ".0f"),
            _each(requests, ".0f") if isinstance(requests, str) else "router",
            _each(cell.get("replica_generation_tokens"), ".0f"), _each(cell.get("replica_hit_rates"), ".0%"),
            fmt(cell.get("replica_balance"), ".2f"), fmt(cell.get("cache_kept"), ".0%")],
            "" if cell.get("valid") else "invalid")
    return table
