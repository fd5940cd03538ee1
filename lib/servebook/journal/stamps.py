"""What tells the index that a run's row must be read again: the run's stamp, checked for every run on every read.

A stamp is the run directory's mtime, the names of the files a row depends on, and their sizes and mtimes: the
manifest (sealing; rewritten in place, it is damage or a repair), the tables (a sealed run's tables never change, so
a change is damage, a cut copy or a full disk, or the repair of one), and the verdicts and annotations folders (a
new event). A file added or removed renames an entry of the directory, which moves the directory's mtime. So a
run whose directory has not moved is checked with one stat per name its stamp holds, and only a run that moved is
listed again: that is what keeps a warm read of thousands of runs a fraction of reading their manifests.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from ..config.names import is_safe_name
from .annotations import ANNOTATIONS
from .writer import LAUNCH, MANIFEST, VERDICTS

#: what a row depends on besides the tables (launch.json names a run that has no manifest)
_NAMED = (MANIFEST, LAUNCH, VERDICTS, ANNOTATIONS)
#: how long an unsealed run's files must have stood still before its stamp is trusted. It may still be writing, and
#: a file replaced within one tick of the file system's clock (up to 2 s on some) would leave its stamp as it was;
#: a change after that moves a time the stamp holds.
SETTLED_NS = 2_000_000_000


def stamps(runs_dir: Path, known: Mapping[str, str]) -> dict[str, str]:
    """Per run directory, its stamp; "" for an unsealed run that changed in the last 2 s, read every time until it
    settles. `known`: the stamps the rows kept hold, whose names are checked first."""
    found: dict[str, str] = {}
    try:
        entries = list(os.scandir(runs_dir))
    except FileNotFoundError:
        return found
    settled = time.time_ns() - SETTLED_NS
    for entry in entries:
        name = entry.name
        if name.startswith(".") or not entry.is_dir() or not is_safe_name(name):  # as Journal.run_ids: no run
            continue
        head = f"{entry.stat().st_mtime_ns}|"
        stamp = known.get(name)
        # the names of an unmoved run's stamp, checked with one stat each; it runs for every run on every read
        if stamp and stamp.startswith(head):
            names = stamp[len(head):stamp.index("|", len(head))]
            try:
                found[name] = f"{head}{names}|{_sizes(entry.path, names.split(',') if names else [])}"
                continue
            except (FileNotFoundError, ValueError):
                pass  # a file went, and its directory's mtime did not say so (a copy that kept times)
        found[name] = _listed(entry.path, head, settled)
    return found


def sealed(stamp: str) -> bool:
    """Whether a stamp is a sealed run's: its names hold the manifest ("" for a run still writing)."""
    parts = stamp.split("|")
    return len(parts) == 3 and MANIFEST in parts[1].split(",")


def run_names(runs_dir: Path) -> list[str]:
    """The run directories' names, as `stamps` and Journal.run_ids take them."""
    try:
        with os.scandir(runs_dir) as entries:
            return sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir() and is_safe_name(e.name))
    except FileNotFoundError:
        return []


def stamp_of(runs_dir: Path, name: str) -> str:
    """One run's stamp read afresh (what `stamps` gives a run it has no stamp for): an index rebuilt from nothing
    takes each run's stamp beside its row, in the processes that read them."""
    path = os.path.join(runs_dir, name)
    try:
        head = f"{os.stat(path).st_mtime_ns}|"
    except FileNotFoundError:
        return ""
    return _listed(path, head, time.time_ns() - SETTLED_NS)


def _sizes(directory: str, names: list[str]) -> str:
    stat = os.stat
    return ",".join([f"{s.st_size}@{s.st_mtime_ns}" for s in [stat(f"{directory}/{name}") for name in names]])


def _listed(directory: str, head: str, settled: int) -> str:
    try:
        with os.scandir(directory) as listing:
            names = sorted(e.name for e in listing if e.name in _NAMED
                           or e.name.endswith(".parquet") and not e.name.startswith("."))
        if MANIFEST in names and LAUNCH in names:
            names.remove(LAUNCH)  # a sealed run is named by its manifest
        sizes = _sizes(directory, names)
    except FileNotFoundError:
        return ""  # removed while being read: read, and found gone
    if MANIFEST not in names:
        times = [int(head[:-1])] + [int(size.split("@")[1]) for size in sizes.split(",") if size]
        if max(times) > settled:
            return ""
    return f"{head}{','.join(names)}|{sizes}"
