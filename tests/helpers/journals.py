"""Journals the tests build: a sealed run with the tables asked for, and copies of the sample journals (kept in
data/sample-journals.tar.xz, extracted once into servebook's cache: servebook.journal.samples)."""

import json
import re
import shutil
from pathlib import Path

import pandas as pd

from servebook.journal import Journal, Manifest
from servebook.journal.samples import sample_journal as shared_sample
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
    """A copy of a sample journal under `tmp_path` (a test must never touch the shared one): its root."""
    target = tmp_path / "journal"
    shutil.copytree(shared_sample(name), target)
    return target


def compare_journal(root: Path) -> dict[str, list]:
    """Runs to compare against a reference (synthetic): three of "base" (one configuration, its noise floor), one of
    "near" at the same speed, one of "far" half as fast again, and a failed one; label -> its run records."""
    from servebook.journal.synthetic import write_synthetic_run

    journal = Journal(root)
    runs: dict[str, list] = {}
    for index, label, speed, chunk in [(1, "base", 1.0, 256), (2, "base", 1.0, 256), (3, "base", 1.0, 256),
                                       (4, "near", 1.0, 128), (5, "far", 1.5, 512)]:
        runs.setdefault(label, []).append(write_synthetic_run(journal, index=index, label=label, speed=speed,
                                                              chunk_size=chunk, requests=20, study="compare"))
    runs["refused"] = [write_synthetic_run(journal, index=6, label="refused", status="failed", requests=20,
                                           study="compare")]
    return runs


_COMPARE_SCRIPT = re.compile(r'^\(window\.SERVEBOOK_COMPARE = [^;]*?\)\["(?:runs|floors)"\]\["([^"]+)"\] = (.*);\n$',
                             re.S)


def read_compare_script(path: Path) -> tuple[str, dict]:
    """(key, data) of one of compare.html's scripts (runs/ID/compare.js, floors/KEY.js) as the build wrote it."""
    key, data = _COMPARE_SCRIPT.match(path.read_text()).groups()
    return key, json.loads(data)
