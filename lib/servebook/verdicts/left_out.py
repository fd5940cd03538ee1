"""What a verdict leaves out, and says so: cells disturbed by other load (evidence lost, not a fault of the
candidate), folded into one count per candidate ("6 cells of 2 runs left out: host busy 4, client stalled 2"), and
damaged or archived runs, one line each.

A left-out cell is typed (its run, its id and its fault codes, measure.validity), so that every output counts the same
cells and none reads a reason's words; events written before it was typed are upgraded where they are read
(journal.events).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..journal import RunRecord
from ..measure.validity import DISTURBANCE_WORDS
from .evidence import cell_codes


@dataclass(frozen=True)
class LeftOutCell:
    """One cell of one run left out of the statistics as disturbed, with its fault codes."""

    run_id: str
    cell_id: str
    codes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "cell_id": self.cell_id, "codes": list(self.codes)}


def left_out_cell_from(data: dict[str, Any]) -> LeftOutCell:
    """A LeftOutCell from a verdict event's dict (as journal.events reads it back)."""
    return LeftOutCell(str(data["run_id"]), str(data["cell_id"]), tuple(str(c) for c in data.get("codes") or ()))


def disturbed_cells(run_id: str, disturbed: pd.DataFrame) -> list[LeftOutCell]:
    """The cells of one run that evidence.undisturbed() left out, each with its codes."""
    if disturbed.empty:
        return []
    return [LeftOutCell(run_id, str(cell), tuple(codes))
            for cell, codes in zip(disturbed["cell_id"], cell_codes(disturbed), strict=True)]


@dataclass(frozen=True)
class LeftOut:
    """A candidate's cells left out as disturbed, as one count: how many cells of how many runs, and why."""

    cells: tuple[LeftOutCell, ...] = ()

    @classmethod
    def of(cls, cells: list[LeftOutCell] | list[dict[str, Any]] | None) -> LeftOut:
        return cls(tuple(c if isinstance(c, LeftOutCell) else left_out_cell_from(c) for c in cells or ()))

    def __bool__(self) -> bool:
        return bool(self.cells)

    @property
    def runs(self) -> list[str]:
        """The runs whose cells were left out, in the order the verdict read them."""
        return list(dict.fromkeys(c.run_id for c in self.cells))

    def by_code(self) -> dict[str, int]:
        """fault code -> cells left out with it, most first (a cell with two faults counts under each)."""
        counted = Counter(code for c in self.cells for code in dict.fromkeys(c.codes or ("unclassified",)))
        return dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))

    def count(self) -> str:
        """'6 cells of 2 runs'."""
        cells, runs = len(self.cells), len(self.runs)
        return f"{cells} cell{'s' if cells != 1 else ''} of {runs} run{'s' if runs != 1 else ''}"

    def why(self) -> str:
        """'host busy 4, client stalled 2'."""
        return ", ".join(f"{DISTURBANCE_WORDS.get(code, code)} {n}" for code, n in self.by_code().items())

    def text(self) -> str:
        """'6 cells of 2 runs left out: host busy 4, client stalled 2' ('' where none was)."""
        return f"{self.count()} left out: {self.why()}" if self.cells else ""


def left_out_reasons(records: list[RunRecord]) -> list[str]:
    """One line per damaged or archived run left out of a verdict, naming the run and why."""
    return [f"left out: run {r.run_id} {_why_left_out(r)}" for r in records]


def left_out_runs(records: list[RunRecord]) -> dict[str, Any]:
    """The damaged and archived runs left out, typed as outputs carry them (a job reads the code, not the words):
    {"left_out_runs": [...]} where there are any, else {} (a verdict event keeps its shape)."""
    typed = [{"run_id": r.run_id, "status": r.status, "code": r.damage.code if r.damage else None,
              "file": r.damage.file if r.damage else None} for r in records]
    return {"left_out_runs": typed} if typed else {}


def _why_left_out(record: RunRecord) -> str:
    if record.damage:
        return record.damage.text
    archived = record.annotations.archived
    return f"archived: {archived}" if archived else record.status
