"""A run as read back from the journal: its manifest, tables, verdict events and log."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import ValidationError

from ..util.files import atomic_write_bytes, tail_of
from ..util.render import Block, Renderable, Style, Text
from .annotations import Action, Annotations, append_annotation, read_annotations
from .events import event_names, verdict_event
from .manifest import Manifest, RunIdentity
from .writer import ENGINE_LOG, LAUNCH, MANIFEST, NOTEBOOK, VERDICTS, _dumps, table_file, utc_now

#: why a run directory cannot be read as the run its manifest says it is; decisions read the code, people the text
DamageCode = Literal["manifest_unreadable", "manifest_incomplete", "table_missing", "table_unreadable"]


#: how a run's headline is marked, by its status
_STATUS_STYLE: dict[str, Style] = {"completed": "", "failed": "invalid", "incomplete": "warn", "interrupted": "warn",
                                   "damaged": "invalid", "degraded": "warn"}


@dataclass(frozen=True)
class Damage:
    """What is wrong with a damaged run (status `damaged`): the file, and why. Such a run is listed, named and left
    out of verdicts, histories and pages, never read as evidence and never a traceback."""

    code: DamageCode
    file: str
    detail: str

    @property
    def text(self) -> str:
        return f"damaged ({self.code}): {self.file} {self.detail}"


_PARQUET = b"PAR1"

#: what a completed run must name: the verdicts look its runs up by candidate and plan, and a history is kept per both
REQUIRED_OF_COMPLETED = ("candidate_id", "plan_id")


def inspect_run(directory: Path, manifest: Manifest | None, problem: str | None) -> Damage | None:
    """The first thing that makes a run directory unreadable, or None. Tables are written atomically, so a table
    that is not a whole Parquet file was truncated or overwritten afterwards (a cut copy, a full disk): checking its
    framing (`parquet_flaw`) keeps this cheap enough for every read of a run, the one place runs are read."""
    if problem:
        return Damage("manifest_unreadable", MANIFEST, problem.removeprefix(f"{MANIFEST} "))
    # one listing of the directory, strings not paths: this runs for every run a cold listing reads
    with os.scandir(directory) as entries:
        tables = sorted(e.name for e in entries if e.name.endswith(".parquet") and not e.name.startswith("."))
    if manifest is not None and manifest.status == "completed":
        missing = [name for name in REQUIRED_OF_COMPLETED if not getattr(manifest, name)]
        if missing:
            return Damage("manifest_incomplete", MANIFEST, f"is sealed completed but names no {' or '.join(missing)}")
        cells = table_file("cells")
        if manifest.summary is not None and manifest.summary.cells and cells not in tables:
            return Damage("table_missing", cells, f"is missing, though the manifest counts "
                                                  f"{manifest.summary.cells} cells")
    folder = os.fspath(directory)
    for name in tables:
        flaw = parquet_flaw(os.path.join(folder, name))
        if flaw:
            return Damage("table_unreadable", name, f"cannot be read ({flaw})")
    return None


def parquet_flaw(path: str | Path) -> str | None:
    """Why `path` is not a whole Parquet file, or None. A Parquet file opens and ends with the magic PAR1, and its
    footer (a Thrift struct, closed by a stop byte) ends with its own length: a cut copy loses that end, and a file
    overwritten or zero-filled by a crash holds something else there. Reading those bytes costs 7 us a table where
    parsing the footer took 110 (2 s of a cold listing of 10,000 runs)."""
    try:
        with open(path, "rb") as file:
            head = file.read(4)
            size = file.seek(0, os.SEEK_END)
            file.seek(max(size - 9, 0))
            tail = file.read(9)
    except OSError as error:
        return f"{type(error).__name__}: {error.strerror or error}"
    if size < 12 or head != _PARQUET or tail[5:] != _PARQUET:
        return f"not a whole Parquet file: no Parquet footer at the end of its {size} bytes"
    footer = int.from_bytes(tail[1:5], "little")
    if footer + 12 > size or tail[0] != 0:
        return f"not a whole Parquet file: its footer of {footer} bytes does not fit its {size}"
    return None


def _verdict_at(path: str) -> dict | None:
    """The verdict event in `path`; None for a file that is not one whole JSON object (writes are atomic, so it
    never was one: a stray file)."""
    try:
        with open(path, "rb") as file:
            event = json.loads(file.read())
    except (OSError, ValueError):
        return None
    return verdict_event(event) if isinstance(event, dict) else None


def read_manifest(path: Path, missing_ok: bool = False) -> tuple[Manifest | None, str | None]:
    """The manifest, or (None, problem) when it is not valid JSON or not a manifest; (None, None) for one that is
    not there when `missing_ok` (a run not sealed yet)."""
    try:
        return Manifest.model_validate_json(path.read_bytes()), None
    except FileNotFoundError:
        if missing_ok:
            return None, None
        return None, "manifest.json cannot be read: it is not there"
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
    #: what makes the run unreadable (Journal.run inspects every run it reads); its text replaces `problem`
    damage: Damage | None = None

    def __post_init__(self) -> None:
        if self.damage is not None:
            self.problem = self.damage.text

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def status(self) -> str:
        if self.problem or self.damage:
            return "damaged"
        return self.manifest.status if self.manifest else "incomplete"

    @property
    def identity(self) -> RunIdentity:
        """Who this run is: the manifest, or for an unsealed run (or one whose manifest is damaged) the launch
        record written at start."""
        if self.manifest is not None and not (self.damage and self.damage.file == MANIFEST):
            return self.manifest
        launch = self.dir / LAUNCH
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
        """A table of the run; None where it was not written, or is the damaged file (the status says so)."""
        path = self.table_path(name)
        if self.damage is not None and self.damage.file == path.name:
            return None
        return pd.read_parquet(path) if path.is_file() else None

    def table_path(self, name: str) -> Path:
        """Where a table is stored (for readers that stream it themselves, e.g. with pyarrow)."""
        return self.dir / table_file(name)

    @property
    def launch_record(self) -> dict[str, Any]:
        """launch.json as written when the run started ({} when absent or unreadable)."""
        try:
            data = json.loads((self.dir / LAUNCH).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def launch_argv(self) -> list[str]:
        """The (redacted) command that started the engine; [] for attach and unknown."""
        return list(self.launch_record.get("argv") or [])

    @property
    def notebook_path(self) -> Path:
        return self.dir / NOTEBOOK

    def files(self) -> list[Path]:
        """The run's files (not its verdict events or hidden temporaries), by name."""
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if p.is_file() and not p.name.startswith("."))

    def verdicts(self) -> list[dict]:
        """Every verdict event of this run, oldest first, in the shape this servebook writes (see `events`)."""
        folder = os.path.join(self.dir, VERDICTS)
        return [event for name in event_names(folder) if (event := _verdict_at(os.path.join(folder, name)))]

    @property
    def latest_verdict(self) -> dict | None:
        """The newest verdict event that reads: only it is read (every listing of the journal asks it of every
        run it reads)."""
        folder = os.path.join(self.dir, VERDICTS)
        return next((event for name in reversed(event_names(folder))
                     if (event := _verdict_at(os.path.join(folder, name)))), None)

    def append_verdict(self, event: dict) -> Path:
        """Verdicts are append-only events: a new file each time, never a rewrite."""
        folder = self.dir / VERDICTS
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

    @property
    def annotations(self) -> Annotations:
        """Tags, notes and whether the run is archived (see journal/annotations.py)."""
        return read_annotations(self.dir)

    @property
    def archived(self) -> bool:
        return self.annotations.archived is not None

    def annotate(self, action: Action, text: str) -> Path:
        """Add a tag, a note or an archive event beside the sealed run; the manifest is never touched."""
        path = append_annotation(self.dir, action, text)
        if self.on_write:
            self.on_write(path)
        return path

    def log_tail(self, lines: int = 40) -> str:
        return tail_of(self.dir / ENGINE_LOG, lines)

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
        if self.archived:
            parts.append("archived")
        return "  ".join(parts)

    def blocks(self) -> list[Block]:
        # A short summary: papermill logs and notebook outputs show this; present.RunReport has the tables.
        style = _STATUS_STYLE[self.status]
        return [Text(self.headline(), style or "heading"), Text(str(self.dir), "dim")]


