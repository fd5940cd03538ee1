"""A disk that fills during a run (issue 56, item 11): the run is sealed `failed` with cause disk_full, naming the
file and the bytes left, its tables as last written whole; one that cannot be sealed or started says so in one line.
The disk fills through /dev/full (tests/helpers/disk.py), the run is servebook's simulator standing in for llama.cpp
and is started as a user starts it, through the command line."""

import pytest
from typer.testing import CliRunner

from servebook.cli import app
from servebook.journal import Journal
from servebook.journal.writer import RESERVE
from tests.helpers.disk import fill_disk, writes_of

pytestmark = pytest.mark.simulator

CANDIDATE = """name: sim-llamacpp
engine: llamacpp
model: {path: "tiny:target"}
knobs: {max_running_requests: 4}
launch: {simulator: true, ready_timeout_s: 4}
"""
PLAN = """decode: {concurrency: [1, 4], categories: [prose], output_tokens: 24, rounds: 1}
warmup_requests: 1
max_foreign_cpu_cores: 4
"""


def run(tmp_path):
    (tmp_path / "candidate.yaml").write_text(CANDIDATE)
    (tmp_path / "plan.yaml").write_text(PLAN)
    return CliRunner().invoke(app, ["run", str(tmp_path / "candidate.yaml"), "--plan", str(tmp_path / "plan.yaml"),
                                    "--journal", str(tmp_path / "journal")])


def no_traceback(result, code):
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.output


def test_a_disk_that_fills_mid_run_seals_it_failed_naming_the_file_and_the_bytes_left(tmp_path, monkeypatch):
    fill_disk(monkeypatch, writes_of("chunks.parquet", after=1))  # the first cell's tables fit, the second's not
    output = no_traceback(run(tmp_path), 1)  # a failed run, reported as any failed run is
    [record] = Journal(tmp_path / "journal").runs()
    failure = record.manifest.failure
    assert record.status == "failed" and failure.cause == "disk_full" and failure.stage == "measure"
    assert failure.message.startswith(f"{record.dir / 'chunks.parquet'}: the disk is full (")
    assert "bytes free)" in failure.message and "disk_full" in output
    assert record.table("requests") is not None and record.table("cells") is None  # rows kept, no figures
    assert not (record.dir / RESERVE).exists(), "the reserve went to the seal"


def test_a_disk_that_fills_before_the_first_cell_fails_the_run_at_launch(tmp_path, monkeypatch):
    fill_disk(monkeypatch, writes_of("self_report.json"))  # what the engine reports of itself, written once it is up
    no_traceback(run(tmp_path), 1)
    [record] = Journal(tmp_path / "journal").runs()
    assert (record.status, record.manifest.failure.cause, record.manifest.failure.stage) == ("failed", "disk_full",
                                                                                           "launch")
    assert "self_report.json: the disk is full (" in record.manifest.failure.message


def test_a_run_whose_launch_record_finds_the_disk_full_is_one_line_and_leaves_no_run(tmp_path, monkeypatch):
    fill_disk(monkeypatch, writes_of("launch.json"))
    output = no_traceback(run(tmp_path), 2)
    assert "launch.json: the disk is full (" in output
    assert not any((tmp_path / "journal" / "runs").iterdir())


def test_a_seal_that_even_the_reserve_cannot_hold_leaves_the_run_incomplete_in_one_line(tmp_path, monkeypatch):
    fill_disk(monkeypatch, writes_of("manifest.json"))
    output = no_traceback(run(tmp_path), 2)
    assert "manifest.json: the disk is full (" in output and "is left unsealed (incomplete)" in output
    [record] = Journal(tmp_path / "journal").runs()
    assert record.status == "incomplete"
