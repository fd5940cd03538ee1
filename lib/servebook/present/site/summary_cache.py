"""Every run's summary the last build made, in one file read once: a build with nothing new re-reads none of them.

Reading and validating 1,000 summaries from their own JSON files was half of a build that changed nothing (0.21 of
0.45 s). The summaries are kept pickled together beside the site's state, each under the fingerprint of the run's
files it was made from, and taken back only when that fingerprint and servebook's template version still match;
the per-run JSON files stay as they were (one a run, readable). The file is the builder's own cache in the site's
output folder: a file that cannot be read is no cache, never an error.

A build that adds a run writes only what changed, into a second file beside the whole (writing the whole again was
0.08 s of adding one run to 1,000); the two are merged, and written as one again, once the changes reach a tenth of
the whole.
"""

from __future__ import annotations

import gc
import pickle
from pathlib import Path

from .files import write_page
from .summary import RunSummary

__all__ = ["SummaryCache"]

FILE = "summaries.pickle"
CHANGES = "summaries-changed.pickle"
#: the changes kept apart up to this share of the whole, then merged into it
CHANGED_SHARE = 0.1


class SummaryCache:
    def __init__(self, folder: Path, version: str) -> None:
        """The summaries kept in `folder` (made here when missing: the builder's other caches go there too)."""
        folder.mkdir(parents=True, exist_ok=True)
        self.path, self.changes_path = folder / FILE, folder / CHANGES
        self.version = version
        self.kept: dict[str, tuple[str, RunSummary]] = self._load(self.path)
        # what the last builds changed since the whole was written: summaries made since, and runs gone (None)
        self.since: dict[str, tuple[str, RunSummary] | None] = self._load(self.changes_path) if self.kept else {}
        for run_id, entry in self.since.items():
            if entry is None:
                self.kept.pop(run_id, None)
            else:
                self.kept[run_id] = entry
        self.changed = False

    def _load(self, path: Path) -> dict:
        # A thousand runs' summaries are a million small objects: the cyclic collector, woken again and again while
        # they are made, walked the growing heap each time (half of the load). Nothing made here is garbage yet.
        collecting = gc.isenabled()
        gc.disable()
        try:
            version_kept, kept = pickle.loads(path.read_bytes())
        except Exception:  # noqa: BLE001 - missing, cut short or from another servebook: rebuilt as runs are read
            return {}
        finally:
            if collecting:
                gc.enable()
        return kept if version_kept == self.version and isinstance(kept, dict) else {}

    def get(self, run_id: str, fingerprint: str) -> RunSummary | None:
        found = self.kept.get(run_id)
        if found is None or found[0] != fingerprint:
            return None
        return found[1].model_copy()  # the builder sets fields on what it gets

    def put(self, run_id: str, fingerprint: str, summary: RunSummary) -> None:
        """Keep `summary` as the build read or made it (before the builder sets its own fields on it)."""
        found = self.kept.get(run_id)
        if found is None or found[0] != fingerprint:
            self.kept[run_id] = self.since[run_id] = fingerprint, summary.model_copy()
            self.changed = True

    def save(self, keep: set[str]) -> None:
        """Write what changed, the runs no longer in the journal (those not in `keep`) dropped."""
        gone = set(self.kept) - keep
        for run_id in gone:
            del self.kept[run_id]
            self.since[run_id] = None
        if not (self.changed or gone):
            return
        if len(self.since) > CHANGED_SHARE * len(self.kept) or not self.path.is_file():
            write_page(self.path, pickle.dumps((self.version, self.kept), protocol=pickle.HIGHEST_PROTOCOL))
            self.changes_path.unlink(missing_ok=True)
        else:
            write_page(self.changes_path, pickle.dumps((self.version, self.since), protocol=pickle.HIGHEST_PROTOCOL))
