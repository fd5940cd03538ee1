"""Reconciling the client's token counts with the engine's own counters over a cell.

The engine adapter has already turned counter deltas into client-comparable terms
(`ServerCounts`); this module only does the comparison and says by how much it is off.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from ..engines import ServerCounts


@dataclass(frozen=True)
class ClientCounts:
    prompt_tokens: int | None
    cached_tokens: int | None  # None: some response's usage did not say (not the same as 0)
    completion_tokens: int | None


@dataclass(frozen=True)
class Check:
    name: str
    client: float | None
    server: float | None

    @property
    def difference(self) -> float | None:
        return None if self.server is None or self.client is None else self.server - self.client

    @property
    def ok(self) -> bool | None:
        """None when one side did not report: not checked, which is never the same as ok."""
        return None if self.difference is None else self.difference == 0


@dataclass(frozen=True)
class Reconciliation:
    status: Literal["ok", "mismatch", "not_available"]
    checks: list[Check] = field(default_factory=list)

    @property
    def message(self) -> str:
        if self.status == "not_available" and not self.checks:
            return "reconciliation not available (engine exposes no usable counters)"
        parts = []
        for check in self.checks:
            if check.server is None:
                parts.append(f"{check.name}: no server counter, not checked")
            elif check.client is None:
                parts.append(f"{check.name}: not in the responses' usage, not checked")
            elif check.ok:
                parts.append(f"{check.name} {check.client:g} = server")
            else:
                pct = 100.0 * (check.difference or 0.0) / check.client if check.client else float("inf")
                parts.append(
                    f"{check.name}: client {check.client:g}, server {check.server:g} "
                    f"({check.difference:+g}, {pct:+.1f}%)"
                )
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message,
                "checks": [asdict(c) | {"difference": c.difference} for c in self.checks]}


def reconcile(client: ClientCounts, server: ServerCounts | None) -> Reconciliation:
    """`ok` only when every count was checked and agrees; a disagreement is a `mismatch`; anything that could
    not be checked on either side makes it `not_available`, with the checks that did run kept for the reader."""
    if server is None:
        return Reconciliation("not_available")
    checks = [
        Check("prompt tokens", client.prompt_tokens, server.prompt_tokens),
        Check("generated tokens", client.completion_tokens, server.generation_tokens),
        Check("cached tokens", client.cached_tokens, server.cached_tokens),
    ]
    if any(c.ok is False for c in checks):
        return Reconciliation("mismatch", checks)
    if any(c.ok is None for c in checks):
        return Reconciliation("not_available", checks)
    return Reconciliation("ok", checks)


def server_cached_tokens(reconciliation: Reconciliation) -> float | None:
    """What the engine's own counter says was served from its prompt cache over the cell, if it says."""
    return next((c.server for c in reconciliation.checks if c.name == "cached tokens"), None)
