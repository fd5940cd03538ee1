"""Writing one run: every byte scrubbed of secrets, every file atomic, the manifest last.

The writer owns the run's file names: nothing outside the journal spells `cells.parquet` or `launch.json`.

A full disk (or quota) is a DiskFull naming the file and the bytes left, whichever write meets it. So that a run
whose disk fills can still be sealed `failed` with that cause, the writer holds a reserve from the start (a hidden
file of allocated blocks, RESERVE_BYTES) and gives it back just before the manifest is written: the seal's few
small writes fit in it. A run that cannot take the reserve is not started; a run killed before its seal keeps it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from ..config.secrets import Scrubber
from ..util.errors import DiskFull
from ..util.files import atomic_write_bytes, fsync_dir, fsync_file, naming_disk_full, reserve_space, temp_beside
from .manifest import Manifest, RunIdentity

#: the files of a run, by what they hold (see design.md, the journal contract)
MANIFEST = "manifest.json"
LAUNCH = "launch.json"
ENGINE_LOG = "engine.log"
NOTEBOOK = "notebook.ipynb"
SERVER_INFO = "server_info.json"
VERDICTS = "verdicts"
#: the blocks a run holds back for its seal (a failed run's manifest with its log tail is 5-30 KB; the rest is slack
#: for the manifest's temporary file, a folder that grows a block, and a filesystem's larger blocks)
RESERVE = ".seal-reserve"
RESERVE_BYTES = 256 * 1024


def table_file(name: str) -> str:
    return f"{name}.parquet"


#: the names of a run's own files (tables, records, logs, the notebook), and of its folders of events (verdicts,
#: annotations): what a copy of a run brings over, and nothing else
_RUN_FILE = re.compile(r"[a-z][a-z0-9_-]{0,63}\.(?:json|parquet|log|yaml|ipynb)")
_EVENT_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,119}\.json")
EVENT_FOLDERS = (VERDICTS, "annotations")


def is_run_file(relative: str) -> bool:
    """Whether `relative` (a path inside a run's folder, with `/`) names a file a run holds."""
    folder, _, name = relative.rpartition("/")
    if not folder:
        return bool(_RUN_FILE.fullmatch(name))
    return folder in EVENT_FOLDERS and bool(_EVENT_FILE.fullmatch(name)) and ".." not in name


class RunSealed(RuntimeError):
    """A sealed run's files are never rewritten."""


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode()


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class RunWriter:
    """Writes one run's files. `seal` writes the manifest, after which the run is read-only."""

    def __init__(self, directory: Path, scrubber: Scrubber | None = None,
                 on_write: Callable[[Path], None] | None = None):
        self.dir = directory
        self.run_id = directory.name
        # Every byte this writer puts in the run passes through it: no secret reaches the journal.
        self.scrubber = scrubber or Scrubber.from_environment()
        # A remote journal pushes each file as it is written, so an interrupted run keeps what it measured there too.
        self.on_write = on_write or (lambda path: None)

    @property
    def sealed(self) -> bool:
        return (self.dir / MANIFEST).exists()

    @property
    def engine_log(self) -> Path:
        return self.dir / ENGINE_LOG

    def path(self, name: str) -> Path:
        """Where a file others write into the run goes (a compose file the engine's tools read)."""
        return self.dir / name

    def reserve(self) -> None:
        """Hold back the blocks the seal needs (DiskFull when the disk cannot spare them: start no run there)."""
        reserve_space(self.dir / RESERVE, RESERVE_BYTES)

    def write_launch(self, record: dict[str, Any]) -> Path:
        """launch.json: who the run is and what starts it, written when it starts (an unsealed run shows it). The
        run's first record: a run that cannot write it is removed, not left without it."""
        try:
            return self.write_json(LAUNCH, record)
        except DiskFull:
            self.abandon()
            raise

    def discard_table(self, name: str) -> None:
        """Drop a table written on the way (a failed run keeps its raw rows, not its cell figures)."""
        self._check_open()
        (self.dir / table_file(name)).unlink(missing_ok=True)

    def abandon(self) -> None:
        """Remove an unsealed run that measured nothing, because its input turned out wrong."""
        self._check_open()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _check_open(self) -> None:
        if self.sealed:
            raise RunSealed(f"run {self.run_id} is sealed; its files are not rewritten")

    def write_json(self, name: str, obj: Any) -> Path:
        self._check_open()
        path = self.dir / name
        if isinstance(obj, RunIdentity):
            obj = obj.model_dump(mode="json", by_alias=True)
        atomic_write_bytes(path, self.scrubber.bytes(_dumps(self.scrubber.json(json.loads(_dumps(obj))))))
        self.on_write(path)
        return path

    def write_text(self, name: str, text: str) -> Path:
        self._check_open()
        path = self.dir / name
        atomic_write_bytes(path, self.scrubber.bytes(text.encode()))
        self.on_write(path)
        return path

    def write_table(self, name: str, rows: Iterable[dict] | pd.DataFrame) -> Path:
        self._check_open()
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        if self.scrubber.values:  # response text could echo a key; only string cells can hold one
            frame = frame.copy()
            for column in frame.select_dtypes(include=[object, "string"]).columns:  # str columns too, pandas 3
                frame[column] = frame[column].map(lambda v: self.scrubber.text(v) if isinstance(v, str) else v)
        path = self.dir / table_file(name)
        with naming_disk_full(path):
            fd, tmp = temp_beside(path)
            os.close(fd)
            try:
                frame.to_parquet(tmp, index=False)
                with open(tmp, "rb") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        self.on_write(path)
        return path

    def seal(self, manifest: Manifest) -> Path:
        """Write manifest.json last: from this moment the run is sealed and never rewritten."""
        self._check_open()
        manifest = manifest.model_copy(update={"run_id": self.run_id, "sealed_at": utc_now()})
        (self.dir / RESERVE).unlink(missing_ok=True)  # its blocks are the seal's, on a disk that has filled
        path = self.dir / MANIFEST
        try:
            self._scrub_text_files()
            self._complete_cells()
            for written in self.dir.iterdir():  # every file written so far is durable before the manifest says so
                if written.is_file() and not written.name.startswith("."):
                    fsync_file(written)
                    self.on_write(written)  # on a remote journal: every file is on the store before the manifest
            fsync_dir(self.dir)
            data = self.scrubber.json(json.loads(manifest.to_json()))
            atomic_write_bytes(path, self.scrubber.bytes(_dumps(data)))
        except DiskFull as full:  # not even the reserve held it (another writer took the blocks it gave back)
            raise full.leaving(f"run {self.run_id} is left unsealed (incomplete)") from full
        fsync_dir(self.dir.parent)
        self.on_write(path)
        return path

    def _complete_cells(self) -> None:
        """Cells written without the latency figures pages show (a synthetic run, an importer's) get them here, once,
        from the run's requests and chunks: a sealed run's requests never change, so no reader computes them again.
        Only the missing columns are added; every other column is written back as it was read."""
        from ..measure.figures.latency import LATENCY_COLUMNS
        from ..measure.figures.latency_tables import missing_figures  # the journal sits above measure

        path, requests, chunks = (self.dir / table_file(name) for name in ("cells", "requests", "chunks"))
        if not path.is_file() or not requests.is_file():
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        if set(LATENCY_COLUMNS) <= set(pq.read_schema(path).names):
            return  # a measured run's cells have them from its measurement: nothing is read
        try:
            cells = pq.read_table(path)
            found = missing_figures(cells.to_pandas(), pd.read_parquet(requests),
                                    pd.read_parquet(chunks, columns=["request_id", "gap_s"]) if chunks.is_file()
                                    else None)
        except (OSError, ValueError, KeyError, pa.ArrowException):
            return  # tables these figures cannot be read from: readers see why, and sealing goes on without them
        if found is None:
            return
        for name, values in found.items():
            cells = cells.append_column(name, pa.array(values, type=pa.float64()))
        with naming_disk_full(path):
            fd, tmp = temp_beside(path)
            os.close(fd)
            try:
                pq.write_table(cells, tmp)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)

    def _scrub_text_files(self) -> None:
        """Files others wrote into the run (the engine's log, compose output) are scrubbed before sealing;
        the engine is stopped by then, so nothing writes to them afterwards."""
        for path in self.dir.iterdir():
            if path.suffix in (".log", ".yaml", ".txt") and path.is_file():
                data = path.read_bytes()
                if self.scrubber.contains_secret(data):
                    atomic_write_bytes(path, self.scrubber.bytes(data))


