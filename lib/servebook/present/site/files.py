"""Writing the site's files: pages without the journal's fsyncs, sealed files shared by hard links, journal files
scrubbed of secrets on the way out."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

from ...config.secrets import Scrubber
from ...util.files import NEW_FILE_MODE, atomic_write_bytes

# A field named like a secret ("api_key":, "hf_token":) or a secret flag: only such files are parsed and scrubbed
# by name ("max_tokens" is not one); every file is scrubbed by value.
_SECRET_HINT = re.compile(rb'"[A-Za-z0-9_-]*(?:key|token|secret|passw(?:or)?d|credentials?|authorization|bearer)"\s*:'
                          rb"|--[a-z-]*(?:key|token)\b", re.I)


def published_bytes(path: Path, scrubber: Scrubber) -> bytes:
    """A journal file as published: a journal written before scrubbing (or by hand) still publishes no secret."""
    data = path.read_bytes()
    if path.suffix == ".json" and _SECRET_HINT.search(data):  # parsed only where a secret could be named
        try:
            data = (json.dumps(scrubber.json(json.loads(data)), indent=2) + "\n").encode()
        except ValueError:
            pass
    return scrubber.bytes(data)


def link_or_copy(source: Path, target: Path) -> None:
    """A sealed run's files never change, so the site may share them with the journal rather than copy them. A link
    shares the journal file's mode too, so a file the umask lets more people read than the journal's mode does (a
    journal written by a servebook that made its files 0600) is copied, with the mode of a new file."""
    target.unlink(missing_ok=True)
    readable = NEW_FILE_MODE & 0o444  # who may read a new file; a read-only journal copy still grants that
    if stat.S_IMODE(os.stat(source).st_mode) & readable == readable:
        try:
            os.link(source, target)
            return
        except OSError:
            pass
    shutil.copyfile(source, target)


def write_page(path: Path, text: str | bytes) -> None:
    # Site pages are rebuilt from the journal at will, so they skip the journal's fsyncs. The folder is made only
    # when the write finds it missing: asking the file system first, for each of thousands of files, was a tenth
    # of a build.
    data = text.encode() if isinstance(text, str) else text
    try:
        atomic_write_bytes(path, data, durable=False, make_parent=False)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data, durable=False, make_parent=False)
