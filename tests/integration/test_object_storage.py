"""Journals on object storage, against a real S3-compatible server the test starts (moto's server mode on
loopback), not a mocked client: runs written, listed, judged and published through s3:// URLs."""

import os
from pathlib import Path

import pytest

from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, SMALL_PLAN, simulated
from tests.helpers.cli import servebook as run_cli

pytestmark = pytest.mark.simulator
REPO = Path(__file__).resolve().parents[2]


def test_a_run_written_to_s3_is_sealed_there_and_read_from_another_host(s3, tmp_path):
    import s3fs

    url = "s3://journals/team-a"
    writer = Journal(url, mirror=tmp_path / "host-a")
    record = run_candidate(simulated("sglang"), SMALL_PLAN, writer, reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    stored = s3fs.S3FileSystem().find(f"journals/team-a/runs/{record.run_id}")
    names = {Path(p).name for p in stored}
    assert {"manifest.json", "cells.parquet", "requests.parquet", "engine.log", "launch.json"} <= names
    # An unsealed run on the store (its writer died before the manifest) shows as incomplete elsewhere.
    s3fs.S3FileSystem().pipe_file("journals/team-a/runs/20260101T000000Z-deadbeef-0001/launch.json", b"{}")
    reader = Journal(url, mirror=tmp_path / "host-b")
    statuses = {r.run_id: r.status for r in reader.runs()}
    assert statuses == {record.run_id: "completed", "20260101T000000Z-deadbeef-0001": "incomplete"}
    cells = reader.run(record.run_id).table("cells")
    assert cells is not None and cells["valid"].all()
    # A verdict appended on one host reaches the other through the store.
    reader.run(record.run_id).append_verdict({"outcome": "accepted", "reasons": ["test"]})
    assert Journal(url, mirror=tmp_path / "host-a").run(record.run_id).latest_verdict["outcome"] == "accepted"


def test_the_cli_sweeps_lists_judges_and_publishes_an_s3_journal(s3, tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text("""
name: s3-study
base:
  engine: vllm
  model: {id: org/model, revision: abc}
  knobs: {max_running_requests: 4}
  launch: {simulator: true, ready_timeout_s: 20}
variants: [{name: two-slots, set: {knobs.max_running_requests: 2}}]
plan:
  decode: {concurrency: [1, 2], categories: [prose], output_tokens: 16, rounds: 1}
  prefill: null
  warmup_requests: 1
  max_foreign_cpu_cores: 8
verdict: {rules: [{metric: aggregate_tok_s, concurrency: [2], max_regression_pct: 90}]}
""")
    env = {**os.environ, **s3, "SERVEBOOK_PLAIN_PROGRESS": "1", "COLUMNS": "160",
           "SERVEBOOK_MIRRORS": str(tmp_path / "mirrors")}

    def servebook(*args):
        return run_cli(*args, env=env, timeout=600).stdout

    url = "s3://journals/study"
    servebook("sweep", study, "--journal", url)
    listing = servebook("journal", "ls", "--journal", url)
    assert "journal s3://journals/study: 2 runs (2 completed)" in listing and "accepted" in listing
    servebook("site", "--journal", url, "--out", tmp_path / "site")
    assert (tmp_path / "site" / "index.html").is_file()
    fresh = Journal(url, mirror=tmp_path / "elsewhere")
    assert [r.status for r in fresh.runs()] == ["completed", "completed"]
    assert all((r.dir / "notebook.ipynb").is_file() for r in fresh.runs())
    assert any(r.latest_verdict for r in fresh.runs())
