"""The typed manifest reads journals written before it existed, and round-trips what it does not model."""

import json
import shutil
from pathlib import Path

import pytest

from servebook.journal import Journal, Manifest
from servebook.present import build_site, report
from servebook.util.render import to_text

FIXTURE = Path(__file__).parents[2] / "fixtures" / "journal-v0.1.0"


@pytest.fixture
def old_journal(tmp_path):
    """A journal written by servebook 0.1.0 (flat modules, untyped manifest): one completed real run on
    the tiny model with a verdict, one failed launch, one incomplete run."""
    shutil.copytree(FIXTURE, tmp_path / "journal")
    return Journal(tmp_path / "journal")


def test_every_run_of_an_old_journal_opens_with_its_status(old_journal):
    statuses = sorted(r.status for r in old_journal.runs())
    assert statuses == ["completed", "failed", "incomplete"]
    completed = next(r for r in old_journal.runs() if r.status == "completed")
    assert completed.manifest.summary.valid_cells == completed.manifest.summary.cells > 0
    assert completed.manifest.summary.gates["json_schema"].cases == 1
    assert completed.manifest.environment.engine_version
    failed = next(r for r in old_journal.runs() if r.status == "failed")
    assert failed.manifest.failure.cause == "bad_flag"
    incomplete = next(r for r in old_journal.runs() if r.status == "incomplete")
    assert incomplete.identity.candidate_id and incomplete.manifest is None


def test_old_manifests_round_trip_without_losing_fields(old_journal):
    for record in old_journal.runs():
        path = record.dir / "manifest.json"
        if not path.is_file():
            continue
        raw = json.loads(path.read_text())
        again = json.loads(Manifest.model_validate(raw).to_json())
        missing = {k for k in raw if k not in again}
        assert not missing, missing
        assert again["environment"] == {**again["environment"], **raw["environment"]}


def test_old_journal_lists_reports_and_builds_a_site(old_journal, tmp_path):
    assert len(old_journal.index()) == 3
    listing = to_text(old_journal.blocks(), width=200)
    assert "completed" in listing and "failed" in listing and "incomplete" in listing
    for record in old_journal.runs():
        text = str(report(record))
        assert record.run_id in text
    result = build_site(old_journal, tmp_path / "site")
    assert result.runs == 3 and (tmp_path / "site" / "index.html").is_file()


def test_a_manifest_of_the_wrong_shape_is_damaged_not_a_crash(tmp_path):
    journal = Journal(tmp_path)
    writer = journal.start_run("abcdef123456")
    (writer.dir / "manifest.json").write_text(json.dumps({"status": "exploded"}))
    record = journal.run(writer.run_id)
    assert record.status == "damaged" and "manifest model" in record.problem
