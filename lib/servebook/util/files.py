"""Files that are either whole or absent: atomic writes with fsync, and reading a log's tail."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True, make_parent: bool = True) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`: readers never see half a file.

    `durable` also fsyncs the file and its directory, so the write survives a power cut (the journal
    needs that; a rebuildable site page does not).
    """
    path = Path(path)
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
