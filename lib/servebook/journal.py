"""The journal: one directory per run, sealed by a manifest written last and atomically.

A run directory without manifest.json is an incomplete run (killed, interrupted, or still
going); it is listed as such, never dropped. Nothing under a sealed run is rewritten, and
index.parquet is derived from the manifests and can be rebuilt at any time.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .candidate import InputError

SCHEMA_VERSION = 1
TABLES = ("requests", "chunks", "cells", "scrapes")


class RunSealed(RuntimeError):
    pass


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode()


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class RunWriter:
    """Writes one run's files. `seal` writes the manifest, after which the run is read-only."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.run_id = directory.name

    @property
    def sealed(self) -> bool:
        return (self.dir / "manifest.json").exists()

    @property
    def engine_log(self) -> Path:
        return self.dir / "engine.log"

    def _check_open(self) -> None:
        if self.sealed:
            raise RunSealed(f"run {self.run_id} is sealed; its files are not rewritten")

    def write_json(self, name: str, obj: Any) -> Path:
        self._check_open()
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write_bytes(path, _dumps(obj))
        return path

    def write_table(self, name: str, rows: Iterable[dict] | pd.DataFrame) -> Path:
        self._check_open()
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        path = self.dir / f"{name}.parquet"
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=self.dir)
        os.close(fd)
        try:
            frame.to_parquet(tmp, index=False)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    def seal(self, manifest: dict) -> Path:
        self._check_open()
        manifest = {"schema": SCHEMA_VERSION, "run_id": self.run_id, **manifest,
                    "sealed_at": utc_now()}
        path = self.dir / "manifest.json"
        _atomic_write_bytes(path, _dumps(manifest))
        return path


@dataclass
class RunRecord:
    """A run as read back from the journal."""

    dir: Path
    manifest: dict | None

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def status(self) -> str:
        return self.manifest.get("status", "unknown") if self.manifest else "incomplete"

    @property
    def identity(self) -> dict:
        """Who this run is: the manifest, or for an unsealed run the launch record written at start."""
        if self.manifest and "candidate" in self.manifest:
            return self.manifest
        launch = self.dir / "launch.json"
        if launch.is_file():
            try:
                return json.loads(launch.read_text())
            except json.JSONDecodeError:
                pass
        return self.manifest or {}

    @property
    def candidate_label(self) -> str:
        identity = self.identity
        return identity.get("study_entry") or identity.get("candidate_label") or identity.get("candidate_id", "?")

    def table(self, name: str) -> pd.DataFrame | None:
        path = self.dir / f"{name}.parquet"
        return pd.read_parquet(path) if path.is_file() else None

    def verdicts(self) -> list[dict]:
        """Every verdict event of this run, oldest first."""
        folder = self.dir / "verdicts"
        if not folder.is_dir():
            return []
        events = []
        for path in sorted(folder.glob("*.json")):
            try:
                events.append(json.loads(path.read_text()))
            except json.JSONDecodeError:
                continue
        return events

    @property
    def latest_verdict(self) -> dict | None:
        events = self.verdicts()
        return events[-1] if events else None

    def append_verdict(self, event: dict) -> Path:
        """Verdicts are append-only events: a new file each time, never a rewrite."""
        folder = self.dir / "verdicts"
        folder.mkdir(exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        path = folder / f"{stamp}.json"
        n = 0
        while path.exists():
            n += 1
            path = folder / f"{stamp}-{n}.json"
        _atomic_write_bytes(path, _dumps({"judged_at": utc_now(), **event}))
        return path

    def log_tail(self, lines: int = 40) -> str:
        from .launcher import tail_of

        return tail_of(self.dir / "engine.log", lines)

    def _repr_html_(self) -> str:
        from .report import RunReport

        return RunReport(self)._repr_html_()

    def __rich__(self):
        from .report import RunReport

        return RunReport(self).__rich__()


class Journal:
    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def ensure_writable(self) -> "Journal":
        """Create the journal if needed; fail with one clear message if it cannot be written."""
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=self.runs_dir, prefix=".probe-")
            probe.close()
        except OSError as error:
            raise InputError(
                f"journal: cannot write to {self.root} ({error.strerror or error}); "
                "pass --journal with a writable directory"
            ) from None
        return self

    def new_run_id(self, candidate_id: str) -> str:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        return f"{stamp}-{candidate_id[:8]}"

    def start_run(self, candidate_id: str, run_id: str | None = None) -> RunWriter:
        """Create the run directory; `run_id` lets a sweep name the run before the notebook starts it."""
        self.ensure_writable()
        base = run_id or self.new_run_id(candidate_id)
        for attempt in range(100):
            run_id = base if attempt == 0 else f"{base}.{attempt}"
            try:
                (self.runs_dir / run_id).mkdir()
                return RunWriter(self.runs_dir / run_id)
            except FileExistsError:
                continue
        raise RuntimeError(f"could not allocate a run directory for {base}")

    def run_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if p.is_dir() and not p.name.startswith("."))

    def run(self, run_id: str) -> RunRecord:
        directory = self.runs_dir / run_id
        if not directory.is_dir():
            matches = [r for r in self.run_ids() if r.startswith(run_id) or run_id in r]
            if len(matches) == 1:
                directory = self.runs_dir / matches[0]
            else:
                hint = f"; it matches {len(matches)} runs" if matches else ""
                raise InputError(f"run {run_id!r} is not in the journal {self.root}{hint} "
                                 "(see `servebook journal ls`)")
        manifest_path = directory / "manifest.json"
        manifest = None
        if manifest_path.is_file():
            try:
                manifest = json.loads(manifest_path.read_text())
            except json.JSONDecodeError:
                manifest = {"status": "corrupt", "error": "manifest.json is not valid JSON"}
        return RunRecord(directory, manifest)

    def runs(self) -> list[RunRecord]:
        return [self.run(r) for r in self.run_ids()]

    def find(self, candidate_id: str, plan_id: str, statuses=("completed", "failed")) -> RunRecord | None:
        """The newest sealed run of this candidate under this plan, if any."""
        for record in reversed(self.runs()):
            m = record.manifest or {}
            if m.get("candidate_id") == candidate_id and m.get("plan_id") == plan_id and record.status in statuses:
                return record
        return None

    def _repr_html_(self) -> str:
        import html

        frame = self._display_frame()
        return (f"<h4>journal {html.escape(str(self.root))}: {len(frame)} runs</h4>"
                + frame.to_html(index=False, escape=True, na_rep="-"))

    def __rich__(self):
        from rich.table import Table

        frame = self._display_frame()
        table = Table(title=f"journal {self.root}: {len(frame)} runs", title_justify="left")
        for column in frame.columns:
            table.add_column(column, overflow="fold")
        style = {"completed": "green", "failed": "red", "incomplete": "yellow", "accepted": "green",
                 "rejected": "yellow"}
        for row in frame.itertuples(index=False):
            cells = ["-" if pd.isna(v) else str(v) for v in row]
            table.add_row(*[f"[{style[c]}]{c}[/]" if c in style else c.replace("[", "\\[") for c in cells])
        return table

    def _display_frame(self) -> pd.DataFrame:
        frame = self.index(write=False)
        return frame[["run_id", "status", "verdict", "study", "candidate", "engine", "valid_cells", "cells", "failure"]]

    def index(self, write: bool = True) -> pd.DataFrame:
        """One row per run, derived from the manifests (incomplete runs included)."""
        rows = []
        for record in self.runs():
            m = record.identity
            summary = m.get("summary") or {}
            rows.append({
                "run_id": record.run_id,
                "status": record.status,
                "candidate": record.candidate_label,
                "candidate_id": m.get("candidate_id"),
                "plan_id": m.get("plan_id"),
                "engine": (m.get("candidate") or {}).get("engine"),
                "started_at": m.get("started_at"),
                "cells": summary.get("cells"),
                "valid_cells": summary.get("valid_cells"),
                "failure": (m.get("failure") or {}).get("cause"),
                "study": m.get("study"),
                "verdict": (record.latest_verdict or {}).get("outcome"),
            })
        frame = pd.DataFrame(rows, columns=["run_id", "status", "candidate", "candidate_id", "plan_id",
                                            "engine", "started_at", "cells", "valid_cells", "failure",
                                            "study", "verdict"])
        frame[["cells", "valid_cells"]] = frame[["cells", "valid_cells"]].astype("Int64")
        if write and self.runs_dir.is_dir():
            path = self.root / "index.parquet"
            fd, tmp = tempfile.mkstemp(prefix=".index.", dir=self.root)
            os.close(fd)
            frame.to_parquet(tmp, index=False)
            os.replace(tmp, path)
        return frame

