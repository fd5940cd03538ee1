"""The sample journals: the GPU sessions' recorded journals (docs/findings/ cites each by name), kept in the
repository as one archive, data/sample-journals.tar.xz, not as folders.

As folders they were 53 MiB of the 59 MiB a checkout carries to a GPU host with every call (64 MiB a call in all):
the bundle's parts beside them came out at 4 MiB. As one xz archive they are 12 MiB (they compress 4.3 times).

`sample_journal(name)` gives a journal's folder, extracted once into servebook's cache, in a folder named by the
archive's sha256: a checkout whose archive changes extracts it afresh, and two checkouts with different archives
never share one. Extraction goes into a temporary folder beside it, renamed into place whole, so a second process
that extracts at the same moment finds either nothing or every file (the rename of the loser fails, and it uses the
winner's). The folder is shared: a reader that writes (a sweep, an import) works on a copy.

`pack(folder, archive)` writes the archive from a folder of sample journals, deterministically (names sorted, fixed
times, owners and modes, xz preset 6 single-threaded), so packing an unchanged set gives the same bytes with the
same liblzma (`make sample-journals` re-packs from ./sample-journals, where `servebook journal samples` extracts
them)."""

from __future__ import annotations

import functools
import hashlib
import io
import lzma
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..util.errors import InputError
from ..util.files import atomic_write_bytes
from ..util.paths import cache_root, sample_journals_archive

#: the archive's name in the checkout's data/ folder
ARCHIVE = "sample-journals.tar.xz"
#: every sample journal's name starts so (the folder names the findings cite)
PREFIX = "sample-journal"
#: the time every member of the archive carries (2026-12-01, the first GPU session): any fixed one would do
MTIME = 1_796_083_200
XZ_PRESET = 6


def archive_path() -> Path:
    """The checkout's archive of sample journals (an installed wheel has none: InputError)."""
    try:
        return sample_journals_archive(ARCHIVE)
    except FileNotFoundError as error:
        raise InputError(f"the sample journals: {error}") from None


@functools.lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def archive_digest(archive: Path) -> str:
    """The archive's sha256, read once per process for a file of the same size and time."""
    stat = archive.stat()
    return _digest(str(archive), stat.st_size, stat.st_mtime_ns)


def samples_root(archive: Path | None = None) -> Path:
    """The folder that holds every sample journal of `archive` (the checkout's by default), extracted on first use."""
    archive = archive or archive_path()
    if not archive.is_file():
        raise InputError(f"{archive}: no archive of sample journals (a checkout of servebook has it in data/)")
    root = cache_root() / "sample-journals" / archive_digest(archive)[:16]
    if not root.is_dir():
        _extract(archive, root)
    return root


def _extract(archive: Path, root: Path) -> None:
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(staging, filter="data")
        staging.chmod(0o755)  # mkdtemp's 0700 would keep another user of a shared cache out
        try:
            os.replace(staging, root)
        except OSError:
            if not root.is_dir():
                raise
            # another process extracted the same archive first: its folder holds the same files
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def sample_names(archive: Path | None = None) -> list[str]:
    """The sample journals the archive holds, by name."""
    root = samples_root(archive)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def sample_journal(name: str, archive: Path | None = None) -> Path:
    """A sample journal's folder by name (`sample-journal-vllm`), shared: copy it before anything writes to it."""
    path = samples_root(archive) / name
    if not name.startswith(PREFIX) or "/" in name or not path.is_dir():
        known = ", ".join(sample_names(archive))
        raise InputError(f"{name}: no such sample journal (the archive holds {known})")
    return path


@dataclass(frozen=True)
class Sample:
    """A sample journal as `servebook journal samples` lists it."""

    name: str
    runs: int
    studies: tuple[str, ...]


def describe(path: Path) -> Sample:
    """How many runs a sample journal holds and of which studies (read from the manifests, nothing written)."""
    from .store import Journal

    records = Journal(path).runs()
    studies = sorted({r.manifest.study for r in records if r.manifest is not None and r.manifest.study})
    return Sample(path.name, len(records), tuple(studies))


def copy_samples(into: Path, names: list[str] | None = None, archive: Path | None = None) -> list[tuple[str, bool]]:
    """Each sample journal (or those named) copied into `into`, one folder each; a folder already there is left as
    it is. (name, copied) for each."""
    sources = {name: sample_journal(name, archive) for name in names or sample_names(archive)}  # every name first
    into.mkdir(parents=True, exist_ok=True)
    done = []
    for name, source in sources.items():
        fresh = not (into / name).exists()
        if fresh:
            shutil.copytree(source, into / name)
        done.append((name, fresh))
    return done


def _members(folder: Path) -> list[tuple[Path, str]]:
    """The sample journals under `folder` and everything in them, sorted by name in the archive."""
    journals = sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith(PREFIX))
    if not journals:
        raise InputError(f"{folder}: no {PREFIX}* folder to pack")
    out = []
    for journal in journals:
        out.append((journal, journal.name))
        for path in sorted(journal.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                raise InputError(f"{path}: only files and folders go into the archive")
            out.append((path, path.relative_to(folder).as_posix()))
    return sorted(out, key=lambda item: item[1])


def pack(folder: Path, archive: Path) -> list[str]:
    """The sample journals under `folder` (its sample-journal* folders) into `archive`, deterministically; the
    journals' names."""
    members = _members(folder)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, name in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = MTIME, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            info.mode, info.size = 0o644, path.stat().st_size
            with open(path, "rb") as f:
                tar.addfile(info, f)
    atomic_write_bytes(archive, lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, preset=XZ_PRESET))
    return sorted({name.split("/", 1)[0] for _, name in members})
