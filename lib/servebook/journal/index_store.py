"""Where the index's rows are kept between commands: index.parquet in the journal, written by commands that write
runs, and a copy under servebook's cache, written by reads.

A read leaves the journal as it found it (a read-only copy included), so what a read had to read is kept outside
it, one file per journal directory. Each file is the whole journal as it was when written; the newer of the two is
the closer to now, and its stamps say which of its rows still hold (journal/stamps.py).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..util.files import temp_beside

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

INDEX_FILE = "index.parquet"
#: the columns that hold counts; every other column holds text (or nothing)
COUNTS = ("cells", "valid_cells")


def cache_path(root: Path) -> Path:
    """The copy a read keeps of this journal's index, under servebook's cache."""
    from ..util.paths import cache_root

    return cache_root() / "indexes" / f"{hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]}.parquet"


@dataclass
class Kept:
    """Rows kept of a journal, as read from one file."""

    table: "pa.Table"
    from_index: bool  # index.parquet's, not the cache's

    @cached_property
    def frame(self) -> "pd.DataFrame":
        return as_frame(self.table, self.table.column_names)


#: the rows last read from each file, while the file is as it was then: a notebook or a sweep that asks a journal
#: for its index again, with no run changed, builds no frame again (a fifth of a warm read of 2,000 runs)
_READ: dict[Path, tuple[tuple[int, int, int], Kept]] = {}


def newest_kept(root: Path, columns: list[str]) -> Kept:
    """The newest rows kept of this journal that have `columns` (none: no rows)."""
    kept = []
    for path in (root / INDEX_FILE, cache_path(root)):
        try:
            stat = os.stat(path)
            kept.append(((stat.st_mtime_ns, stat.st_size, stat.st_ino), path))
        except OSError:
            continue
    for version, path in sorted(kept, reverse=True):
        read = _READ.get(path)
        if read is not None and read[0] == version and read[1].table.column_names == columns:
            return read[1]
        table = _read(path, columns)
        if table is not None:
            _READ[path] = version, Kept(table, path.name == INDEX_FILE)
            return _READ[path][1]
    import pyarrow as pa

    return Kept(pa.table({name: pa.array([], pa.int64() if name in COUNTS else pa.string()) for name in columns}),
                False)


def _read(path: Path, columns: list[str]) -> "pa.Table | None":
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as file:
            if set(columns) <= set(file.schema_arrow.names):
                return file.read(columns=columns, use_threads=False)  # threads cost more than a small file's read
    except (OSError, pa.ArrowException):
        pass  # unreadable, or from an older servebook: rebuilt from the manifests
    return None


def as_frame(table: "pa.Table", columns: list[str]) -> "pd.DataFrame":
    """Kept rows as the index gives them: text as Python objects (None where missing), counts as Int64."""
    import pandas as pd

    frame = pd.DataFrame({name: table.column(name).to_numpy(zero_copy_only=False) for name in columns
                          if name not in COUNTS}, dtype=object)
    for name in COUNTS:
        frame[name] = pd.array(table.column(name).to_pylist(), dtype="Int64")
    return frame[columns]


def keep(frame: "pd.DataFrame", path: Path) -> None:
    """Write the rows whole and atomically: a reader finds the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(path, ".index.")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
