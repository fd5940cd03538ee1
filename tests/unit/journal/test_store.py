import json
import os

import pandas as pd
import pytest

from servebook.config import InputError
from servebook.journal import Journal, Manifest, RunSealed, samples
from tests.helpers.journals import sealed_run as journal_run


def sealed_run(journal: Journal, candidate_id="abcdef123456", status="completed"):
    return journal_run(journal, candidate_id, status, requests=[{"request_id": "r0", "completion_tokens": 8}],
                       candidate_label="c", plan_id="0123456789ab")


def test_a_run_without_manifest_is_incomplete_and_listed(tmp_path):
    journal = Journal(tmp_path)
    done = sealed_run(journal)
    unsealed = journal.start_run("ffffeeee0000")
    unsealed.write_table("requests", [{"request_id": "r0"}])
    statuses = {r.run_id: r.status for r in journal.runs()}
    assert statuses == {done.run_id: "completed", unsealed.run_id: "incomplete"}
    index = journal.index()
    assert set(index["status"]) == {"completed", "incomplete"}
    assert not (tmp_path / "index.parquet").exists()  # a read writes nothing; a writer stores the index
    journal.index(write=True)
    assert (tmp_path / "index.parquet").is_file()


def test_sealed_run_is_never_rewritten(tmp_path):
    writer = sealed_run(Journal(tmp_path))
    with pytest.raises(RunSealed):
        writer.write_table("requests", [{"request_id": "other"}])
    with pytest.raises(RunSealed):
        writer.seal(Manifest(status="failed"))
    assert json.loads((writer.dir / "manifest.json").read_text())["status"] == "completed"


def test_manifest_write_is_atomic(tmp_path, monkeypatch):
    """A crash while the manifest is written leaves no manifest at all, never half of one."""
    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")

    def crash(src, dst):
        raise OSError("disk vanished")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        writer.seal(Manifest(status="completed"))
    monkeypatch.undo()
    assert not (writer.dir / "manifest.json").exists()
    assert [p.name for p in writer.dir.iterdir() if p.name.startswith(".manifest")] == []
    assert journal.run(writer.run_id).status == "incomplete"


def test_a_corrupt_manifest_is_shown_damaged_not_dropped(tmp_path):
    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")
    (writer.dir / "manifest.json").write_text("{not json")
    assert journal.run(writer.run_id).status == "damaged"


def test_run_ids_sort_by_time_and_do_not_collide(tmp_path):
    journal = Journal(tmp_path)
    a = journal.start_run("abcdef123456")
    b = journal.start_run("abcdef123456")
    assert a.run_id != b.run_id
    assert journal.run_ids() == sorted([a.run_id, b.run_id])


def test_lookup_by_fragment_and_clear_error(tmp_path):
    journal = Journal(tmp_path)
    writer = sealed_run(journal)
    assert journal.run(writer.run_id[-8:]).run_id == writer.run_id
    with pytest.raises(InputError, match="not in the journal"):
        journal.run("nope")


def test_unwritable_journal_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="journal: cannot write"):
        Journal(blocker / "journal").ensure_writable()


def test_run_ids_are_file_names_and_a_chosen_id_is_taken_exactly(tmp_path):
    from servebook.config.errors import InputError

    journal = Journal(tmp_path)
    for bad in ("../escape", "a/b", ".hidden"):
        with pytest.raises(InputError):
            journal.start_run("abcdef123456", bad)
        with pytest.raises(InputError):
            journal.run(bad)
    assert not (tmp_path / "escape").exists()
    journal.start_run("abcdef123456", "chosen-1").write_json("launch.json", {})
    with pytest.raises(InputError, match="never reused"):
        journal.start_run("abcdef123456", "chosen-1")
    reserved = [journal.reserve_run("abcdef123456") for _ in range(20)]
    assert len(set(reserved)) == 20  # one second, one candidate: every writer still gets its own run
    assert journal.start_run("abcdef123456", reserved[3]).dir.name == reserved[3]  # a reserved run is taken


def test_the_index_rereads_only_runs_sealed_or_judged_since(tmp_path, monkeypatch):
    import shutil

    from servebook.journal import stamps
    from servebook.journal.synthetic import write_synthetic_run

    monkeypatch.setattr(stamps, "SETTLED_NS", 10**18)  # the incomplete run stays recent however slow the test runs
    journal = Journal(tmp_path)
    runs = [write_synthetic_run(journal, index=i, requests=0, status="incomplete" if i == 4 else "completed")
            for i in range(5)]
    first = journal.index(write=True)
    assert len(first) == 5 and (tmp_path / "index.parquet").is_file()
    reads = []
    original = Journal.run
    monkeypatch.setattr(Journal, "run", lambda self, run_id: reads.append(run_id) or original(self, run_id))
    pd.testing.assert_frame_equal(journal.index(), first)
    assert reads == [runs[4].run_id]  # only the incomplete run, which may still be writing
    runs[1].append_verdict({"outcome": "rejected", "reasons": ["x"]})
    write_synthetic_run(journal, index=9, requests=0)
    shutil.rmtree(runs[2].dir)
    reads.clear()
    again = journal.index()
    assert sorted(reads) == sorted([runs[1].run_id, runs[4].run_id, again.run_id.iloc[-1]])
    assert again.set_index("run_id").loc[runs[1].run_id, "verdict"] == "rejected"
    assert runs[2].run_id not in set(again.run_id) and len(again) == 5
    (tmp_path / "index.parquet").unlink()
    pd.testing.assert_frame_equal(journal.index(), again)  # derived: rebuilt from the manifests alike
    only = journal.select(status="completed", limit=2)
    assert list(only.run_id) == list(again[again.status == "completed"].run_id[-2:])


def test_an_interrupted_run_is_listed_as_such_and_is_no_evidence_for_a_verdict(tmp_path):
    from servebook.journal.synthetic import write_synthetic_run

    journal = Journal(tmp_path)
    kept = write_synthetic_run(journal, index=1, requests=0, label="base", study="s", chunk_size=256)
    stopped = write_synthetic_run(journal, index=2, requests=0, label="base", study="s", chunk_size=256,
                                  status="interrupted")
    assert stopped.status == "interrupted" and stopped.table("cells") is not None
    assert "interrupted" in " ".join(str(journal).split())
    found = journal.find_all(kept.identity.candidate_id, kept.identity.plan_id)
    assert [r.run_id for r in found] == [kept.run_id]


def test_a_misspelled_filter_names_the_close_value_instead_of_listing_nothing(tmp_path):
    """issue 34, item 10: `journal ls --study tiny-dmeo` returned 0 runs as if there were none."""
    import shutil

    from servebook.util.errors import InputError

    shutil.copytree(samples.sample_journal("sample-journal"), tmp_path / "j")
    journal = Journal(tmp_path / "j")
    study = str(journal.index()["study"].dropna().iloc[0])
    assert len(journal.select(study=study)) > 0
    with pytest.raises(InputError, match=f"--study '{study[:-1]}x'.*did you mean '{study}'"):
        journal.select(study=study[:-1] + "x")
    with pytest.raises(InputError, match="--status 'complete'.*did you mean 'completed'"):
        journal.select(status="complete")
    assert journal.select(status="interrupted").empty  # a status no run has is no error
    with pytest.raises(InputError, match="--candidate 'basline'.*did you mean 'baseline'"):
        journal.select(candidate="basline")
    assert set(journal.select(candidate="baseline")["candidate"]) == {"baseline"}
