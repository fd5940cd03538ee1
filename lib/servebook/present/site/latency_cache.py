"""A run's cells as pages show them, with the latency figures of runs sealed before cells.parquet carried them.

Those figures come from the run's request and chunk rows, which a sealed run never changes: they are computed once
per run and kept in the site's cache (a read writes nothing into the journal), keyed by the three tables they come
from and by the code that computes them, so no later build, full or not, reads those rows again.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from ...journal.store import RunRecord
from .files import write_page

#: the tables the figures are computed from (and the cells they complete)
_SOURCES = ("cells", "requests", "chunks")


def cells_table(path: Path) -> Any:
    """A run's cells.parquet as a pyarrow table, or None where there is none. Read once a build: the summary reads
    its rows and the converter writes its CSV from the same table (a second read was 0.85 ms a run)."""
    if not path.is_file():
        return None
    import pyarrow.parquet

    # one file: read_table's dataset layer took half the time; and no threads, whose pool the CSV conversion of
    # other runs keeps busy during a build (a read of a few cells waited 3 ms for it)
    with pyarrow.parquet.ParquetFile(path) as file:
        return file.read(use_threads=False)


def cell_rows(path: Path, table: Any = None) -> list[dict]:
    """A run's cells as JSON-ready dicts (NaN as None), read with pyarrow (a pandas frame per run was the slowest
    part of a site build); `table`: the file already read."""
    table = cells_table(path) if table is None else table
    if table is None:
        return []
    import pyarrow

    rows = table.to_pylist()
    # NaN only where the schema says float: a test of every value of every row was a twentieth of a full build
    floats = [field.name for field in table.schema if pyarrow.types.is_floating(field.type)]
    for row in rows:
        for name in floats:
            if row[name] != row[name]:
                row[name] = None
    return rows


@cache
def _code() -> str:
    """The figures' definitions as code: a change to them computes every cached run's figures again."""
    from ...measure.figures import latency, latency_tables

    code = b"".join(Path(str(module.__file__)).read_bytes() for module in (latency, latency_tables))
    return hashlib.sha256(code).hexdigest()[:16]


def _key(record: RunRecord) -> str:
    parts = [_code()]
    for name in _SOURCES:
        try:
            stat = os.stat(record.table_path(name))
            parts.append(f"{name}={stat.st_size}@{stat.st_mtime_ns}")
        except FileNotFoundError:
            parts.append(f"{name}=-")
    return ",".join(parts)


def _computed(record: RunRecord, rows: list[dict]) -> dict[str, list] | None:
    import pandas as pd

    from ...measure.figures.latency_tables import missing_figures

    return missing_figures(pd.DataFrame(rows), record.table("requests"), record.table("chunks"))


class LatencyCache:
    """Cells with their figures; `folder` None computes them in memory and keeps nothing."""

    def __init__(self, folder: Path | None):
        self.folder = folder

    def rows(self, record: RunRecord, table: Any = None) -> list[dict]:
        """`table`: its cells.parquet already read (cells_table)."""
        from ...measure.figures.latency import LATENCY_COLUMNS

        rows = cell_rows(record.table_path("cells"), table)
        if not rows or all(set(LATENCY_COLUMNS) <= set(row) for row in rows):
            return rows  # stored at seal, or measured with them
        found = self._found(record, rows)
        for column, values in (found or {}).items():
            for row, value in zip(rows, values, strict=True):
                row[column] = None if isinstance(value, float) and value != value else value
        return rows

    def _found(self, record: RunRecord, rows: list[dict]) -> dict[str, list] | None:
        if self.folder is None:
            return _computed(record, rows)
        path, key = self.folder / f"{record.run_id}.json", _key(record)
        try:
            kept = json.loads(path.read_text())
            if kept.get("key") == key:
                return kept["columns"]
        except (OSError, ValueError, AttributeError):
            pass  # not kept yet, or by another servebook: computed again
        found = _computed(record, rows)
        write_page(path, json.dumps({"key": key, "columns": found}))
        return found
