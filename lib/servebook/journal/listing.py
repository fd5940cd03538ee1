"""The journal as a table of runs, for the terminal and notebooks (narrow enough for 80 columns)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from ..util.render import Block, Style, Table, Text


def listing_blocks(location: str, frame: pd.DataFrame, wide: bool = False, total: int | None = None,
                   extra: list[str] | None = None) -> list[Block]:
    """Runs, newest last. Narrow: the run id without its year (which `journal show` accepts), status with the
    failure cause (and "archived"), verdict, candidate, valid cells, tags where a run has one, and the `extra`
    columns of `frame` (the knobs and metrics a listing was filtered or sorted by); wide adds study, engine and
    start time."""
    extra = list(extra or [])
    if "tags" in frame.columns and frame["tags"].notna().any():
        extra.insert(0, "tags")
    counts = frame["status"].value_counts()
    summary = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no runs"
    if total is not None and total != len(frame):
        summary += f"; {total} in the journal"
    columns = ["run", "status", "verdict", "candidate", "valid"]
    table = Table(columns + extra + (["study", "engine", "started"] if wide else []))
    css: dict[str, Style] = {"failed": "invalid", "damaged": "invalid", "incomplete": "warn", "interrupted": "warn",
                             "degraded": "warn"}
    for row in _records(frame):
        cells = "-" if _missing(row["cells"]) else f"{row['valid_cells']}/{row['cells']}"
        verdict = "-" if _missing(row["verdict"]) else str(row["verdict"])
        status = str(row["status"])
        if not _missing(row["failure"]) and row["failure"]:
            status = f"{status}: {row['failure']}"
        if not _missing(row.get("archived")):
            status += " (archived)"
        run_id = str(row["run_id"])
        values = [run_id if wide else run_id[4:], status, verdict, row["candidate"], cells]
        values += ["-" if _missing(row.get(name)) else _shown(row[name]) for name in extra]
        if wide:
            started = re.sub(r"\.\d+", "", str(row["started_at"])) if row["started_at"] else "-"  # to the second
            values += ["-" if _missing(row["study"]) else row["study"], row["engine"] or "-", started]
        archived = not _missing(row.get("archived"))
        table.add(values, "dim" if archived else css.get(str(row["status"]), "accepted" if verdict == "accepted" else ""))
    return [Text(f"journal {location}: {len(frame)} runs ({summary})", "heading"), table]


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as dicts, from each column's list: to_dict boxed every value one at a time, 40% of a listing of
    10,000 runs."""
    columns = [str(c) for c in frame.columns]
    lists = [frame[c].tolist() for c in frame.columns]
    return [dict(zip(columns, values, strict=True)) for values in zip(*lists, strict=True)]


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
