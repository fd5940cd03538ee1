"""What passes between the measurement loop and the cell kinds, apart from both: a cell's spec, an open-loop cell's
measured window, and what a kind is handed: requests to send with (`Requests`, the run's `Workloads`) or, for a
kind derived from other cells, cells to run (`CellRunner`, the run's `Measurement`).

The kinds are typed against these protocols, never against the loop or the workloads, so the loop dispatches to
the kinds (`kind_of(spec.kind).send(...)`) and no kind imports the loop: the import graph has no circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .transport.client import RequestRecord, StreamRequest

if TYPE_CHECKING:
    import httpx
    from openai import AsyncOpenAI

    from ..config.plan import Plan
    from .transport.direct import Streams
    from .transport.endpoint import Endpoint
    from .transport.senders import Senders

OnDone = Callable[[], None]


@dataclass(frozen=True)
class CellSpec:
    cell_id: str
    #: the cell's kind: a name in the registry (measure/kinds/)
    kind: str
    category: str
    concurrency: int
    n_requests: int
    output_tokens: int
    prompt_tokens: int | None = None
    min_s: float | None = None  # keep sending (at the same concurrency) until the cell lasted this long
    rate: float | None = None  # open-loop cells: requests per second
    window_s: float | None = None  # open-loop cells: the measured window, when not the load section's (probes)
    #: closed-loop decode in a resident round: measured in this many slices, the turn handed on between them
    slices: int = 1

    @property
    def max_requests(self) -> int:
        """A bound on a cell extended by `min_s`, so a very slow engine cannot keep it going forever."""
        return self.n_requests if self.min_s is None else max(self.n_requests, 64 * self.concurrency)


@dataclass(frozen=True)
class Window:
    """An open-loop cell's measured window: its figures, the requests counted in it, and its length."""

    figures: dict[str, Any]
    measured: list[RequestRecord]
    seconds: float | None


class Requests(Protocol):
    """What a kind needs to send a cell's requests (measure.workloads.Workloads is the run's)."""

    endpoint: Endpoint
    plan: Plan
    #: the run's tag: what makes this run's prompts its own
    tag: str
    http: httpx.AsyncClient
    openai: AsyncOpenAI
    #: what a kind reads once per run and keeps (the load kind's trace)
    cache: dict[str, Any]
    #: sending processes for loads beyond one process's pace
    senders: Senders
    #: a sliced cell's pause between its slices (the round's turn handed on)
    handover: Callable[[int], Awaitable[None]]
    #: raises once the engine is dead; an open-loop schedule stops on it
    alive_check: Callable[[], None]
    #: what was sent for each request whose text is kept, until the cell's realism reads it
    sent: dict[str, StreamRequest]

    @property
    def streams(self) -> Streams: ...

    async def stream(self, record: RequestRecord, request: StreamRequest) -> RequestRecord: ...

    async def tokenize(self, text: str) -> list[int]: ...

    def record(self, spec: CellSpec, request_id: str, output_tokens: int, **extra: Any) -> RequestRecord: ...

    def request(self, output_tokens: int, **fields: Any) -> StreamRequest: ...

    async def filler(self, category: str) -> list[int]: ...

    async def opener(self) -> int: ...

    async def unique_prompt(self, category: str, length: int, tag: str,
                            record: RequestRecord | None = None) -> list[int]: ...


class MeasuredCell(Protocol):
    """A cell as it was measured: its row and its requests (measure.log.CellOutcome)."""

    @property
    def summary(self) -> Mapping[str, Any]: ...

    @property
    def records(self) -> list[RequestRecord]: ...


class CellRunner(Protocol):
    """What a derived kind needs to run cells: each measured and recorded as every other cell of the run
    (measure.loop.Measurement)."""

    async def run_cell(self, spec: CellSpec, on_done: OnDone = ...) -> MeasuredCell: ...


class Steps(Protocol):
    """A resident round's turns (measure.turns): each step waits for this run's turn."""

    def step(self) -> AbstractAsyncContextManager[None]: ...
