"""The journal: one directory per run, sealed by a manifest written last and atomically.

A run directory without manifest.json is an incomplete run (killed, interrupted, or still
going); it is listed as such, never dropped. Nothing under a sealed run is rewritten, and
index.parquet is derived from the manifests and can be rebuilt at any time. Writing lives in
writer.py, reading one run in record.py, the index in index.py and the listing in listing.py.
"""

from __future__ import annotations

import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..config.names import is_safe_name
from ..config.secrets import Scrubber
from ..util.errors import DiskFull, InputError
from ..util.files import atomic_write_bytes
from ..util.paths import locate
from ..util.render import Block, Renderable, Text
from .index import INDEX_COLUMNS, refresh, select
from .listing import listing_blocks
from .manifest import EngineInfo, Failure, Manifest, RunIdentity
from .record import Damage, RunRecord, inspect_run, read_manifest
from .writer import MANIFEST, RESERVE_BYTES, RunSealed, RunWriter, utc_now

__all__ = ["INDEX_COLUMNS", "Damage", "Journal", "RunRecord", "RunSealed", "RunWriter", "read_manifest", "utc_now"]


MISSING = "nothing has been written there (a relative path is read from the current directory, then the project root)"


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
            self.root = locate(root, "journal")

    @property
    def exists(self) -> bool:
        """Whether anything was ever written here (a journal that does not exist is created by writing to it)."""
        return self.mirror is not None or self.root.is_dir()

    def require(self) -> "Journal":
        """The journal, or one clear error where a command would only read a journal that is not there."""
        if not self.exists:
            raise InputError(f"journal {self.root}: {MISSING}; `servebook run`, `servebook sweep` and sb.qualify "
                             "create one")
        return self

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

    def push_run(self, directory: Path) -> None:
        """Upload every file of a run copied whole into a remote journal's mirror (a local journal needs nothing)."""
        if self.mirror is not None:
            for path in sorted(p for p in directory.rglob("*") if p.is_file()):
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
        writer = RunWriter(directory, scrubber, on_write=self._push if self.mirror is not None else None)
        try:
            writer.reserve()  # a disk too full to seal a run on starts none there
        except DiskFull as full:
            writer.abandon()
            raise DiskFull(str(self.runs_dir), full.free, quota=full.quota, leaving=f"no run started (a run holds "
                           f"{RESERVE_BYTES // 1024} KiB back to seal itself)") from full
        return writer

    def release_run(self, run_id: str) -> bool:
        """A reserved run that never started (its directory still empty) given back; False where it holds anything."""
        try:
            (self.runs_dir / run_id).rmdir()
        except OSError:
            return False
        return True

    def seal_abandoned(self, run_id: str, failure: Failure, scrubber: Scrubber | None = None) -> RunRecord:
        """Seal `failed` a started run whose writer is gone without sealing it (the kernel running it died): who it
        is and how it was launched come from its launch record, why it ended from `failure`. As for any failed run,
        its raw rows stay and the cell figures written on the way do not."""
        launch = self.run(run_id).identity
        writer = RunWriter(self.runs_dir / run_id, scrubber, on_write=self._push if self.mirror is not None else None)
        writer.discard_table("cells")
        started = {name: getattr(launch, name) for name in RunIdentity.model_fields}
        engine = EngineInfo(argv=(launch.model_extra or {}).get("argv") or [],
                            base_url=(launch.model_extra or {}).get("base_url"))
        writer.seal(Manifest(**started, status="failed", engine=engine, finished_at=utc_now(), failure=failure))
        return self.run(run_id)

    def add_notebook(self, run_id: str, data: bytes, scrubber: Scrubber | None = None) -> Path:
        """The executed notebook, added beside a run's files in one atomic, durable, scrubbed write."""
        scrubber = scrubber or Scrubber.from_environment()
        path = self.run(run_id).notebook_path
        atomic_write_bytes(path, scrubber.bytes(data))
        self._push(path)
        return path

    def add_search(self, study: str, event: dict) -> Path:
        """A configuration search's record (what was pruned, screened and confirmed, and the winner), appended
        under searches/STUDY/ and never rewritten: the runs themselves stay the evidence."""
        import json

        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        path = self.root / "searches" / study / f"{stamp}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps(event, indent=1, default=str).encode())
        self._push(path)
        return path

    def searches(self, study: str | None = None) -> list[dict]:
        """Recorded search events (of one study, or of every study), oldest first."""
        import json

        folder = self.root / "searches"
        paths = sorted((folder / study).glob("*.json") if study else folder.glob("*/*.json"),
                       key=lambda p: p.name)
        return [json.loads(p.read_text()) for p in paths]

    def run_ids(self) -> list[str]:
        if not self.runs_dir.is_dir():
            return []
        # A folder whose name is no run id is not a run (nothing servebook writes, or imports, is named so): it is
        # passed over, where reading it as one would stop every command that lists the journal.
        return sorted(p.name for p in self.runs_dir.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and is_safe_name(p.name))

    def run(self, run_id: str) -> RunRecord:
        if not is_safe_name(run_id):
            raise InputError(f"{run_id!r} is not a run id (run ids are file names: letters, digits, _ . , = + @ : -)")
        directory = self.runs_dir / run_id
        if not directory.is_dir():
            self.require()
            matches = [r for r in self.run_ids() if r.startswith(run_id) or run_id in r]
            if len(matches) == 1:
                directory = self.runs_dir / matches[0]
            else:
                hint = f"; it matches {len(matches)} runs" if matches else ""
                raise InputError(f"run {run_id!r} is not in the journal {self.root}{hint} "
                                 "(see `servebook journal ls`)")
        manifest, problem = read_manifest(directory / MANIFEST, missing_ok=True)
        # Every command reads runs through here: a damaged run becomes a status with its reason, not a traceback
        # in whichever command first touches the damaged file.
        return RunRecord(directory, manifest, problem, on_write=self._push if self.mirror is not None else None,
                         damage=inspect_run(directory, manifest, problem))

    def runs(self) -> list[RunRecord]:
        return [self.run(r) for r in self.run_ids()]

    def find_all(self, candidate_id: str, plan_id: str, statuses: tuple[str, ...] = ("completed", "failed"),
                 archived: bool = False) -> list[RunRecord]:
        """Every sealed run of this candidate under this plan (its repeats), oldest first; looked up in the index,
        so only the matching manifests are read. Archived runs count for nothing (a sweep runs their repeat
        again) unless `archived` asks for them too."""
        frame = self.index()
        chosen = frame[(frame["candidate_id"] == candidate_id) & (frame["plan_id"] == plan_id)
                       & frame["status"].isin([*statuses, "damaged"]) & (archived | frame["archived"].isna())]
        # The run as read now decides, not its row: a run damaged since the index was written is left out too.
        return [record for record in map(self.run, chosen["run_id"]) if record.status in statuses]

    def rounds_done(self, candidate_id: str, plan_id: str, machine_key: str) -> int:
        """How many runs of this candidate under this plan completed on this machine: the interleaving round a new
        run of it is in (0-based), numbered as the verdicts number rounds."""
        return sum(1 for r in self.find_all(candidate_id, plan_id, ("completed",))
                   if r.manifest is not None and r.manifest.environment.machine_key == machine_key)

    def find(self, candidate_id: str, plan_id: str,
             statuses: tuple[str, ...] = ("completed", "failed")) -> RunRecord | None:
        """The newest sealed run of this candidate under this plan, if any."""
        found = self.find_all(candidate_id, plan_id, statuses)
        return found[-1] if found else None

    def index(self, write: bool = False) -> pd.DataFrame:
        """One row per run (incomplete runs included), newest last (see journal/index.py). Only a command that
        wrote runs stores it (`write`): a read leaves the journal as it found it, a read-only copy included, and keeps
        the rows it had to read in servebook's cache (journal/index_store.py)."""
        return refresh(self.root, self.runs_dir, self.run, write)

    def select(self, *, study: str | None = None, status: str | None = None, since: str | None = None,
               limit: int | None = None, frame: pd.DataFrame | None = None,
               candidate: str | None = None) -> pd.DataFrame:
        """The index (or `frame`, read from it) filtered: a study, a status, a candidate, runs started at or after
        `since` (an ISO date or time), the newest `limit`; see index.select."""
        return select(self.index() if frame is None else frame, study=study, status=status, since=since,
                      limit=limit, candidate=candidate)

    def has_run(self, run_id: str) -> bool:
        """Whether a run directory of exactly this id exists (sealed or not)."""
        return is_safe_name(run_id) and (self.runs_dir / run_id).is_dir()

    def blocks(self) -> list[Block]:
        if not self.exists:
            return [Text(f"no journal at {self.root}: {MISSING}", "warn")]
        return self.listing(wide=False)

    def listing(self, wide: bool = False, frame: pd.DataFrame | None = None, total: int | None = None,
                extra: list[str] | None = None) -> list[Block]:
        """Runs, newest last (every run, or the `frame` selected from the index); see journal/listing.py."""
        return listing_blocks(self.location, self.index() if frame is None else frame, wide, total, extra)
