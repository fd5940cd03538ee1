"""A damaged run directory (a truncated or deleted table, a manifest that is not one) is a status with a reason:
named by the listing, left out of verdicts, histories, comparisons and pages with the reason shown, never a
traceback in whichever command first reads the damaged file."""

import json

import pytest

from servebook.config import load_study
from servebook.config.slices import JournalSlice
from servebook.journal import Journal
from servebook.journal.synthetic import write_synthetic_run
from servebook.present import build_site, report
from servebook.util.progress import Reporter
from servebook.util.render import to_text
from servebook.verdicts import compare_slices, history, judge

STUDY = """
name: synthetic
base: {model: {path: "tiny:target"}, knobs: {chunk_size: 64, max_running_requests: 4}}
variants:
  - {name: bigger-chunks, set: {knobs.chunk_size: 128}}
verdict: {rules: [{metric: aggregate_tok_s, concurrency: [1, 4], max_regression_pct: 5}]}
"""


@pytest.fixture
def study(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    return load_study(path)


def journal_of(tmp_path, runs: int = 3) -> tuple[Journal, list, list]:
    """A study's journal: `runs` runs of the baseline and of the variant, interleaved, the variant as fast."""
    journal = Journal(tmp_path / "journal")
    baseline, variant = [], []
    for i in range(runs):
        baseline.append(write_synthetic_run(journal, index=2 * i, label="baseline", chunk_size=64, requests=20,
                                            speed=1.0))
        variant.append(write_synthetic_run(journal, index=2 * i + 1, label="bigger-chunks", chunk_size=128,
                                           requests=20, speed=1.0))
    return journal, baseline, variant


def truncate(path, size: int = 100) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def row(journal: Journal, run_id: str) -> dict:
    return journal.index(write=True).set_index("run_id").loc[run_id].to_dict()


def test_a_table_truncated_after_the_index_was_written_is_named_by_the_listing(tmp_path):
    journal, baseline, _ = journal_of(tmp_path, runs=1)
    assert row(journal, baseline[0].run_id)["status"] == "completed"  # index.parquet written
    truncate(baseline[0].table_path("cells"))
    found = row(journal, baseline[0].run_id)
    assert (found["status"], found["failure"]) == ("damaged", "table_unreadable")
    record = journal.run(baseline[0].run_id)
    assert record.damage is not None and record.damage.file == "cells.parquet"
    assert record.table("cells") is None
    assert "damaged: table_unreadable" in to_text(journal.listing(wide=True), width=200)


def test_a_damaged_baseline_run_is_left_out_of_the_verdict_and_named(tmp_path, study):
    journal, baseline, variant = journal_of(tmp_path)
    before = {item.entry.name: item.verdict.outcome for item in judge(study, journal, append=False)}
    truncate(baseline[0].table_path("cells"))
    (baseline[1].table_path("cells")).unlink()
    judged = {item.entry.name: item for item in judge(study, journal, append=False)}
    base = judged["baseline"]
    assert base.verdict.outcome == before["baseline"] == "accepted"
    assert [r.run_id for r in base.records] == [baseline[2].run_id]
    assert {r.run_id: r.damage.code for r in base.left_out} == {baseline[0].run_id: "table_unreadable",
                                                                 baseline[1].run_id: "table_missing"}
    assert any(baseline[0].run_id in reason and "table_unreadable" in reason for reason in base.verdict.reasons)
    assert any(baseline[1].run_id in reason and "table_missing" in reason for reason in base.verdict.reasons)


def test_a_baseline_whose_every_run_is_damaged_leaves_the_variant_undecided_not_rejected(tmp_path, study):
    journal, baseline, _ = journal_of(tmp_path)
    for record in baseline:
        record.table_path("cells").unlink()
    judged = {item.entry.name: item for item in judge(study, journal, append=False)}
    assert judged["baseline"].verdict is None and len(judged["baseline"].left_out) == 3
    variant = judged["bigger-chunks"].verdict
    assert variant.outcome == "inconclusive"
    assert all(any(r.run_id in reason for reason in variant.reasons) for r in baseline)


def test_a_manifest_without_its_fields_is_damaged_and_named_after_its_launch_record(tmp_path, study):
    journal, baseline, _ = journal_of(tmp_path, runs=2)
    (baseline[0].dir / "manifest.json").write_text(json.dumps({"status": "completed"}))
    record = journal.run(baseline[0].run_id)
    assert record.status == "damaged" and record.damage.code == "manifest_incomplete"
    assert record.candidate_label == "baseline"  # from launch.json, not "?"
    found = row(journal, baseline[0].run_id)
    assert (found["status"], found["candidate"], found["failure"]) == ("damaged", "baseline", "manifest_incomplete")
    judged = {item.entry.name: item for item in judge(study, journal, append=False)}
    assert [r.run_id for r in judged["baseline"].left_out] == [baseline[0].run_id]


def test_a_manifest_that_is_not_json_is_damaged(tmp_path):
    journal, baseline, _ = journal_of(tmp_path, runs=1)
    (baseline[0].dir / "manifest.json").write_text("{not json")
    record = journal.run(baseline[0].run_id)
    assert record.status == "damaged" and record.damage.code == "manifest_unreadable"
    assert record.candidate_label == "baseline"


def test_site_history_compare_and_show_go_on_past_a_damaged_run(tmp_path, study):
    journal, baseline, variant = journal_of(tmp_path)
    truncate(baseline[0].table_path("cells"))
    truncate(variant[0].table_path("requests"))
    (baseline[1].dir / "manifest.json").write_text(json.dumps({"status": "completed"}))
    judge(study, journal)
    build_site(journal, tmp_path / "site", reporter=Reporter(quiet=True))
    page = (tmp_path / "site" / "runs" / f"{baseline[0].run_id}.html").read_text()
    assert "table_unreadable" in page
    found = history(journal, "bigger-chunks")
    assert found.runs == 2  # the damaged run is not a point of the history
    compared = compare_slices(journal, JournalSlice(candidate="baseline"), JournalSlice(candidate="bigger-chunks"))
    assert compared.runs_a == [baseline[2].run_id] and len(compared.runs_b) == 2
    shown = to_text(report(journal.run(baseline[0].run_id)).blocks())
    assert "damaged" in shown and "cells.parquet" in shown
