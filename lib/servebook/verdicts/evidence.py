"""Which recorded cells are evidence: a cell disturbed by other processes' load is evidence lost, not a fault
of the candidate; decisions read fault codes, never their text."""

from __future__ import annotations

import pandas as pd

from ..journal import RunRecord
from ..measure.figures.latency import COUNT_COLUMNS
from ..measure.figures.latency_tables import with_latency
from ..measure.validity import codes_of, only_disturbed


def cell_codes(cells: pd.DataFrame) -> list[list[str]]:
    """Each recorded cell's fault codes (read from the text only for journals written before codes)."""
    codes = cells["invalid_codes"] if "invalid_codes" in cells.columns else [None] * len(cells)
    texts = cells["invalid_reasons"] if "invalid_reasons" in cells.columns else [None] * len(cells)
    return [codes_of(c, t) for c, t in zip(codes, texts, strict=True)]


def undisturbed(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, disturbed cells): a cell whose only faults are other processes' load (host CPU or the engine's
    GPU) is evidence lost, not a fault of the candidate, so it leaves the statistics instead of rejecting."""
    disturbed = [only_disturbed(codes) for codes in cell_codes(cells)]
    only_busy = ~cells["valid"].astype(bool) & pd.Series(disturbed, index=cells.index, dtype=bool)
    kept, left_out = cells[~only_busy].copy(), cells[only_busy].copy()
    kept.attrs = left_out.attrs = dict(cells.attrs)
    return kept, left_out


def machine_of(record: RunRecord) -> str:
    """Which machine (and GPU group) a run was measured on: runs are compared within machines, never across."""
    return record.manifest.environment.machine_key if record.manifest is not None else ""


def run_cells(records: list[RunRecord], counted: bool = False) -> list[pd.DataFrame | None]:
    """Each run's cells (None when it has none), marked with its block: the machine, and the interleaving round
    (the resident round it was measured in, else the run's place among its candidate's completed runs on that
    machine). `counted`: with the samples behind each latency percentile, from the run's requests where it was
    sealed before they were counted (nothing is written back)."""
    out: list[pd.DataFrame | None] = []
    rounds: dict[str, int] = {}
    for record in records:
        cells = record.table("cells") if record.status == "completed" else None
        if cells is not None and counted and not set(COUNT_COLUMNS) <= set(cells.columns):
            cells = with_latency(cells, record.table("requests"), record.table("chunks"))
        if cells is not None:
            machine = machine_of(record)
            resident = record.manifest.resident if record.manifest is not None else None
            cells.attrs["block"] = (machine, resident.round_id if resident else str(rounds.get(machine, 0)))
            cells.attrs["host"] = record.manifest.environment.host_identity if record.manifest else ""
            rounds[machine] = rounds.get(machine, 0) + 1
        out.append(cells)
    return out

def valid_cells(records: list[RunRecord]) -> list[pd.DataFrame]:
    return baseline_evidence(run_cells(records))


def baseline_evidence(runs: list[pd.DataFrame | None]) -> list[pd.DataFrame]:
    """The baseline's evidence: cells of completed runs without faults, disturbed cells left out."""
    out = []
    for cells in runs:
        if cells is None or cells.empty:
            continue
        cells, _ = undisturbed(cells)
        if bool(cells["valid"].all()):
            out.append(cells)
    return out


def all_disturbed(lost: list[pd.DataFrame]) -> str:
    """Why nothing was measured, and what would measure it: the codes of the cells left out decide."""
    codes = {code for frame in lost for cell in cell_codes(frame) for code in cell}
    if codes == {"seats_contend"}:
        return ("every cell was disturbed by the round's other engines, held to the CPUs this one is held to, so "
                "nothing was measured: hold each engine to CPUs of its own (launch.cpus), or none")
    return "every cell was disturbed by other load on the host, so nothing was measured: run it again on a quiet host"
