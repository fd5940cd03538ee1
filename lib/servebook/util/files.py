"""Files that are either whole or absent: atomic writes with fsync, and reading a log's tail; a full disk said as
one error naming the path and the bytes left."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import DiskFull


def _process_umask() -> int:
    # Read once, at import, while nothing else runs: setting it to read it back is not safe among threads.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _process_umask()
#: the mode an ordinary new file gets here (0644 under the usual umask 022)
NEW_FILE_MODE = 0o666 & ~_UMASK


def temp_beside(path: Path, prefix: str | None = None) -> tuple[int, str]:
    """mkstemp in `path`'s folder, with the mode an ordinary new file gets (mkstemp's is 0600, so a site or journal
    written through it would be readable by its owner alone, not by the web server that publishes it)."""
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name}.", dir=path.parent)
    os.fchmod(fd, NEW_FILE_MODE)
    return fd, tmp


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


#: a full disk, and a user's quota used up: the same to whoever writes
_FULL = (errno.ENOSPC, errno.EDQUOT)


def free_bytes(path: Path | str) -> int | None:
    """The bytes this user may still write on the filesystem holding `path` (its nearest folder that exists)."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` is a write that found its disk full or its quota used up."""
    return isinstance(error, OSError) and error.errno in _FULL


def disk_full(error: BaseException, path: Path | str | None) -> DiskFull | None:
    """`error` as a DiskFull naming `path` (else the file the error names); None when it is no full disk or quota.
    A failed write() names no file (pyarrow's neither): the caller says what it was writing."""
    if isinstance(error, DiskFull):
        return error
    if not isinstance(error, OSError) or not is_disk_full(error):
        return None
    where = path if path is not None else error.filename
    return DiskFull(str(where or "a write"), free_bytes(where) if where else None, quota=error.errno == errno.EDQUOT)


@contextmanager
def naming_disk_full(path: Path | str) -> Iterator[None]:
    """A full disk or quota met inside raised as DiskFull naming `path`; other errors as they are."""
    try:
        yield
    except OSError as error:
        full = disk_full(error, path)
        if full is None or full is error:
            raise
        raise full from error


def reserve_space(path: Path, size: int) -> None:
    """A hidden file of `size` bytes whose blocks are allocated now: deleting it later gives them back, so a last
    small write (a run's manifest) still fits once the disk has filled. DiskFull if the disk cannot spare them."""
    try:
        with naming_disk_full(path), open(path, "wb") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, size)
            except (OSError, AttributeError) as error:  # AttributeError: a system without it (macOS)
                if getattr(error, "errno", None) in _FULL:
                    raise
                f.write(bytes(size))  # a filesystem without fallocate: zeros allocate the blocks as well
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True, make_parent: bool = True) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`: readers never see half a file.

    `durable` also fsyncs the file and its directory, so the write survives a power cut (the journal
    needs that; a rebuildable site page does not).
    """
    path = Path(path)
    with naming_disk_full(path):
        if make_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_beside(path)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    if durable:
        fsync_dir(path.parent)


def tail_of(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of a (possibly huge, possibly missing) log file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
