"""`sweep --resident` over the simulator: each round's engines start at once and measure in turn, cell by cell; the
round is what the verdict blocks on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from servebook.journal import Journal
from servebook.verdicts.evidence import run_cells
from tests.helpers.processes import command_line, descendants, ended_with_nothing_left, started_until

pytestmark = pytest.mark.simulator

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "SERVEBOOK_PLAIN_PROGRESS": "1", "COLUMNS": "200"}

STUDY = """
name: resident-e2e
base:
  engine: vllm
  model: {path: "random:1b"}
  knobs: {max_running_requests: 8, context_length: 4096}
  launch: {simulator: true, ready_timeout_s: 60}
variants:
  - name: seqs-2
    set: {knobs.max_running_requests: 2}
repeats: 2
plan:
  decode: {concurrency: [1, 4], categories: [prose], output_tokens: 16, rounds: 1, min_cell_s: 0.3}
  prefill: {prompt_tokens: [512], requests: 1}
  warmup_requests: 1
verdict:
  rules:
    - {metric: aggregate_tok_s, concurrency: [4], max_regression_pct: 5}
"""


def test_a_resident_sweep_measures_each_rounds_runs_in_turn(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    journal_dir = tmp_path / "journal"
    result = subprocess.run([sys.executable, "-m", "servebook.cli", "sweep", str(study), "--journal", str(journal_dir),
                             "--resident"], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "seat 2 of 2" in result.stderr

    records = sorted(Journal(str(journal_dir)).runs(), key=lambda r: r.run_id)
    assert [r.status for r in records] == ["completed"] * 4
    rounds: dict[str, list] = {}
    for record in records:
        assert record.manifest is not None and record.manifest.resident is not None
        rounds.setdefault(record.manifest.resident.round_id, []).append(record)
    assert len(rounds) == 2
    for members in rounds.values():
        assert sorted(r.manifest.study_entry for r in members) == ["baseline", "seqs-2"]
        assert sorted(r.manifest.resident.seat for r in members) == [0, 1]
        # one engine measures at a time: the cells of a round's runs never overlap, and they alternate
        spans = sorted((cells.t_send.min(), cells.t_last.max(), record.manifest.study_entry, cell_id)
                       for record in members
                       for cell_id, cells in record.table("requests").groupby("cell_id"))
        assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans
        by_cell = [entry for _, _, entry, _ in spans]
        assert all(a != b for a, b in zip(by_cell[::2], by_cell[1::2], strict=False)), by_cell  # each cell: both seats in turn

    # the verdict's block is the resident round, shared by the candidates measured in it
    blocks = {tuple(cells.attrs["block"])[1] for cells in run_cells(records) if cells is not None}
    assert blocks == set(rounds)


def test_seats_held_to_the_measured_engines_cpu_are_a_disturbance_of_its_cells(tmp_path):
    """Two simulated SGLang engines whose schedulers poll (fault idle_poll), every engine held to CPU 0: the other
    seat's poller takes that CPU from whichever engine measures. Every cell says so (seats_contend, with the cores
    it took), and no verdict is drawn from such cells."""
    study = tmp_path / "study.yaml"
    study.write_text("""
name: resident-contended
base:
  engine: sglang
  model: {path: "random:1b"}
  knobs: {max_running_requests: 8, context_length: 4096}
  launch: {simulator: true, ready_timeout_s: 60, cpus: [0], sim_faults: [idle_poll]}
variants:
  - name: running-2
    set: {knobs.max_running_requests: 2}
repeats: 1
plan:
  decode: {concurrency: [2], categories: [prose], output_tokens: 16, rounds: 1, min_cell_s: 0.5}
  warmup_requests: 1
  max_foreign_cpu_cores: 0.2
verdict:
  rules:
    - {metric: aggregate_tok_s, concurrency: [2], max_regression_pct: 5}
""")
    journal_dir = tmp_path / "journal"
    result = subprocess.run([sys.executable, "-m", "servebook.cli", "sweep", str(study), "--journal", str(journal_dir),
                             "--resident", "--format", "plain"], capture_output=True, text=True, env=ENV, cwd=REPO,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    records = Journal(str(journal_dir)).runs()
    assert [r.status for r in records] == ["completed"] * 2
    for record in records:
        cells = record.table("cells")
        assert (cells["contending_cpu_cores"] > 0.2).all(), cells[["cell_id", "contending_cpu_cores"]]
        assert all("seats_contend" in codes.split(",") for codes in cells["invalid_codes"])
    verdict_line = next(line for line in result.stdout.splitlines() if line.startswith("running-2"))
    assert "rejected" not in verdict_line and "accepted" not in verdict_line, verdict_line


# Four decode cells of at least 2 s each per seat, measured in turn: a round takes some 20 s once its engines serve.
SLOW_ROUND = """
name: resident-stopped
base:
  engine: vllm
  model: {path: "random:1b"}
  knobs: {max_running_requests: 8, context_length: 4096}
  launch: {simulator: true, ready_timeout_s: 60}
variants:
  - name: seqs-2
    set: {knobs.max_running_requests: 2}
repeats: REPEATS
plan:
  decode: {concurrency: [1, 2, 4, 8], categories: [prose], output_tokens: 16, rounds: 1, min_cell_s: CELL_S}
  prefill: null
  warmup_requests: 1
verdict:
  rules:
    - {metric: aggregate_tok_s, concurrency: [4], max_regression_pct: 5}
"""
PLANNED_CELLS = 4


def _sweep_until_a_cell(tmp_path: Path, study: str, terminal, trees: list[set[int]]) -> tuple[subprocess.Popen, Path]:
    """A resident sweep started as from a terminal, once one of its seats measured a cell."""
    (tmp_path / "study.yaml").write_text(study)
    journal = tmp_path / "journal"
    process = started_until([sys.executable, "-m", "servebook.cli", "sweep", str(tmp_path / "study.yaml"), "--journal",
                             str(journal), "--resident"], lambda: any(journal.glob("runs/*/cells.parquet")),
                            cwd=REPO, env=ENV, terminal=terminal)
    trees.append({process.pid})
    assert list(journal.glob("runs/*/cells.parquet")), "no seat measured a cell"
    trees[-1] |= descendants(process.pid)  # the seats' kernels, their engines and senders
    return process, journal


@pytest.mark.timeout(300)
def test_ctrl_c_in_a_round_stops_every_seat_and_seals_its_run_interrupted(tmp_path, trees):
    """Ctrl-C reaches the sweep only (each seat's kernel is a session of its own): the sweep interrupts every seat,
    so each stops its engine and seals its run `interrupted` where it stood, instead of measuring its plan out and
    sealing it `completed` (issue 56, item 5)."""
    with tempfile.TemporaryFile("w+") as terminal:
        process, journal = _sweep_until_a_cell(tmp_path, SLOW_ROUND.replace("REPEATS", "1").replace("CELL_S", "2"),
                                               terminal, trees)
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the foreground group
        output = ended_with_nothing_left(process, 60, trees[-1], terminal, "the sweep still runs 60 s after Ctrl-C",
                                         "an engine, kernel or sender outlived the sweep")
    assert process.returncode == 130, output
    assert "Traceback" not in output, output
    records = Journal(str(journal)).runs()
    assert sorted(r.manifest.study_entry for r in records) == ["baseline", "seqs-2"]
    for record in records:
        assert record.status == "interrupted", output
        assert record.manifest.failure.cause == "interrupted"
        cells = record.table("cells")
        assert (0 if cells is None else len(cells)) < PLANNED_CELLS, f"{record.run_id} measured its plan out"
        # the sweep says what became of each run of the round
        assert f"run {record.run_id} sealed interrupted" in output, output


@pytest.mark.timeout(600)
def test_a_seat_whose_kernel_dies_is_that_runs_failure_and_the_rounds_go_on(tmp_path, trees):
    """A seat's kernel killed mid-round: its run is sealed `failed` (kernel_died), the other seat's run and the next
    round complete, and the sweep ends as a sweep with a failed run does, without a traceback."""
    with tempfile.TemporaryFile("w+") as terminal:
        process, journal = _sweep_until_a_cell(tmp_path, SLOW_ROUND.replace("REPEATS", "2").replace("CELL_S", "0.5"),
                                               terminal, trees)
        kernels = [pid for pid in descendants(process.pid) if "ipykernel" in command_line(pid)]
        assert len(kernels) == 2, kernels
        os.kill(kernels[0], signal.SIGKILL)
        output = ended_with_nothing_left(process, 400, trees[-1], terminal, "the sweep did not end",
                                         "an engine, kernel or sender outlived the sweep")
    assert process.returncode == 0, output
    assert "Traceback" not in output and "DeadKernelError" not in output, output
    records = Journal(str(journal)).runs()
    statuses = sorted(r.status for r in records)
    assert statuses == ["completed", "completed", "completed", "failed"], output
    [failed] = [r for r in records if r.status == "failed"]
    assert failed.manifest.failure.cause == "kernel_died" and "signal 9" in failed.manifest.failure.message
    assert failed.manifest.candidate_id is not None and failed.manifest.resident is not None
