"""The journal: one directory per run, sealed by a manifest written last and atomically.

A run directory without manifest.json is an incomplete run (killed, interrupted, or still
going); it is listed as such, never dropped. Nothing under a sealed run is rewritten, and
index.parquet is derived from the manifests and can be rebuilt at any time.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd
from pydantic import ValidationError

from ..config.errors import InputError
from ..config.names import is_safe_name
from ..config.secrets import Scrubber
from ..util.files import atomic_write_bytes, fsync_dir, fsync_file, tail_of
from ..util.render import Block, Renderable, Table, Text
from .manifest import Manifest, RunIdentity

TABLES = ("requests", "chunks", "cells", "scrapes")
INDEX_COLUMNS = ["run_id", "status", "candidate", "candidate_id", "plan_id", "engine", "started_at", "cells",
                 "valid_cells", "failure", "study", "verdict"]


class RunSealed(RuntimeError):
    pass


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
            for column in frame.columns[frame.dtypes == object]:
                frame[column] = frame[column].map(lambda v: self.scrubber.text(v) if isinstance(v, str) else v)
        path = self.dir / f"{name}.parquet"
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=self.dir)
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
        self._scrub_text_files()
        for path in self.dir.iterdir():  # every file written so far is durable before the manifest says so
            if path.is_file() and not path.name.startswith("."):
                fsync_file(path)
                self.on_write(path)  # on a remote journal: every file is on the store before the manifest
        fsync_dir(self.dir)
        path = self.dir / "manifest.json"
        data = self.scrubber.json(json.loads(manifest.to_json()))
        atomic_write_bytes(path, self.scrubber.bytes(_dumps(data)))
        fsync_dir(self.dir.parent)
        self.on_write(path)
        return path

    def _scrub_text_files(self) -> None:
        """Files others wrote into the run (the engine's log, compose output) are scrubbed before sealing;
        the engine is stopped by then, so nothing writes to them afterwards."""
        for path in self.dir.iterdir():
            if path.suffix in (".log", ".yaml", ".txt") and path.is_file():
                data = path.read_bytes()
                if self.scrubber.contains_secret(data):
                    atomic_write_bytes(path, self.scrubber.bytes(data))


def read_manifest(path: Path) -> tuple[Manifest | None, str | None]:
    """The manifest, or (None, problem) when it is not valid JSON or not a manifest."""
    try:
        return Manifest.model_validate_json(path.read_bytes()), None
    except ValidationError as error:
        return None, f"manifest.json does not fit the manifest model: {error.errors()[0]['msg']}"
    except OSError as error:
        return None, f"manifest.json cannot be read: {error}"


@dataclass
class RunRecord(Renderable):
    """A run as read back from the journal."""

    dir: Path
    manifest: Manifest | None
    problem: str | None = None  # why a manifest that exists could not be read
    #: what else must happen to a file added to the run (a remote journal pushes it to the store)
    on_write: Callable[[Path], None] | None = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def status(self) -> str:
        if self.problem:
            return "corrupt"
        return self.manifest.status if self.manifest else "incomplete"

    @property
    def identity(self) -> RunIdentity:
        """Who this run is: the manifest, or for an unsealed run the launch record written at start."""
        if self.manifest is not None:
            return self.manifest
        launch = self.dir / "launch.json"
        if launch.is_file():
            try:
                return RunIdentity.model_validate_json(launch.read_bytes())
            except ValidationError:
                pass
        return RunIdentity()

    @property
    def candidate_label(self) -> str:
        return self.identity.label

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
        atomic_write_bytes(path, _dumps({"judged_at": utc_now(), **event}))
        if self.on_write:
            self.on_write(path)
        return path

    def log_tail(self, lines: int = 40) -> str:
        return tail_of(self.dir / "engine.log", lines)

    def headline(self) -> str:
        """One line: id, candidate, status, and what the run yielded or why it did not."""
        m = self.manifest
        parts = [f"run {self.run_id}", self.candidate_label, self.status]
        if m is not None and m.summary is not None:
            parts.append(f"{m.summary.valid_cells}/{m.summary.cells} cells valid")
        if m is not None and m.failure is not None:
            parts.append(f"failed during {m.failure.stage}: {m.failure.text}")
        if self.problem:
            parts.append(self.problem)
        verdict = self.latest_verdict
        if verdict:
            parts.append(f"verdict {verdict.get('outcome')}")
        return "  ".join(parts)

    def blocks(self) -> list[Block]:
        # A short summary: papermill logs and notebook outputs show this; present.RunReport has the tables.
        style = {"completed": "", "failed": "invalid", "incomplete": "warn", "corrupt": "invalid"}[self.status]
        return [Text(self.headline(), style or "heading"), Text(str(self.dir), "dim")]


class Journal(Renderable):
    """Runs under a directory, or under any fsspec URL (`s3://bucket/prefix`), worked on through a local mirror
    (see journal/remote.py)."""

    def __init__(self, root: str | Path, storage_options: dict | None = None, mirror: Path | None = None):
        from .remote import Mirror, is_remote, mirror_dir

        self.mirror = None
        self.url: str | None = None
        if is_remote(root):
            self.url = str(root).rstrip("/")
            self.root = Path(mirror) if mirror is not None else mirror_dir(self.url)
            self.root.mkdir(parents=True, exist_ok=True)
            self.mirror = Mirror(self.url, self.root, storage_options)
            self.pull()
        else:
            self.root = Path(str(root).removeprefix("file://")).expanduser()

    @property
    def location(self) -> str:
        """Where the journal is, as the user named it: its URL, or its directory."""
        return self.url or str(self.root)

    def pull(self) -> int:
        """Bring the local mirror of a remote journal up to date (a local journal is always up to date)."""
        if self.mirror is None:
            return 0
        try:
            return self.mirror.pull()
        except Exception as error:  # noqa: BLE001 - the store's own words, once, instead of a traceback
            raise InputError(f"journal {self.url}: cannot read it ({type(error).__name__}: {error})") from None

    def _push(self, path: Path) -> None:
        if self.mirror is not None:
            self.mirror.push(path)

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
        if self.mirror is not None:
            try:
                self.mirror.ensure_writable()
            except Exception as error:  # noqa: BLE001
                raise InputError(f"journal: cannot write to {self.url} ({type(error).__name__}: {error})") from None
        return self

    def new_run_id(self, candidate_id: str) -> str:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        # Writers on other hosts reserve in other mirrors: on a shared store the id itself must not collide.
        unique = f"-{secrets.token_hex(3)}" if self.mirror is not None else ""
        return f"{stamp}-{candidate_id[:8]}{unique}"

    def reserve_run(self, candidate_id: str) -> str:
        """A run id nobody else has, with its (empty) directory made: mkdir is atomic, so two writers that start
        the same candidate in the same second get `ID` and `ID.1`, and each addresses exactly its own run."""
        self.ensure_writable()
        base = self.new_run_id(candidate_id)
        for attempt in range(1000):
            run_id = base if attempt == 0 else f"{base}.{attempt}"
            try:
                (self.runs_dir / run_id).mkdir()
                return run_id
            except FileExistsError:
                continue
        raise RuntimeError(f"could not allocate a run directory for {base}")

    def start_run(self, candidate_id: str, run_id: str | None = None, scrubber: Scrubber | None = None) -> RunWriter:
        """The writer of a new run. A `run_id` chosen beforehand (a sweep reserves the run before its notebook
        starts) is taken exactly: its directory may exist only empty, as reserved, never with another run in it."""
        self.ensure_writable()
        if run_id is None:
            run_id = self.reserve_run(candidate_id)
        elif not is_safe_name(run_id):
            raise InputError(f"run id {run_id!r} cannot be used as a directory name")
        directory = self.runs_dir / run_id
        try:
            directory.mkdir()
        except FileExistsError:
            if any(directory.iterdir()):
                raise InputError(f"run {run_id} already exists in {self.root}; run ids are never reused") from None
        return RunWriter(directory, scrubber, on_write=self._push if self.mirror is not None else None)

    def add_notebook(self, run_id: str, data: bytes, scrubber: Scrubber | None = None) -> Path:
        """The executed notebook, added beside a run's files in one atomic, durable, scrubbed write."""
        scrubber = scrubber or Scrubber.from_environment()
        path = self.run(run_id).dir / "notebook.ipynb"
        atomic_write_bytes(path, scrubber.bytes(data))
        self._push(path)
        return path

    def run_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if p.is_dir() and not p.name.startswith("."))

    def run(self, run_id: str) -> RunRecord:
        if not is_safe_name(run_id):
            raise InputError(f"{run_id!r} is not a run id (run ids are file names: letters, digits, _ . , = + @ : -)")
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
        if not manifest_path.is_file():
            return RunRecord(directory, None, on_write=self._push if self.mirror is not None else None)
        manifest, problem = read_manifest(manifest_path)
        return RunRecord(directory, manifest, problem, on_write=self._push if self.mirror is not None else None)

    def runs(self) -> list[RunRecord]:
        return [self.run(r) for r in self.run_ids()]

    def find_all(self, candidate_id: str, plan_id: str, statuses=("completed", "failed")) -> list[RunRecord]:
        """Every sealed run of this candidate under this plan (its repeats), oldest first."""
        return [record for record in self.runs()
                if record.manifest is not None and record.manifest.candidate_id == candidate_id
                and record.manifest.plan_id == plan_id and record.status in statuses]

    def find(self, candidate_id: str, plan_id: str, statuses=("completed", "failed")) -> RunRecord | None:
        """The newest sealed run of this candidate under this plan, if any."""
        found = self.find_all(candidate_id, plan_id, statuses)
        return found[-1] if found else None

    def _row(self, record: RunRecord) -> dict:
        identity = record.identity
        summary = record.manifest.summary if record.manifest else None
        failure = record.manifest.failure if record.manifest else None
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
            "failure": failure.cause if failure else None,
            "study": identity.study,
            "verdict": (record.latest_verdict or {}).get("outcome"),
        }

    def _stamps(self) -> dict[str, str]:
        """Per run directory, what changes when its row must: the manifest (sealing) and the verdicts folder
        (a new event); an incomplete run is re-read every time, as it may still be writing."""
        stamps: dict[str, str] = {}
        try:
            entries = list(os.scandir(self.runs_dir))
        except FileNotFoundError:
            return stamps
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            try:
                manifest = os.stat(os.path.join(entry.path, "manifest.json")).st_mtime_ns
            except FileNotFoundError:
                stamps[entry.name] = ""
                continue
            try:
                verdicts = os.stat(os.path.join(entry.path, "verdicts")).st_mtime_ns
            except FileNotFoundError:
                verdicts = 0
            stamps[entry.name] = f"{manifest}:{verdicts}"
        return stamps

    def index(self, write: bool = True) -> pd.DataFrame:
        """One row per run (incomplete runs included), newest last. index.parquet keeps the rows with what they
        were read from, so only runs sealed or judged since are read again; it is derived from the manifests,
        and deleting it only makes the next call slower."""
        stamps = self._stamps()
        path = self.root / "index.parquet"
        known = pd.DataFrame(columns=INDEX_COLUMNS + ["stamp"])
        try:
            stored = pd.read_parquet(path)
            if set(INDEX_COLUMNS + ["stamp"]) <= set(stored.columns):
                known = stored
        except (OSError, ValueError, ImportError):
            pass  # absent, unreadable or from an older servebook: rebuilt from the manifests
        by_id = dict(zip(known["run_id"], known["stamp"])) if len(known) else {}
        fresh = [run_id for run_id, stamp in stamps.items() if not stamp or by_id.get(run_id) != stamp]
        fresh_ids = set(fresh)
        unchanged = known[known["run_id"].isin([r for r in stamps if r not in fresh_ids])]
        rows = [{**self._row(self.run(run_id)), "stamp": stamps[run_id]} for run_id in sorted(fresh)]
        frame = pd.concat([unchanged, pd.DataFrame(rows, columns=INDEX_COLUMNS + ["stamp"])], ignore_index=True) \
            if rows else unchanged.reset_index(drop=True)
        frame = frame.sort_values("run_id", kind="stable").reset_index(drop=True)
        for column in INDEX_COLUMNS + ["stamp"]:  # one representation, read back or freshly built
            if column not in ("cells", "valid_cells"):
                frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
        frame[["cells", "valid_cells"]] = frame[["cells", "valid_cells"]].astype("Int64")
        changed = bool(fresh) or len(unchanged) != len(known)
        if write and changed and self.runs_dir.is_dir():
            fd, tmp = tempfile.mkstemp(prefix=".index.", dir=self.root)
            os.close(fd)
            try:
                frame.to_parquet(tmp, index=False)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return frame[INDEX_COLUMNS]

    def select(self, *, study: str | None = None, status: str | None = None, since: str | None = None,
               limit: int | None = None, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        """The index (or `frame`, read from it) filtered: a study, a status, runs started at or after `since`
        (an ISO date or time), the newest `limit`."""
        frame = self.index() if frame is None else frame
        if study:
            frame = frame[frame["study"] == study]
        if status:
            frame = frame[frame["status"] == status]
        if since:
            frame = frame[frame["started_at"].fillna("") >= since]
        if limit:
            frame = frame.tail(limit)
        return frame


    def blocks(self) -> list[Block]:
        return self.listing(wide=False)

    def listing(self, wide: bool = False, frame: pd.DataFrame | None = None, total: int | None = None) -> list[Block]:
        """Runs, newest last (every run, or the `frame` selected from the index). Narrow (fits 80 columns): the
        run id without its year, which `journal show` accepts, status with the failure cause, verdict,
        candidate, valid cells."""
        frame = self.index() if frame is None else frame
        counts = frame["status"].value_counts()
        summary = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no runs"
        if total is not None and total != len(frame):
            summary += f"; {total} in the journal"
        columns = ["run", "status", "verdict", "candidate", "valid"]
        table = Table(columns + (["study", "engine", "started"] if wide else []))
        css = {"failed": "invalid", "corrupt": "invalid", "incomplete": "warn"}
        for row in frame.itertuples(index=False):
            cells = "-" if pd.isna(row.cells) else f"{row.valid_cells}/{row.cells}"
            verdict = "-" if pd.isna(row.verdict) else row.verdict
            status = row.status if pd.isna(row.failure) or not row.failure else f"{row.status}: {row.failure}"
            values = [row.run_id if wide else row.run_id[4:], status, verdict, row.candidate, cells]
            if wide:
                values += ["-" if pd.isna(row.study) else row.study, row.engine or "-", row.started_at or "-"]
            table.add(values, css.get(row.status, "accepted" if verdict == "accepted" else ""))
        return [Text(f"journal {self.location}: {len(frame)} runs ({summary})", "heading"), table]
