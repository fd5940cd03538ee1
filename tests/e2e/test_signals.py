"""Ctrl-C, SIGTERM and kill -9 of the real command while several processes send an open-loop load (measure.transport.senders):
a capacity search, a configuration search and a sweep, each against the simulator over loopback. Every signal leaves
no process behind (/proc), no traceback on the terminal, and the run sealed interrupted or left incomplete; a re-run
completes the study."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from servebook.journal import Journal
from tests.helpers.processes import descendants, ended_with_nothing_left, left_running, senders_of, started_until

pytestmark = pytest.mark.simulator
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "SERVEBOOK_PLAIN_PROGRESS": "1", "COLUMNS": "160"}
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]

BASE = """
  engine: vllm
  model: {id: org/model, revision: abc123}
  knobs: {max_running_requests: 4}
  launch: {simulator: true, ready_timeout_s: 20}
"""
# 12 s of arrivals from two sending processes: a signal lands 1.5 s into them, so a sender that outlived servebook
# would still be sending when the test looks
LOAD = ("{rates_rps: [4], warmup_s: 0.5, duration_s: DURATION, prompt_tokens: 64, output_tokens: 8, "
        "client_processes: 2}")
PLAN = f"""
  decode: null
  prefill: null
  warmup_requests: 1
  max_foreign_cpu_cores: 8
  load: {LOAD}
  slo: {{ttft_s: 1.0}}
"""


DECODE = "decode: {concurrency: [2], categories: [prose], output_tokens: 8, rounds: 1}"


def interrupted(args: list, sig: signal.Signals, trees: list[set[int]]) -> str:
    """Run `servebook args`, send `sig` once two senders are sending, and check what it leaves; its output."""
    with tempfile.TemporaryFile("w+") as terminal:  # a file, not a pipe: a sender left behind cannot hold it open
        process = subprocess.Popen([sys.executable, "-m", "servebook.cli", *map(str, args)], cwd=REPO, env=ENV,
                                   stdout=terminal, stderr=subprocess.STDOUT, start_new_session=True)
        tree = {process.pid}
        trees.append(tree)
        deadline = time.monotonic() + 90
        while len(senders_of(process.pid)) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert len(senders_of(process.pid)) >= 2, "the senders never started"
        time.sleep(1.5)
        tree |= descendants(process.pid)  # the kernel, the engine, the senders and their resource tracker
        if sig == signal.SIGINT:
            os.killpg(process.pid, sig)  # what a terminal's Ctrl-C does: the whole foreground group
        else:
            process.send_signal(sig)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"servebook {args[0]} still running 60 s after {sig.name}") from None
        assert left_running(tree, 8) == set(), f"left running after {sig.name}"
        terminal.seek(0)
        output = terminal.read()
    assert "Traceback" not in output, output
    assert process.returncode == (130 if sig == signal.SIGINT else -sig), output
    if sig == signal.SIGINT:
        assert "interrupted" in output, output
    return output


def statuses(journal: Path) -> list[str]:
    return sorted(r.status for r in Journal(journal).runs()) if journal.exists() else []


@pytest.mark.timeout(240)
def test_signals_during_a_capacity_search(tmp_path, trees):
    candidate, plan, journal = tmp_path / "candidate.yaml", tmp_path / "plan.yaml", tmp_path / "journal"
    candidate.write_text("name: sim-vllm" + BASE.replace("\n  ", "\n"))
    plan.write_text(f"load: {LOAD.replace('DURATION', '12')}\nmax_foreign_cpu_cores: 8\n")
    args = ["capacity", candidate, "--slo", "ttft_s=1", "--plan", plan, "--low", "2", "--max-probes", "2",
            "--probe-s", "10", "--min-requests", "10", "--narrowing-requests", "12", "--journal", journal]
    for sig in SIGNALS:
        interrupted(args, sig, trees)
    assert statuses(journal) == ["incomplete", "incomplete", "interrupted"]
    subprocess.run([sys.executable, "-m", "servebook.cli", *map(str, args)], cwd=REPO, env=ENV, check=True,
                   capture_output=True, timeout=120)
    [done] = [r for r in Journal(journal).runs() if r.status == "completed"]
    assert "capacity" in set(done.table("cells")["kind"])


@pytest.mark.timeout(240)
def test_signals_during_a_sweep(tmp_path, trees):
    study, journal = tmp_path / "study.yaml", tmp_path / "journal"
    study.write_text(f"name: signalled\nbase:{BASE}plan:{PLAN.replace('DURATION', '12')}")
    for sig in SIGNALS:
        interrupted(["sweep", study, "--journal", journal], sig, trees)
    # the run in progress is sealed `interrupted` by its kernel, or left unsealed when the kernel was stopped first
    assert set(statuses(journal)) <= {"incomplete", "interrupted"} and len(statuses(journal)) == 3
    subprocess.run([sys.executable, "-m", "servebook.cli", "sweep", study, "--journal", journal], cwd=REPO, env=ENV,
                   check=True, capture_output=True, timeout=120)
    assert statuses(journal).count("completed") == 1


@pytest.mark.timeout(300)
def test_signals_during_a_configuration_search(tmp_path, trees):
    study, journal = tmp_path / "study.yaml", tmp_path / "journal"
    # Screening launches send 12 s of arrivals (the signals land in the first); confirmation sends 2 s.
    study.write_text(f"""name: signalled-search
base:{BASE}search:
  space: {{knobs.max_running_requests: [2, 4, 8]}}
  objective: {{metric: aggregate_tok_s, concurrency: 2}}
  budget: 6
  screen: {{plan: {{load.duration_s: 12}}}}
  confirm: {{top: 2, repeats: 2}}
plan:{PLAN.replace('DURATION', '2').replace('decode: null', DECODE)}""")
    for sig in SIGNALS:
        interrupted(["search", study, "--journal", journal], sig, trees)
    assert set(statuses(journal)) <= {"incomplete", "interrupted"} and len(statuses(journal)) == 3
    subprocess.run([sys.executable, "-m", "servebook.cli", "search", study, "--journal", journal], cwd=REPO, env=ENV,
                   check=True, capture_output=True, timeout=200)
    assert statuses(journal).count("completed") == 6


@pytest.mark.timeout(180)
def test_ctrl_c_of_a_sweep_mid_cell_says_which_run_it_sealed_and_prints_no_traceback(tmp_path, trees):
    """The sweep's kernel is asked to shut down only once the interrupted cell has ended (its run stopped its engine
    and was sealed). Asked at once, the kernel closed its sockets under that cell, whose reply then failed as a
    zmq.error.ZMQError traceback on the terminal, a sweep's and a search's alike (issue 56, item 5)."""
    study, journal = tmp_path / "study.yaml", tmp_path / "journal"
    study.write_text(f"""name: stopped-mid-cell
base:{BASE}plan:
  decode: {{concurrency: [1, 2, 4], categories: [prose], output_tokens: 16, rounds: 1, min_cell_s: 3}}
  warmup_requests: 1
""")
    with tempfile.TemporaryFile("w+") as terminal:
        process = started_until([sys.executable, "-m", "servebook.cli", "sweep", str(study), "--journal", str(journal)],
                                lambda: any(journal.glob("runs/*/cells.parquet")), cwd=REPO, env=ENV,
                                terminal=terminal)
        trees.append({process.pid} | descendants(process.pid))
        os.killpg(process.pid, signal.SIGINT)
        output = ended_with_nothing_left(process, 60, trees[-1], terminal, "the sweep still runs 60 s after Ctrl-C",
                                         "left running after Ctrl-C")
    assert process.returncode == 130, output
    assert "Traceback" not in output and "ZMQError" not in output, output
    [record] = Journal(journal).runs()
    assert record.status == "interrupted", output
    assert f"run {record.run_id} sealed interrupted" in output, output
