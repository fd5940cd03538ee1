"""The cell kinds by name. Each kind's module registers itself when the package is imported (kinds/__init__.py
imports every module of the package), so a new kind is its module, its plan section and its present entry."""

from __future__ import annotations

from typing import Any, TypeVar

from ...config.plan import Plan
from .base import CellKind, CellSpec, KindBase

K = TypeVar("K", bound=CellKind)
_KINDS: dict[str, CellKind] = {}


def register(kind: K) -> K:
    """Add a kind under its name; a second kind of the same name is refused (unregister the first)."""
    if not kind.name:
        raise ValueError(f"{type(kind).__name__} has no name")
    known = _KINDS.get(kind.name)
    if known is not None and known is not kind:
        raise ValueError(f"cell kind {kind.name!r} is registered already ({type(known).__name__})")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    _KINDS.pop(name, None)


def kind_of(name: str) -> CellKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise KeyError(f"no cell kind {name!r}; the kinds are {', '.join(_KINDS)}") from None


#: what a row that names no registered kind reads as (a frame without the column): every default
_UNKNOWN = KindBase()


def traits_of(name: object) -> CellKind:
    """The kind a cell row names (its `kind` column, read from a row or a frame), to ask what it is."""
    return _KINDS.get(name, _UNKNOWN) if isinstance(name, str) else _UNKNOWN


def kinds() -> list[CellKind]:
    """Every registered kind, in the order a run measures their cells."""
    return sorted(_KINDS.values(), key=lambda kind: kind.order)


def plan_cells(plan: Plan) -> list[CellSpec]:
    """Every cell the plan measures, kind after kind; derived rows (capacity) come from the cells themselves."""
    return [spec for kind in kinds() for spec in kind.cells(plan)]


def label(spec: CellSpec) -> str:
    """The cell in a few words, as its kind names it (progress)."""
    return kind_of(spec.kind).label(spec)


def cell_line(spec: CellSpec, s: Any) -> str:
    """One progress line per measured cell: its headline figure, reconciliation and validity."""
    flag = "valid" if s["valid"] else f"INVALID ({s['invalid_reasons']})"
    figure = kind_of(spec.kind).line(s) or "no figure"
    if s.get("slo_attainment") is not None:
        figure += (f"; SLO met by {100 * (s.get('slo_attainment') or 0):.0f}% of requests, goodput "
                   f"{s.get('goodput_rps') or 0:.2f}/s")
    return f"{figure}; {s['reconciliation']}; {flag}"
