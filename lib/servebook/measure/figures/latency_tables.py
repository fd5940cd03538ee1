"""The latency figures of cells from a run's stored tables (requests.parquet, chunks.parquet): for runs recorded
before the columns existed, computed a cell at a time over columns, as measure.figures.latency computes them of records.

Apart from measure.figures.latency because it asks the kinds what a row is (open loop, derived), and the kinds compute
their figures with measure.figures.latency: one module for both would close a circle through the kinds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...util.frames import frame_records
from ..kinds import traits_of
from .latency import LATENCY_COLUMNS, of_arrays

if TYPE_CHECKING:
    import pandas as pd

def value(v: Any) -> Any:
    """None for a missing value (None, NaN, pandas NA): parquet gives NaN where the run wrote None."""
    import pandas as pd

    return None if v is None or pd.isna(v) else v


def _selected(cells: "pd.DataFrame", requests: "pd.DataFrame") -> "pd.DataFrame":
    """The requests each cell's figures count: successful ones, and of an open-loop cell only those inside its
    measured window (its warm-up requests are kept in the table, marked)."""
    ok = requests["error"].isna() & requests["completion_tokens"].notna()
    if "measured" in requests:
        kinds = cells["kind"] if "kind" in cells else [None] * len(cells)
        open_loop = {c for c, kind in zip(cells["cell_id"], kinds, strict=True) if traits_of(kind).open_loop}
        ok &= ~requests["cell_id"].isin(open_loop) | requests["measured"].astype(bool)
    return requests[ok]


def _gaps_by_cell(mine: "pd.DataFrame", chunks: "pd.DataFrame | None") -> dict[Any, np.ndarray]:
    """Each cell's chunk gaps in the chunks table's order: the gaps of the requests it counts (a join on the request
    id, not a scan of every chunk per cell)."""
    if chunks is None or chunks.empty:
        return {}
    own = chunks.loc[chunks["gap_s"].notna(), ["request_id", "gap_s"]].reset_index(drop=True)
    pairs = mine[["request_id", "cell_id"]].drop_duplicates()
    joined = own.reset_index(names="at").merge(pairs, on="request_id").sort_values("at", kind="stable")
    gaps = joined["gap_s"].to_numpy(dtype=float)
    return {cell: gaps[at] for cell, at in joined.groupby("cell_id", sort=False).indices.items()}


def table_figures(cells: "pd.DataFrame", requests: "pd.DataFrame", chunks: "pd.DataFrame | None") -> list[dict]:
    """Each cell's figures from a run's stored requests and chunks tables ({} for a derived row, which sent
    nothing), a cell at a time over columns: the figures of `figures`, without a Python step per request."""
    mine = _selected(cells, requests)
    rows = mine.groupby("cell_id", sort=False).indices
    columns = [mine[name].to_numpy(dtype=float, na_value=np.nan) for name in
               ("t_send", "t_first", "t_last", "prompt_tokens", "completion_tokens")]
    gaps = _gaps_by_cell(mine, chunks)
    out: list[dict] = []
    for cell in frame_records(cells):
        traits = traits_of(cell.get("kind"))
        if traits.derived:
            out.append({})
            continue
        at = rows.get(cell["cell_id"], np.empty(0, dtype=int))
        duration = value(cell.get("wall_s"))
        if traits.open_loop:
            achieved = value(cell.get("achieved_rps"))
            # the window is not stored; the achieved rate is the measured window's successful requests over it
            duration = len(at) / achieved if achieved and len(at) else None
        send, first, last, prompt, tokens = (column[at] for column in columns)
        out.append(of_arrays(send, first, last, prompt, tokens, gaps.get(cell["cell_id"], np.empty(0)), duration))
    return out


def missing_figures(cells: "pd.DataFrame", requests: "pd.DataFrame | None",
                    chunks: "pd.DataFrame | None") -> dict[str, list] | None:
    """The latency columns `cells` lacks, one value per row (None where a cell has none), computed from the run's
    raw tables; None where it lacks none, or no requests were kept to compute them from."""
    missing = [column for column in LATENCY_COLUMNS if column not in cells.columns]
    if cells.empty or not missing or requests is None or requests.empty:
        return None
    found = table_figures(cells, requests, chunks)
    return {column: [f.get(column) for f in found] for column in missing}


def with_latency(cells: "pd.DataFrame", requests: "pd.DataFrame | None",
                 chunks: "pd.DataFrame | None") -> "pd.DataFrame":
    """`cells` with the latency columns, computed from the run's requests and chunks where a run recorded before
    they existed lacks them; a run that has them is returned as it is, and nothing is written back."""
    found = missing_figures(cells, requests, chunks)
    return cells if found is None else cells.assign(**found)
