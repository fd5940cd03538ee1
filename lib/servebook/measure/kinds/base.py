"""What a cell kind is: the cells a plan yields for it, how they are sent, summarised, checked, named and reported.

Every kind is one module of this package that registers itself (registry.py); the rest of servebook asks the
registry by the kind's name (`CellSpec.kind`, the `kind` column of cells.parquet) and never spells a kind itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ...config.plan import Plan
from ..contract import CellRunner, CellSpec, OnDone, Requests, Steps, Window
from ..transport.client import RequestRecord
from ..validity import CellChecks

if TYPE_CHECKING:
    from ...util.progress import Reporter

__all__ = ["CellKind", "CellSpec", "KindBase", "OnDone", "Window"]

class CellKind(Protocol):
    """One kind of cell. `KindBase` gives every hook a default, so a kind writes only what it does differently."""

    #: its name: `CellSpec.kind`, the `kind` column of cells.parquet, the key of present/kinds.py
    name: str
    #: where its cells come among a run's (ascending)
    order: int
    #: the metric whose within-run error its cells record (`within_se_pct`); None: their TTFT's
    headline: str | None
    #: other metrics its cells record the within-run error of, and the column that holds it (a reuse cell's verdicts
    #: judge the next turn's TTFT, not the TTFT over every turn that `within_se_pct` covers)
    within_columns: Mapping[str, str]
    #: the validity checks that depend on what its cells ask (measure.validity)
    checks: CellChecks
    #: whether its cells report their attainment of the plan's objectives (plan.slo) and goodput
    reports_slo: bool
    #: whether its cells send on a schedule at an offered rate, whatever the engine's pace, and count only the
    #: requests of a measured window (open loop)
    open_loop: bool
    #: whether its rows are derived from other cells (a capacity search's probes), with no requests of their own
    derived: bool
    #: whether its cells are told apart by their prompts' category and the requests in flight ("prose at 4
    #: requests"), as decode and waves are; other kinds' cells are named by their id
    by_concurrency: bool

    def cells(self, plan: Plan) -> list[CellSpec]:
        """The cells `plan` measures of this kind, in order (none where the plan has no section for it)."""
        ...

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        """Send the cell's requests and record them, calling `on_done` after each (progress)."""
        ...

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        """Its own figures of a cell's counted requests, beside (or in place of) every cell's (measure.cells)."""
        ...

    def window(self, spec: CellSpec, records: list[RequestRecord], plan: Plan) -> Window | None:
        """The measured window of an open-loop cell; None: the whole cell is measured."""
        ...

    def lag_limit_ms(self, plan: Plan) -> float | None:
        """How late a request may leave after it was due (open-loop cells); None: not checked."""
        ...

    def label(self, spec: CellSpec) -> str:
        """The cell in a few words, for progress."""
        ...

    def line(self, summary: dict[str, Any]) -> str | None:
        """A measured cell's headline figure in words, for its progress line; None: no figure."""
        ...

    def derives(self, plan: Plan) -> bool:
        """Whether this kind's rows are derived from other cells the run measures (a capacity search)."""
        ...

    async def derive(self, runner: CellRunner, plan: Plan, reporter: Reporter, on_cell: Callable[[], None],
                     turns: Steps) -> list[dict[str, Any]]:
        """Measure what the derived rows need (each cell through `runner`, in a step of `turns`) and return them."""
        ...


class KindBase:
    """The defaults of every hook: closed-loop cells with no figures of their own, judged on their TTFT."""

    name: str = ""
    order: int = 1000
    headline: str | None = None
    within_columns: Mapping[str, str] = MappingProxyType({})
    checks: CellChecks = CellChecks()
    reports_slo: bool = False
    open_loop: bool = False
    derived: bool = False
    by_concurrency: bool = False

    def cells(self, plan: Plan) -> list[CellSpec]:
        return []

    async def send(self, workloads: Requests, spec: CellSpec, on_done: OnDone) -> list[RequestRecord]:
        raise TypeError(f"{self.name} cells are derived from other cells, not sent")

    def figures(self, spec: CellSpec, records: list[RequestRecord], slots: int | None) -> dict[str, Any]:
        return {}

    def window(self, spec: CellSpec, records: list[RequestRecord], plan: Plan) -> Window | None:
        return None

    def lag_limit_ms(self, plan: Plan) -> float | None:
        return None

    def label(self, spec: CellSpec) -> str:
        return spec.cell_id

    def line(self, summary: dict[str, Any]) -> str | None:
        return None

    def derives(self, plan: Plan) -> bool:
        return False

    async def derive(self, runner: CellRunner, plan: Plan, reporter: Reporter, on_cell: Callable[[], None],
                     turns: Steps) -> list[dict[str, Any]]:
        return []
