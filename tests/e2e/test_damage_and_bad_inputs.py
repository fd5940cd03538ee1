"""The CLI on a damaged journal, on outputs it cannot write and on load it cannot offer (issue 35): every command
goes on past a damaged run and names it; the gate keeps its exit code; a bad input is one message with exit 2,
before any engine starts and any run is written."""

import shutil
import subprocess
from pathlib import Path

import pytest

from servebook.journal import samples
from tests.helpers.cli import cli_env
from tests.helpers.cli import servebook as run_cli

REPO = Path(__file__).resolve().parents[2]
SAMPLE = samples.sample_journal("sample-journal")
STUDY = REPO / "data" / "studies" / "h200-1b-llamacpp.yaml"
ENV = cli_env(columns=200)
SIMULATED = """
name: sim
engine: vllm
model: {id: org/model}
knobs: {max_running_requests: 4}
launch: {simulator: true, ready_timeout_s: 20}
"""


def servebook(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    """The CLI's result whatever its exit status: these tests read the status they expect themselves."""
    return run_cli(*args, check=False, env={**ENV, **(env or {})}, timeout=timeout)


@pytest.fixture
def damaged(tmp_path) -> tuple[Path, str]:
    """A copy of the sample journal whose first baseline run's cells.parquet was cut short."""
    journal = tmp_path / "journal"
    shutil.copytree(SAMPLE, journal)
    run_id = sorted(p.name for p in (journal / "runs").iterdir())[0]
    with open(journal / "runs" / run_id / "cells.parquet", "r+b") as f:
        f.truncate(100)
    return journal, run_id


def test_every_reading_command_names_a_damaged_run_and_goes_on(damaged):
    journal, run_id = damaged
    listed = servebook("journal", "ls", "--journal", journal, "--status", "damaged", "--format", "json")
    assert listed.returncode == 0 and run_id in listed.stdout and "table_unreadable" in listed.stdout, listed.stderr
    judged = servebook("judge", STUDY, "--journal", journal, "--format", "json")
    assert judged.returncode == 0, judged.stderr
    assert f'"run_id": "{run_id}"' in judged.stdout and '"code": "table_unreadable"' in judged.stdout
    shown = servebook("journal", "show", run_id, "--journal", journal)
    assert shown.returncode == 0 and "damaged" in shown.stdout, shown.stderr
    for args in (["history", "baseline", "--study", "h200-1b-llamacpp"], ["compare", "--a", "candidate=baseline,plan_id=9f279ee7850f",
                                                "--b", "candidate=chunk-512,plan_id=9f279ee7850f"]):
        result = servebook(*args, "--journal", journal)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr


def test_the_gate_keeps_its_exit_code_when_the_step_summary_cannot_be_written(tmp_path):
    journal = tmp_path / "journal"
    shutil.copytree(SAMPLE, journal)
    result = servebook("judge", STUDY, "--journal", journal, "--fail-on", "rejected", "--format", "json",
                       env={"GITHUB_STEP_SUMMARY": str(tmp_path / "missing" / "summary.md")})
    assert result.returncode == 10, result.stderr
    assert "GITHUB_STEP_SUMMARY" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["judge", "sweep", "search"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_runs(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    journal = tmp_path / "journal"
    study = STUDY
    if command == "sweep":
        study = tmp_path / "study.yaml"
        study.write_text("name: sim-study\nbase: {engine: vllm, model: {id: org/model}, "
                         "launch: {simulator: true}}\nplan: {decode: {concurrency: [1], output_tokens: 8}, "
                         "prefill: null}\n")
    elif command == "search":
        study = REPO / "data" / "studies" / "search-sim.yaml"
    else:
        shutil.copytree(SAMPLE, journal)
    before = sorted((journal / "runs").iterdir()) if journal.exists() else []
    formats = [] if command == "search" else ["--format", "json"]
    result = servebook(command, study, "--journal", journal, *formats, "--output", blocker / "out.json", timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--output" in result.stderr and "Traceback" not in result.stderr
    assert (sorted((journal / "runs").iterdir()) if (journal / "runs").exists() else []) == before


@pytest.mark.parametrize("rate, field", [(".nan", "rates_rps"), (".inf", "rates_rps"), ("1e9", "rates_rps")])
def test_a_load_rate_that_cannot_be_offered_is_one_message_before_the_engine(tmp_path, rate, field):
    candidate, plan = tmp_path / "sim.yaml", tmp_path / "plan.yaml"
    candidate.write_text(SIMULATED)
    plan.write_text(f"decode: null\nprefill: null\nload: {{rates_rps: [{rate}], duration_s: 1}}\n")
    result = servebook("run", candidate, "--plan", plan, "--journal", tmp_path / "journal", timeout=60)
    assert result.returncode == 2 and field in result.stderr, result.stdout + result.stderr
    assert not (tmp_path / "journal" / "runs").exists() or not any((tmp_path / "journal" / "runs").iterdir())


def test_capacity_flags_refine_the_plan_and_a_first_probe_of_hours_is_refused(tmp_path):
    candidate, plan = tmp_path / "sim.yaml", tmp_path / "plan.yaml"
    candidate.write_text(SIMULATED)
    plan.write_text("decode: null\nprefill: null\nload: {}\nslo: {ttft_s: 1}\ncapacity: {low_rps: 2, max_probes: 3}\n")
    journal = tmp_path / "journal"
    # the plan's low_rps 2 is kept: above --high 1.5, so refused; replaced by the flag default 1, it ran
    kept = servebook("capacity", candidate, "--slo", "ttft_s=1", "--plan", plan, "--high", "1.5", "--journal",
                     journal, timeout=60)
    assert kept.returncode == 2 and "low_rps 2 must be below high_rps 1.5" in kept.stderr, kept.stdout + kept.stderr
    slow = servebook("capacity", candidate, "--slo", "ttft_s=1", "--low", "0.001", "--journal", journal, timeout=60)
    assert slow.returncode == 2 and "low_rps 0.001" in slow.stderr and "3600 s" in slow.stderr, slow.stderr
    assert not (journal / "runs").exists() or not any((journal / "runs").iterdir())


@pytest.mark.simulator
def test_a_capacity_held_at_no_rate_is_said_and_exits_1(tmp_path):
    candidate = tmp_path / "sim.yaml"
    candidate.write_text(SIMULATED)
    result = servebook("capacity", candidate, "--slo", "ttft_s=0.000001", "--low", "2", "--high", "8",
                       "--max-probes", "2", "--probe-s", "1", "--min-requests", "10", "--narrowing-requests", "10",
                       "--journal", tmp_path / "journal", timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "held at no probed rate" in result.stdout and "nan" not in result.stdout, result.stdout
