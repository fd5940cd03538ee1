"""What a cell observer is: something watched beside a cell while it runs, kept as the cell's covariates (its
columns of cells.parquet), its raw rows (telemetry.parquet) and its evidence for the cell's validity."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ....config.plan import Plan
    from ...transport.endpoint import Endpoint


@dataclass(frozen=True)
class Watched:
    """What an observer is handed for a cell: the engine as the measurement sees it, and the plan."""

    endpoint: Endpoint
    plan: Plan


class CellObserver(Protocol):
    """One thing watched beside one cell. Made for each cell (its factory), started before the cell's first scrape
    and stopped after its last request and scrape, whether the cell's requests succeeded or not."""

    #: the cells.parquet columns its figures fill, in order (None where it saw nothing)
    columns: tuple[str, ...]

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def figures(self) -> dict[str, Any]:
        """Its columns' values for the cell."""
        ...

    def rows(self, cell_id: str) -> list[dict[str, Any]]:
        """Its raw rows of the cell, for telemetry.parquet (none: an empty list)."""
        ...

    def evidence(self) -> dict[str, Any]:
        """What it tells the cell's validity: fields of measure.validity.CellEvidence (none: an empty dict)."""
        ...


ObserverFactory = Callable[[Watched], CellObserver]

_OBSERVERS: dict[str, ObserverFactory] = {}


def register_observer(name: str, factory: ObserverFactory) -> ObserverFactory:
    """Add an observer under its name; a second of the same name is refused (unregister the first)."""
    known = _OBSERVERS.get(name)
    if known is not None and known is not factory:
        raise ValueError(f"cell observer {name!r} is registered already")
    _OBSERVERS[name] = factory
    return factory


def unregister_observer(name: str) -> None:
    _OBSERVERS.pop(name, None)


def cell_observers() -> list[ObserverFactory]:
    """Every registered observer's factory, in the order they were registered."""
    return list(_OBSERVERS.values())
