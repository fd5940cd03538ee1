"""Journals the tests build: a sealed run with the tables asked for, and copies of the committed sample journals."""

import shutil
from pathlib import Path

import pandas as pd

from servebook.journal import Journal, Manifest
from servebook.journal.writer import RunWriter

REPO = Path(__file__).resolve().parents[2]


def sealed_run(journal: Journal, candidate_id: str = "abcdef123456", status: str = "completed", *,
               cells: list[dict] | None = None, requests: list[dict] | None = None, **manifest) -> RunWriter:
    """A run of `candidate_id` with `cells` and `requests` tables where given, sealed with `manifest`'s fields
    (candidate_id and status always; the rest as a test needs them)."""
    writer = journal.start_run(candidate_id)
    if requests is not None:
        writer.write_table("requests", requests)
    if cells is not None:
        writer.write_table("cells", pd.DataFrame(cells))
    writer.seal(Manifest(status=status, candidate_id=candidate_id, **manifest))
    return writer


def sample_journal(tmp_path: Path, name: str = "sample-journal") -> Path:
    """A copy of a committed journal under `tmp_path` (a test must never touch the repository's): its root."""
    target = tmp_path / "journal"
    shutil.copytree(REPO / "data" / name, target)
    return target
