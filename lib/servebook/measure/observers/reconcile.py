"""Reconciling the client's token counts with the engine's own counters over a cell.

The engine adapter has already turned counter deltas into client-comparable terms
(`ServerCounts`); this module only does the comparison and says by how much it is off.

An engine's generation counter counts every token it decoded, a reasoning model's thinking and its answer alike:
where the client told them apart in every stream, the check is of reasoning + answer against that counter and says
so; where some stream's reasoning count is not known, the cell is reconciled on the total only, marked so (`split`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from ...engines import ServerCounts

#: how a cell's reasoning streams were reconciled: reasoning and answer told apart in every stream ("split"), or some
#: stream's reasoning count unknown, so only their total ("total_only"); None: no stream carried reasoning
SplitStatus = Literal["split", "total_only"]


@dataclass(frozen=True)
class ClientCounts:
    prompt_tokens: int | None
    cached_tokens: int | None  # None: some response's usage did not say (not the same as 0)
    completion_tokens: int | None
    #: a reasoning model's completion tokens told apart (measure.figures.reasoning.client_split); None where not known
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    split: SplitStatus | None = None


@dataclass(frozen=True)
class Check:
    name: str
    client: float | None
    server: float | None
    #: what the client's figure is the sum of, for the reader ((reasoning, 130), (answer, 110))
    parts: tuple[tuple[str, float], ...] = ()

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
    split: SplitStatus | None = None

    @property
    def message(self) -> str:
        if self.status == "not_available" and not self.checks:
            return "reconciliation not available (engine exposes no usable counters)"
        parts = [_check_text(check) for check in self.checks]
        if self.split == "total_only":
            parts.append("reasoning and answer not told apart in every stream: reconciled on their total only")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"status": self.status, "message": self.message, "split": self.split,
                "checks": [asdict(c) | {"difference": c.difference} for c in self.checks]}


def _check_text(check: Check) -> str:
    summed = f" ({' + '.join(f'{name} {value:g}' for name, value in check.parts)})" if check.parts else ""
    if check.server is None:
        return f"{check.name}: no server counter, not checked"
    if check.client is None:
        return f"{check.name}: not in the responses' usage, not checked"
    if check.ok:
        return f"{check.name} {check.client:g}{summed} = server"
    pct = 100.0 * (check.difference or 0.0) / check.client if check.client else float("inf")
    return (f"{check.name}{summed}: client {check.client:g}, server {check.server:g} "
            f"({check.difference:+g}, {pct:+.1f}%)")


def reconcile(client: ClientCounts, server: ServerCounts | None) -> Reconciliation:
    """`ok` only when every count was checked and agrees; a disagreement is a `mismatch`; anything that could
    not be checked on either side makes it `not_available`, with the checks that did run kept for the reader."""
    if server is None:
        return Reconciliation("not_available", split=client.split)
    checks = [
        Check("prompt tokens", client.prompt_tokens, server.prompt_tokens),
        _generated(client, server),
        Check("cached tokens", client.cached_tokens, server.cached_tokens),
    ]
    if any(c.ok is False for c in checks):
        return Reconciliation("mismatch", checks, client.split)
    if any(c.ok is None for c in checks):
        return Reconciliation("not_available", checks, client.split)
    return Reconciliation("ok", checks, client.split)


def _generated(client: ClientCounts, server: ServerCounts) -> Check:
    """The engine's generation counter against the client's tokens: reasoning + answer where every stream told them
    apart, else the streams' total."""
    reasoning, answer = client.reasoning_tokens, client.answer_tokens
    if client.split == "split" and reasoning is not None and answer is not None:
        return Check("generated tokens", reasoning + answer, server.generation_tokens,
                     (("reasoning", reasoning), ("answer", answer)))
    return Check("generated tokens", client.completion_tokens, server.generation_tokens)


def server_cached_tokens(reconciliation: Reconciliation) -> float | None:
    """What the engine's own counter says was served from its prompt cache over the cell, if it says."""
    return next((c.server for c in reconciliation.checks if c.name == "cached tokens"), None)
