"""index.parquet: one row per run, derived from the manifests and refreshed only where a run changed.

It is never the source of truth: deleting it only makes the next read slower. Lookups (a candidate's
runs under a plan, a study's runs, a status) go through it instead of reading every manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, overload

import pandas as pd

from ..config.slices import iso_instant
from ..util.errors import InputError
from ..util.files import is_disk_full
from .index_store import INDEX_FILE, cache_path, keep, newest_kept
from .record import RunRecord
from .stamps import run_names, stamp_of, stamps

INDEX_COLUMNS = ["run_id", "status", "candidate", "candidate_id", "plan_id", "engine", "started_at", "cells",
                 "valid_cells", "failure", "study", "verdict", "engine_version", "machine", "image_digest", "driver",
                 "tags", "archived"]
_STORED = INDEX_COLUMNS + ["stamp"]


def index_row(record: RunRecord) -> dict[str, Any]:
    identity = record.identity
    summary = record.manifest.summary if record.manifest else None
    failure = record.manifest.failure if record.manifest else None
    environment = record.manifest.environment if record.manifest else None
    annotations = record.annotations
    return {
        "run_id": record.run_id,
        "status": record.status,
        "candidate": identity.label,
        "candidate_id": identity.candidate_id,
        "plan_id": identity.plan_id,
        "engine": identity.engine_kind,
        "started_at": identity.started_at,
        "cells": summary.cells if summary else None,
        "valid_cells": summary.valid_cells if summary else None,
        # why the run has no numbers: the failure's cause, or for a damaged run the damage's code
        "failure": record.damage.code if record.damage else (failure.cause if failure else None),
        "study": identity.study,
        "verdict": (record.latest_verdict or {}).get("outcome"),
        # what a configuration's history is marked with: the engine release, the image, the driver, the machine
        "engine_version": environment.engine_version if environment else None,
        "machine": environment.host_identity if environment else None,
        "image_digest": environment.image_digest if environment else None,
        "driver": getattr(environment, "driver", None) if environment else None,
        # what people said of it since: its tags (comma-separated) and, for an archived run, why
        "tags": ",".join(annotations.tags) or None,
        "archived": annotations.archived,
    }


def refresh(root: Path, runs_dir: Path, read: Callable[[str], RunRecord], write: bool = True) -> pd.DataFrame:
    """The index of the runs under `runs_dir`, newest last, reading only runs new or changed since the rows kept
    were written (`read` gives a run by id; journal/stamps.py says what a change is). A command that writes runs
    stores it in the journal (`write`); a read keeps what it had to read in servebook's cache (index_store.py)."""
    kept = newest_kept(root, _STORED)
    known = kept.table
    ids = known.column("run_id").to_pylist()
    by_id = dict(zip(ids, known.column("stamp").to_pylist(), strict=True))
    if by_id:
        now = stamps(runs_dir, by_id)
        fresh = sorted(run_id for run_id, stamp in now.items() if not stamp or by_id.get(run_id) != stamp)
        rows = [{**row, "stamp": now[run_id]} for run_id, row in zip(fresh, read_rows(fresh, read), strict=True)]
    else:  # nothing kept: every run is read, and its stamp is taken beside its row (before it: a change after it is
        # a change the next read sees), in the same processes
        fresh = run_names(runs_dir)
        pairs = read_rows(fresh, read, partial(stamp_of, runs_dir))
        now = {run_id: stamp for run_id, (stamp, _) in zip(fresh, pairs, strict=True)}
        rows = [{**row, "stamp": stamp} for stamp, row in pairs]
    at = {run_id: i for i, run_id in enumerate(ids)}
    # an unsealed run still writing is read every time: its row unchanged is no reason to rebuild or write anything
    changed = any(run_id not in now for run_id in ids) or any(
        row["run_id"] not in at or known.slice(at[row["run_id"]], 1).to_pylist()[0] != row for row in rows)
    if not changed:
        frame = kept.frame
    else:
        still = kept.frame[kept.frame["run_id"].isin(now.keys()) & ~kept.frame["run_id"].isin(fresh)]
        frame = _normalised(pd.concat([still, pd.DataFrame(rows, columns=_STORED)], ignore_index=True), _STORED)
    if write and runs_dir.is_dir() and (changed or not kept.from_index):
        try:
            keep(frame, root / INDEX_FILE)
        except OSError as error:
            if not is_disk_full(error):
                raise  # a full disk keeps the index it had: it is derived, and the next read finds these runs again
    elif not write and changed:
        try:
            keep(frame, cache_path(root))
        except OSError:
            pass  # nowhere to keep it: the next read reads these runs again
    return frame[INDEX_COLUMNS]


#: from how many runs to read a cold index in several processes (below it, starting them costs more than it saves)
PARALLEL_FROM = 1000


@overload
def read_rows(run_ids: list[str], read: Callable[[str], RunRecord]) -> list[dict[str, Any]]: ...
@overload
def read_rows(run_ids: list[str], read: Callable[[str], RunRecord],
              stamp: Callable[[str], str]) -> list[tuple[str, dict[str, Any]]]: ...
def read_rows(run_ids: list[str], read: Callable[[str], RunRecord], stamp: Callable[[str], str] | None = None) -> Any:
    """Each run's index row, in order (with `stamp`: its stamp, taken first, and its row). Many runs (an index
    rebuilt from nothing) are read by forked processes, one per core: reading a run is a dozen system calls and a
    manifest validated, 0.3 to 0.5 ms, and 10,000 of them were most of a cold listing. Forking is safe only where no
    other thread could hold a lock at that moment, so a process with threads (a site build's converters, a
    notebook's kernel) reads them itself."""
    import multiprocessing
    import os
    import threading

    global _JOB
    _JOB = read, stamp  # what the forked workers inherit: neither callable need pickle
    try:
        workers = min(os.cpu_count() or 1, 8)
        if (len(run_ids) < PARALLEL_FROM or workers < 2 or threading.active_count() > 1
                or "fork" not in multiprocessing.get_all_start_methods()):
            return _rows_of(run_ids)
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        chunks = [run_ids[i::workers] for i in range(workers)]
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                parts = list(pool.map(_rows_of, chunks))
        except (OSError, BrokenProcessPool):  # no processes to be had (a sandbox, a limit), or one killed: read here
            return _rows_of(run_ids)
        found = {run_id: row for chunk, part in zip(chunks, parts, strict=True)
                 for run_id, row in zip(chunk, part, strict=True)}
        return [found[run_id] for run_id in run_ids]
    finally:
        _JOB = None


_JOB: tuple[Callable[[str], RunRecord], Callable[[str], str] | None] | None = None


def _rows_of(run_ids: list[str]) -> list[Any]:
    assert _JOB is not None
    read, stamp = _JOB
    if stamp is None:
        return [index_row(read(run_id)) for run_id in run_ids]
    return [(stamp(run_id), index_row(read(run_id))) for run_id in run_ids]


def index_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The index of these runs' `index_row`s, as `refresh` gives it, for a caller that keeps the rows itself."""
    return _normalised(pd.DataFrame(rows, columns=INDEX_COLUMNS), INDEX_COLUMNS)


def _normalised(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    frame = frame.sort_values("run_id", kind="stable").reset_index(drop=True)
    for column in columns:  # one representation, read back or freshly built
        if column not in ("cells", "valid_cells"):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    frame[["cells", "valid_cells"]] = frame[["cells", "valid_cells"]].astype("Int64")
    return frame


#: every status a run in the journal can have (the manifest's three, a run never sealed, a damaged one)
RUN_STATUSES = ("completed", "failed", "incomplete", "interrupted", "damaged", "degraded")


def select(frame: pd.DataFrame, *, study: str | None = None, status: str | None = None, since: str | None = None,
           limit: int | None = None, candidate: str | None = None) -> pd.DataFrame:
    """Rows of the index filtered: a study, a status, a candidate (its name or a prefix of its id), runs started at
    or after `since` (an ISO date or time), the newest `limit`. A study, candidate or status that the journal does
    not know is an error with the close names, not an empty answer."""
    from ..util.suggest import unknown

    if study and not (frame["study"] == study).any():
        raise unknown("--study", study, frame["study"].dropna(), "in this journal")
    if status and status not in RUN_STATUSES:
        raise unknown("--status", status, RUN_STATUSES)
    if candidate:
        mine = (frame["candidate"] == candidate) | frame["candidate_id"].fillna("").str.startswith(candidate)
        if not mine.any():
            raise unknown("--candidate", candidate, frame["candidate"].dropna(), "in this journal")
        frame = frame[mine]
    if study:
        frame = frame[frame["study"] == study]
    if status:
        frame = frame[frame["status"] == status]
    if since:
        try:
            since = iso_instant(since)
        except ValueError as error:
            raise InputError(f"--since: {error}") from None
        frame = frame[frame["started_at"].fillna("") >= since]
    if limit:
        frame = frame.tail(limit)
    return frame
