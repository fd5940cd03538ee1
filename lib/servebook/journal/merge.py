"""Runs brought over from another journal: a second machine's runs of the same study (a lent GPU host returns its
journal as an archive), so that one journal holds every machine and the verdicts judge them as blocks side by side
(verdicts.machines). A run is copied whole and never changed; a run id already here is left alone when its manifest
is the same, and named as a conflict when it is not.

What lands is only what a run is: regular files of a run's own names (writer.is_run_file), read from inside the
source. A link is never followed (a run file linking elsewhere would copy that file into the journal and onto the
site), and each run is read back from its copy as the journal reads runs before it lands: a run whose folder name
is no run id, whose manifest is unreadable or whose tables are cut is refused with its reason, and the rest import.
A run lands whole or not at all: its copy is made in a hidden `.import-<id>` folder, removed whatever stops it (a
full disk included, which stops the import: the runs copied before it stay).
"""

from __future__ import annotations

import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..config.names import is_safe_name
from ..util.errors import DiskFull, InputError
from ..util.files import disk_full, naming_disk_full
from .record import inspect_run, read_manifest
from .store import Journal
from .writer import EVENT_FOLDERS, MANIFEST, is_run_file

__all__ = ["Imported", "import_runs"]

#: what a cut or corrupt archive raises while it is read: tarfile's own errors, and the compressors' (a .tar.xz cut
#: off in transfer ends in EOFError, which the command line would report as a bare "Aborted.")
_ARCHIVE_ERRORS = (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error)


class Refused(Exception):
    """A run that cannot be imported as it is, and why."""


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
    #: "<folder>: <why>" for each run that could not be imported as a run (nothing of it was kept)
    refused: list[str] = field(default_factory=list)
    #: files inside imported runs that are not a run's (unknown names, folders), not copied
    left_out: list[str] = field(default_factory=list)

    def text(self) -> str:
        parts = [f"{len(self.copied)} runs copied from {self.source}"]
        if self.already:
            parts.append(f"{len(self.already)} already here")
        if self.unsealed:
            parts.append(f"{len(self.unsealed)} never sealed, left out")
        if self.left_out:
            parts.append(f"{len(self.left_out)} files that are not a run's left out: " + ", ".join(self.left_out[:5])
                         + (", ..." if len(self.left_out) > 5 else ""))
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} with the same id and another manifest, kept as they were here: "
                         + ", ".join(self.conflicts))
        if self.refused:
            parts.append(f"{len(self.refused)} refused: " + "; ".join(self.refused))
        return "; ".join(parts)


def import_runs(journal: Journal, source: Path) -> Imported:
    """Copy every sealed run of the journal at `source` (a directory, or a .tar/.tar.xz/.tar.gz archive of one, as
    `tools/gpu-host/gpu-host.sh pack` writes) into `journal`."""
    if source.is_file():
        with tempfile.TemporaryDirectory(prefix="servebook-import-") as folder:
            try:
                with tarfile.open(source) as archive:
                    archive.extractall(folder, filter="data")
            except _ARCHIVE_ERRORS as error:
                full = disk_full(error, folder)
                if full is not None:  # no fault of the archive's: where it is unpacked has no room
                    raise full.leaving(f"journal import unpacks {source.name} there first; set TMPDIR to a folder "
                                       "with room") from None
                raise InputError(f"journal import: {source} is not a whole, readable archive of a journal "
                                 f"({type(error).__name__}: {error}; a copy cut off in transfer reads so)") from None
            return _import_dir(journal, _journal_root(Path(folder), source), str(source))
    if (source / "runs").is_symlink():
        raise InputError(f"journal import: {source}/runs is a link; import the journal it links to")
    if not (source / "runs").is_dir():
        raise InputError(f"journal import: {source} holds no runs/ folder (is it a servebook journal?)")
    return _import_dir(journal, source, str(source))


def _journal_root(folder: Path, source: Path) -> Path:
    """The journal inside an unpacked archive: the folder itself or the one folder in it that holds runs/."""
    found = [p.parent for p in [folder / "runs", *folder.glob("*/runs")] if p.is_dir() and not p.is_symlink()]
    if len(found) != 1:
        raise InputError(f"journal import: {source} holds {len(found)} journals (one runs/ folder expected)")
    return found[0]


def _import_dir(journal: Journal, root: Path, label: str) -> Imported:
    if root.resolve() == journal.root.resolve():
        raise InputError("journal import: the source is this journal")
    journal.ensure_writable()
    done = Imported(label)
    with os.scandir(root / "runs") as entries:
        runs = sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)
    for entry in runs:
        run = Path(entry.path)
        try:
            if not entry.is_dir(follow_symlinks=False):
                if entry.is_symlink() or entry.is_file(follow_symlinks=False):
                    raise Refused("a link or a file where a run's folder belongs" if entry.is_symlink()
                                  else "a file where a run's folder belongs")
                continue
            if not is_safe_name(entry.name):
                raise Refused("not a run id (run ids are file names: letters, digits, _ . , = + @ : -)")
            _import_run(journal, run, done)
        except Refused as why:
            done.refused.append(f"{ascii(entry.name)[1:-1]}: {why}")
        except DiskFull as full:  # the runs copied stay, whole; nothing of this one does
            raise full.leaving(f"journal import stopped at run {entry.name}, of which nothing was kept; "
                               f"{len(done.copied)} runs copied before it") from None
    return done


def _import_run(journal: Journal, run: Path, done: Imported) -> None:
    manifest = run / MANIFEST
    if not manifest.is_file() and not manifest.is_symlink():
        done.unsealed.append(run.name)
        return
    here = journal.runs_dir / run.name
    if here.exists():
        same = (here / MANIFEST).is_file() and not manifest.is_symlink() \
            and (here / MANIFEST).read_bytes() == manifest.read_bytes()
        (done.already if same else done.conflicts).append(run.name)
        return
    partial = journal.runs_dir / f".import-{run.name}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        with naming_disk_full(journal.runs_dir):
            left_out = _copy_run_files(run, partial)
        _check_copy(partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # nothing of a refused run stays behind
        raise
    partial.rename(here)  # whole or not at all: a run appears in the journal once every file is there
    journal.push_run(here)
    done.copied.append(run.name)
    done.left_out += [f"{run.name}/{name}" for name in left_out]


def _copy_run_files(run: Path, target: Path) -> list[str]:
    """Copy the run's own regular files into `target`; a link or a special file refuses the run. Returns the
    names left out (not a run's)."""
    left_out: list[str] = []
    target.mkdir()
    for folder in ("", *EVENT_FOLDERS):
        source = run / folder
        if folder and not os.path.lexists(source):
            continue
        mode = os.lstat(source).st_mode
        if not stat.S_ISDIR(mode):
            raise Refused(f"{folder} is a link or not a folder")
        with os.scandir(source) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                relative = f"{folder}/{entry.name}" if folder else entry.name
                if entry.is_symlink():
                    raise Refused(f"{relative} is a link (only a run's own files are imported)")
                if entry.is_dir(follow_symlinks=False):
                    if folder or entry.name not in EVENT_FOLDERS:
                        left_out.append(relative + "/")
                    continue
                if not entry.is_file(follow_symlinks=False):
                    raise Refused(f"{relative} is not a regular file")
                if not is_run_file(relative):
                    if not entry.name.startswith("."):
                        left_out.append(relative)
                    continue
                _copy_regular(Path(entry.path), target / relative)
    return left_out


def _copy_regular(source: Path, target: Path) -> None:
    """A regular file's bytes, opened without following a link (a file swapped for one since it was listed)."""
    target.parent.mkdir(exist_ok=True)
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as reader, open(target, "wb") as writer:
        if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
            raise Refused(f"{source.name} is not a regular file")
        shutil.copyfileobj(reader, writer)
    shutil.copystat(source, target, follow_symlinks=False)


def _check_copy(copy: Path) -> None:
    """The copy read as the journal reads a run: a manifest that is no manifest, or a cut table, refuses it."""
    manifest, problem = read_manifest(copy / MANIFEST) if (copy / MANIFEST).is_file() else (None, "no manifest")
    damage = inspect_run(copy, manifest, problem)
    if damage is not None:
        raise Refused(damage.text)
