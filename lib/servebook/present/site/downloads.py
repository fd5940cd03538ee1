"""A run's files offered beside its page: the raw files (hard links where the site and the journal share a file
system), a CSV of every table, and the journal's own files scrubbed of secrets.

Converting the tables is most of a first build's time. Each run's files are converted once (its fingerprint
keys them, in the build's state), and on a worker thread: pyarrow reads and writes without the GIL, so the CSVs
are written beside the pages' rendering rather than before it. A damaged run's tables are offered as they are,
without CSVs (`csv=False`): a table that cannot be read cannot be converted.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...config.secrets import Scrubber
from .files import link_or_copy, published_bytes, write_page

#: the run's own files offered beside its raw tables, as they are in the journal (scrubbed of secrets)
PUBLISHED_FILES = {"manifest.json": "", "launch.json": "",
                   "engine.log": "its start and end when long (the journal keeps it whole)",
                   "server_info.json": "what the engine reported about itself", "compose.json": "",
                   "notebook.ipynb": "the executed notebook"}
#: threads converting: one beside the rendering keeps two cores busy (two were no faster on two cores)
CONVERTERS = 1


def listing(run_id: str, files: list[str], csv: bool = True) -> list[dict]:
    out = []
    for name in files:
        if name.endswith(".parquet"):
            out.append({"name": name, "href": f"{run_id}/data/{name}", "note": "parquet"})
            if csv:
                out.append({"name": name.replace(".parquet", ".csv"),
                            "href": f"{run_id}/data/{name.replace('.parquet', '.csv')}", "note": "CSV of the same"})
        elif name in PUBLISHED_FILES:
            out.append({"name": name, "href": f"{run_id}/data/{name}", "note": PUBLISHED_FILES[name]})
    return out


def convert(files: list[str], source: Path, target: Path, scrubber: Scrubber, csv: bool = True,
            tables: dict[str, Any] | None = None) -> None:
    """`tables`: file name -> the table already read (the builder reads cells.parquet for the summary anyway)."""
    import pyarrow.csv
    import pyarrow.parquet

    for name in files:
        if name.endswith(".parquet"):
            link_or_copy(source / name, target / name)
            if not csv:
                continue
            table = (tables or {}).get(name)
            if table is None:
                # one file: read_table's dataset layer is slower; and without arrow's threads, whose hand-offs cost
                # more than they gave beside the rendering (6.0 -> 5.4 ms a run converted, on two cores)
                with pyarrow.parquet.ParquetFile(source / name) as file:
                    table = file.read(use_threads=False)
            nested = [i for i, f in enumerate(table.schema) if pyarrow.types.is_list(f.type)]
            for i in nested:  # CSV has no lists: token ids become one space-separated string
                strings = [None if v is None else " ".join(map(str, v)) for v in table.column(i).to_pylist()]
                table = table.set_column(i, table.schema.field(i).name, pyarrow.array(strings, pyarrow.string()))
            pyarrow.csv.write_csv(table, target / name.replace(".parquet", ".csv"))
        elif name == "engine.log":
            write_page(target / name, log_excerpt(published_bytes(source / name, scrubber)))
        elif name in PUBLISHED_FILES:
            write_page(target / name, published_bytes(source / name, scrubber))


#: an engine log's lines the site publishes from each end; the journal keeps the whole log
LOG_LINES_EACH_END = 2000


def log_excerpt(data: bytes, lines_each_end: int = LOG_LINES_EACH_END) -> bytes:
    """An engine log as the site offers it: whole when short, else its start (the launch, the allocation the memory
    arithmetic reads) and its end (the last cells, a failure's cause), the lines between counted. llama-server at
    -lv 4 logs its prompt cache on every update: 28 MB for one run of the demo's capacity study, 157 MB of the demo
    site's 161, before."""
    lines = data.splitlines(keepends=True)
    if len(lines) <= 2 * lines_each_end:
        return data
    left = len(lines) - 2 * lines_each_end
    marker = (f"[... {left:,} lines of the engine's log are left out of the site; the journal keeps the whole "
              "log ...]\n").encode()
    return b"".join([*lines[:lines_each_end], marker, *lines[-lines_each_end:]])


class Converter:
    """The runs' files being converted; `finish` waits for them and says which runs are done."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, tuple[str, Future]] = {}

    def submit(self, run_id: str, key: str, files: list[str], source: Path, target: Path, scrubber: Scrubber,
               csv: bool = True, tables: dict[str, Any] | None = None) -> None:
        target.mkdir(parents=True, exist_ok=True)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=CONVERTERS, thread_name_prefix="servebook-csv")
        self._pending[run_id] = (key, self._pool.submit(convert, files, source, target, scrubber, csv, tables))

    def finish(self) -> dict[str, str]:
        """run id -> key of every run converted; a run whose conversion failed is left out, so that the next
        build tries again, and the first failure is raised once the others are done."""
        done: dict[str, str] = {}
        failed: BaseException | None = None
        for run_id, (key, future) in self._pending.items():
            error = future.exception()
            if error is None:
                done[run_id] = key
            failed = failed or error
        self._pending.clear()
        if failed is not None:
            raise failed
        return done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
