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
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Check:
    name: str
    client: float
    server: float | None

    @property
    def difference(self) -> float | None:
        return None if self.server is None else self.server - self.client

    @property
    def ok(self) -> bool | None:
        return None if self.server is None else self.difference == 0


@dataclass(frozen=True)
class Reconciliation:
    status: Literal["ok", "mismatch", "not_available"]
    checks: list[Check] = field(default_factory=list)

    @property
    def message(self) -> str:
        if self.status == "not_available":
            return "reconciliation not available (engine exposes no usable counters)"
        parts = []
        for check in self.checks:
            if check.server is None:
                parts.append(f"{check.name}: no server counter")
            elif check.ok:
                parts.append(f"{check.name} {check.client:g} = server")
            else:
                pct = 100.0 * check.difference / check.client if check.client else float("inf")
                parts.append(
                    f"{check.name}: client {check.client:g}, server {check.server:g} "
                    f"({check.difference:+g}, {pct:+.1f}%)"
                )
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message,
                "checks": [asdict(c) | {"difference": c.difference} for c in self.checks]}


def reconcile(client: ClientCounts, server: ServerCounts | None) -> Reconciliation:
    if server is None or (server.prompt_tokens is None and server.generation_tokens is None):
        return Reconciliation("not_available")
    checks = [
        Check("prompt tokens", client.prompt_tokens, server.prompt_tokens),
        Check("generated tokens", client.completion_tokens, server.generation_tokens),
    ]
    if server.cached_tokens is not None:
        checks.append(Check("cached tokens", client.cached_tokens, server.cached_tokens))
    judged = [c for c in checks if c.ok is not None]
    status = "ok" if judged and all(c.ok for c in judged) else "mismatch"
    return Reconciliation(status, checks)
