"""Runs against a reference: the figures they are compared by, and the noise floor each change is greyed within
(verdicts.DeltaFloor), read from the journal for the compare notebook and `journal show A B C`, and written as data
for the site's compare page, whose script only picks the runs and tests each change against the floor given here."""

from __future__ import annotations

from typing import Any

from ..config.figures import FIGURES
from ..journal.store import Journal, RunRecord
from ..util.frames import frame_records
from ..verdicts.noise import FLOOR_Z, DeltaFloor, delta_floors
from .kinds import compared_figures
from .tables import fmt, number, tail_marked

#: what grey means, said once beside every table or page of changes from a reference (after "grey: ")
FLOOR_LEGEND = (f"a change within the noise floor, the change two runs of the reference's own "
                f"configuration (its candidate under its plan) show 95% of the time from launch to launch: "
                f"{FLOOR_Z:.2f} x the between-run CV of its completed runs at that cell and figure, pooled within "
                f"machines as a study's noise floor is. A reference whose configuration has fewer than two completed "
                f"runs has no floor, and nothing is greyed.")


def compared_by_kind() -> dict[str, list]:
    """kind -> its compared figures (present.kinds.ComparedFigure), in order."""
    out: dict[str, list] = {}
    for figure in compared_figures():
        out.setdefault(figure.kind, []).append(figure)
    return out


def compared_metrics() -> dict[str, list[str]]:
    """kind -> the metrics its runs are compared by."""
    return {kind: [f.metric for f in figures] for kind, figures in compared_by_kind().items()}


def reference_floors(journal: Journal, record: RunRecord) -> dict[tuple[str, str], DeltaFloor]:
    """The noise floor of changes from `record`: the spread of its configuration's completed runs in the journal."""
    from ..verdicts.evidence import machine_of

    identity = record.identity
    if not identity.candidate_id or not identity.plan_id:
        return {}
    runs = []
    for run in journal.find_all(identity.candidate_id, identity.plan_id, ("completed",)):
        cells = run.table("cells")
        if cells is not None and not cells.empty:
            runs.append((machine_of(run), frame_records(cells)))
    return delta_floors(runs, compared_metrics())


def page_figures() -> list[dict[str, Any]]:
    """The figures the compare page lists, in order, with the direction in which a change is better (None where
    no direction is known: a hit rate)."""
    better = {figure.column: figure.direction for figure in FIGURES}
    return [{"kind": f.kind, "metric": f.metric, "title": f.title, "better": better.get(f.metric)}
            for f in compared_figures()]


def run_figures(cells: list[dict[str, Any]], by_kind: dict[str, list] | None = None) -> list[dict[str, Any]]:
    """One run's cells as the compare page reads them: each cell with a compared figure, its figures as
    [value, text] (the text as every table formats it, a thin tail marked). `by_kind`: compared_by_kind(), read
    once for many runs."""
    by_kind = compared_by_kind() if by_kind is None else by_kind
    out = []
    for cell in cells:
        figures = {}
        for f in by_kind.get(cell.get("kind") or "", []):
            value = number(cell.get(f.metric))
            if value is not None:
                figures[f.metric] = [value, tail_marked(fmt(value, f.format, f.scale), cell, f.metric)]
        if figures:
            out.append({"cell": cell["cell_id"], "kind": cell["kind"], "valid": bool(cell.get("valid")),
                        "figures": figures})
    return out


def floor_figures(floors: dict[tuple[str, str], DeltaFloor]) -> dict[str, dict[str, dict[str, Any]]]:
    """cell id -> metric -> the ratio bounds of the floor (a run's figure over the reference's) and its words."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (cell_id, metric), floor in floors.items():
        out.setdefault(cell_id, {})[metric] = {"low": floor.low, "high": floor.high, "text": floor.words()}
    return out
