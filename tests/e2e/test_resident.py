"""`sweep --resident` over the simulator: each round's engines start at once and measure in turn, cell by cell; the
round is what the verdict blocks on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from servebook.journal import Journal
from servebook.verdicts.evidence import run_cells

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
