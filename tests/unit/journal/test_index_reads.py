"""The index reads a run only when it is new or its files changed (issue 52), and a read keeps what it read in
servebook's cache, never in the journal: a changed file is inspected again, damage found stays found, a repaired or
replaced run is read again."""

import os
import shutil

import pandas as pd
import pytest

from servebook.journal import Journal
from servebook.journal.index_store import INDEX_FILE, cache_path
from servebook.journal.synthetic import write_synthetic_run


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def reads(monkeypatch):
    """The run ids the index reads from disk."""
    read: list[str] = []
    original = Journal.run
    monkeypatch.setattr(Journal, "run", lambda self, run_id: read.append(run_id) or original(self, run_id))
    return read


def journal_of(tmp_path, runs: int = 4) -> tuple[Journal, list]:
    journal = Journal(tmp_path / "journal")
    return journal, [write_synthetic_run(journal, index=i, requests=10, verdict="accepted") for i in range(runs)]


def snapshot(root) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def test_a_read_keeps_the_rows_it_read_outside_the_journal_and_reads_no_run_again(tmp_path, cache, reads):
    journal, runs = journal_of(tmp_path)
    before = snapshot(journal.root)
    reads.clear()
    first = journal.index()
    assert sorted(reads) == [r.run_id for r in runs]
    assert snapshot(journal.root) == before and not (journal.root / INDEX_FILE).exists()  # the journal untouched
    assert cache_path(journal.root).is_file() and cache_path(journal.root).is_relative_to(cache)
    reads.clear()
    pd.testing.assert_frame_equal(Journal(journal.root).index(), first)
    assert reads == []


def test_a_table_changed_in_place_is_inspected_again_and_its_damage_stays_found(tmp_path, reads):
    journal, runs = journal_of(tmp_path)
    journal.index()
    path = runs[1].table_path("requests")
    whole = path.read_bytes()
    with open(path, "r+b") as f:  # in place: the run's directory does not move
        f.truncate(len(whole) - 40)
    reads.clear()
    row = journal.index().set_index("run_id").loc[runs[1].run_id]
    assert (row["status"], row["failure"]) == ("damaged", "table_unreadable") and reads == [runs[1].run_id]
    reads.clear()
    for _ in range(2):  # found once, kept: no read finds it sound again until its files change
        assert journal.index().set_index("run_id").loc[runs[1].run_id, "status"] == "damaged"
    assert reads == []
    path.write_bytes(whole)  # repaired
    row = journal.index().set_index("run_id").loc[runs[1].run_id]
    assert (row["status"], row["failure"], reads) == ("completed", None, [runs[1].run_id])


def test_a_manifest_rewritten_in_place_and_a_replaced_run_are_read_again(tmp_path, reads):
    journal, runs = journal_of(tmp_path)
    journal.index()
    manifest = runs[0].dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"completed"', '"failed"', 1))
    replaced = runs[2].dir
    shutil.rmtree(replaced)
    shutil.copytree(runs[3].dir, replaced)  # another run's files under this id, its times kept by copytree
    reads.clear()
    frame = journal.index().set_index("run_id")
    assert sorted(reads) == sorted([runs[0].run_id, runs[2].run_id])
    assert frame.loc[runs[0].run_id, "status"] == "failed"
    assert frame.loc[runs[2].run_id, "candidate"] == runs[3].candidate_label


def test_a_new_event_or_table_moves_the_run_and_an_unsealed_run_is_read_until_it_settles(tmp_path, reads,
                                                                                         monkeypatch):
    from servebook.journal import stamps

    monkeypatch.setattr(stamps, "SETTLED_NS", 10**18)  # however slow this test runs, the unsealed run is recent
    journal, runs = journal_of(tmp_path)
    unsealed = write_synthetic_run(journal, index=9, requests=10, status="incomplete")
    journal.index()
    reads.clear()
    journal.index()
    assert reads == [unsealed.run_id]  # it may still be writing
    runs[0].annotate("tag", "keep")
    (runs[1].dir / "extra.parquet").write_bytes(b"not parquet")
    reads.clear()
    frame = journal.index().set_index("run_id")
    assert sorted(reads) == sorted([runs[0].run_id, runs[1].run_id, unsealed.run_id])
    assert frame.loc[runs[0].run_id, "tags"] == "keep" and frame.loc[runs[1].run_id, "status"] == "damaged"
    monkeypatch.setattr(stamps, "SETTLED_NS", 2_000_000_000)
    settled = os.stat(unsealed.dir).st_mtime_ns / 1e9 - 3
    for path in [*unsealed.dir.iterdir(), unsealed.dir]:
        os.utime(path, (settled, settled))  # as if written a while ago, and never since
    journal.index()
    reads.clear()
    journal.index()
    assert reads == []


def test_rows_an_older_servebook_stamped_are_read_again_once_and_a_writer_stores_the_index(tmp_path, reads):
    journal, runs = journal_of(tmp_path)
    frame = journal.index(write=True)
    stored = pd.read_parquet(journal.root / INDEX_FILE)
    stored.assign(stamp="1:0:0:cells.parquet=1@1").to_parquet(journal.root / INDEX_FILE, index=False)
    cache_path(journal.root).unlink(missing_ok=True)
    reads.clear()
    pd.testing.assert_frame_equal(journal.index(), frame)
    assert len(reads) == len(runs)
    reads.clear()
    journal.index()
    assert reads == []  # kept by that read, in the cache
    journal.index(write=True)  # a command that writes runs stores what the cache holds
    cache_path(journal.root).unlink()
    reads.clear()
    journal.index()
    assert reads == []
