"""Journals on object storage: any fsspec URL (`s3://bucket/prefix`, `gs://...`, `memory://...`).

A remote journal is worked on through a local mirror (one folder per URL under servebook's cache),
so everything that reads a journal reads files as before. What is written locally is pushed file
by file as it is written, and a run's manifest is pushed last: on the store, as on a disk, a run is
sealed exactly when its manifest exists, and a run whose writer died shows as incomplete. A pull
brings the mirror up to date with what other writers (other hosts, Ray workers) sealed, each run's
manifest downloaded after its other files.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..util.files import atomic_write_bytes
from ..util.paths import cache_root

STATE = ".mirror-state.json"


def is_remote(location: str | Path) -> bool:
    text = str(location)
    return "://" in text and not text.startswith("file://")


def mirror_dir(url: str) -> Path:
    """Where the mirror of `url` lives: under $SERVEBOOK_MIRRORS, else servebook's cache."""
    base = os.environ.get("SERVEBOOK_MIRRORS")
    root = Path(base).expanduser() if base else cache_root() / "journals"
    return root / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


class Mirror:
    """The store behind a remote journal and its local copy."""

    def __init__(self, url: str, local: Path, storage_options: dict[str, Any] | None = None):
        import fsspec

        self.url = url.rstrip("/")
        self.fs, self.base = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        self.base = self.base.rstrip("/")
        self.local = local

    def _state(self) -> dict[str, str]:
        try:
            return json.loads((self.local / STATE).read_text())
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _version(info: dict) -> str:
        for key in ("ETag", "etag", "md5Hash", "crc32c"):
            if info.get(key):
                return str(info[key])
        return f"{info.get('size')}:{info.get('LastModified') or info.get('mtime') or info.get('created')}"

    def pull(self) -> int:
        """Download what the store has and the mirror lacks or holds in another version; returns the count."""
        try:
            found = self.fs.find(f"{self.base}/runs", detail=True)
        except FileNotFoundError:
            return 0
        state = self._state()
        wanted = []
        for name, info in found.items():
            relative = name[len(self.base) + 1:]
            version = self._version(info)
            if state.get(relative) != version or not (self.local / relative).exists():
                wanted.append((relative, name, version))
        # a run's manifest last, so the mirror never holds a sealed run without its files
        wanted.sort(key=lambda item: (Path(item[0]).name == "manifest.json", item[0]))
        for relative, name, version in wanted:
            target = self.local / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, self.fs.cat_file(name), durable=False)
            state[relative] = version
        if wanted:
            atomic_write_bytes(self.local / STATE, json.dumps(state).encode(), durable=False)
        return len(wanted)

    def push(self, path: Path) -> None:
        """Upload one file of the mirror to the same place on the store."""
        relative = Path(path).resolve().relative_to(self.local.resolve()).as_posix()
        self.fs.pipe_file(f"{self.base}/{relative}", Path(path).read_bytes())

    def ensure_writable(self) -> None:
        """Fail early, with the store's own words, when the journal cannot be written there."""
        probe = f"{self.base}/.servebook-probe"
        self.fs.pipe_file(probe, b"")
        try:
            self.fs.rm_file(probe)
        except (OSError, NotImplementedError):
            pass
