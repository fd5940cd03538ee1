"""Runs brought over from another journal: a second machine's runs of the same study (a lent GPU host returns its
journal as an archive), so that one journal holds every machine and the verdicts judge them as blocks side by side
(verdicts.machines). A run is copied whole and never changed; a run id already here is left alone when its manifest
is the same, and named as a conflict when it is not."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..util.errors import InputError
from .store import Journal
from .writer import MANIFEST

__all__ = ["Imported", "import_runs"]


@dataclass
class Imported:
    """What an import did, run ids each."""

    source: str
    copied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    #: the same run id with another manifest: kept as it was here
    conflicts: list[str] = field(default_factory=list)
    #: never sealed in the source (a run cut off when the machine went back): not evidence, not copied
    unsealed: list[str] = field(default_factory=list)

    def text(self) -> str:
        parts = [f"{len(self.copied)} runs copied from {self.source}"]
        if self.already:
            parts.append(f"{len(self.already)} already here")
        if self.unsealed:
            parts.append(f"{len(self.unsealed)} never sealed, left out")
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} with the same id and another manifest, kept as they were here: "
                         + ", ".join(self.conflicts))
        return "; ".join(parts)


def import_runs(journal: Journal, source: Path) -> Imported:
    """Copy every sealed run of the journal at `source` (a directory, or a .tar/.tar.xz/.tar.gz archive of one, as
    `scripts/gpu-host.sh pack` writes) into `journal`."""
    if source.is_file():
        with tempfile.TemporaryDirectory(prefix="servebook-import-") as folder:
            try:
                with tarfile.open(source) as archive:
                    archive.extractall(folder, filter="data")
            except (tarfile.TarError, OSError) as error:
                raise InputError(f"journal import: {source} is not a readable archive of a journal ({error})") \
                    from None
            return _import_dir(journal, _journal_root(Path(folder), source), str(source))
    if not (source / "runs").is_dir():
        raise InputError(f"journal import: {source} holds no runs/ folder (is it a servebook journal?)")
    return _import_dir(journal, source, str(source))


def _journal_root(folder: Path, source: Path) -> Path:
    """The journal inside an unpacked archive: the folder itself or the one folder in it that holds runs/."""
    found = [p.parent for p in [folder / "runs", *folder.glob("*/runs")] if p.is_dir()]
    if len(found) != 1:
        raise InputError(f"journal import: {source} holds {len(found)} journals (one runs/ folder expected)")
    return found[0]


def _import_dir(journal: Journal, root: Path, label: str) -> Imported:
    if root.resolve() == journal.root.resolve():
        raise InputError("journal import: the source is this journal")
    journal.ensure_writable()
    done = Imported(label)
    for run in sorted(p for p in (root / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")):
        manifest = run / MANIFEST
        if not manifest.is_file():
            done.unsealed.append(run.name)
            continue
        here = journal.runs_dir / run.name
        if here.exists():
            same = (here / MANIFEST).is_file() and (here / MANIFEST).read_bytes() == manifest.read_bytes()
            (done.already if same else done.conflicts).append(run.name)
            continue
        partial = journal.runs_dir / f".import-{run.name}"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(run, partial)
        partial.rename(here)  # whole or not at all: a run appears in the journal once every file is there
        journal.push_run(here)
        done.copied.append(run.name)
    return done
