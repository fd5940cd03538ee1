"""Ctrl-C in a resident round, and a run whose kernel died, as the sweep records them (issue 56, item 5)."""

from __future__ import annotations

import signal
import threading
import time

import pandas as pd
import pytest

from servebook.config import load_study
from servebook.journal import Failure, Journal
from servebook.sweeps import SweepResult
from servebook.sweeps.resident import run_round
from servebook.util.errors import RunInterrupted
from servebook.util.progress import Reporter
from tests.helpers.journals import sealed_run

STUDY = """
name: stopped
base:
  model: {path: "tiny:target"}
  knobs: {max_running_requests: 4}
variants:
  - {name: one-slot, set: {knobs.max_running_requests: 1}}
plan:
  decode: {concurrency: [4], categories: [prose], output_tokens: 16, rounds: 1}
  prefill: null
"""


class SeatsUntilInterrupted:
    """Seats that measure until the runner is interrupted, then seal their runs `interrupted`, as a kernel does on
    Kernel > Interrupt (a seat never interrupted seals `completed` after 10 s)."""

    def __init__(self) -> None:
        self.seated: list[str] = []
        self.interrupted = threading.Event()
        self._lock = threading.Lock()

    def run(self, study, entry, journal, reporter, lane=None, seat=None):
        with self._lock:
            self.seated.append(entry.name)
        status = "interrupted" if self.interrupted.wait(10) else "completed"
        stopped = Failure(stage="measure", cause="interrupted", message="interrupted") if status != "completed" else None
        writer = sealed_run(journal, entry.candidate.id, status, plan_id=study.plan.id, study=study.name,
                            study_entry=entry.name, failure=stopped)
        return SweepResult(entry.name, entry.candidate.id, writer.run_id, status, 0.0)

    def interrupt(self) -> None:
        self.interrupted.set()

    def close(self) -> None:
        return None


def test_ctrl_c_in_a_round_interrupts_every_seat_and_says_what_became_of_each_run(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    study, journal = load_study(path), Journal(tmp_path / "journal")
    runner = SeatsUntilInterrupted()
    items = [(0, entry, None) for entry in study.expand()]

    def ctrl_c_once_seated() -> None:
        deadline = time.monotonic() + 20
        while len(runner.seated) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        # Ctrl-C reaches the sweep's main thread, never the seats'
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=ctrl_c_once_seated, daemon=True).start()
    with pytest.raises(KeyboardInterrupt) as caught:
        run_round(study, journal, items, lambda _, entry, lane, seat: runner.run(
            study, entry, journal, Reporter(quiet=True), lane, seat), runner)
    assert isinstance(caught.value, RunInterrupted), "the seats were not told to stop"
    records = journal.runs()
    assert sorted(r.status for r in records) == ["interrupted", "interrupted"]
    for record in records:
        assert f"{record.manifest.study_entry}: run {record.run_id} sealed interrupted after 0 cells" in str(caught.value)
    assert list((journal.root / ".sweeps").glob("*.turns.stop")), "the round was not marked stopped"


def test_a_run_whose_kernel_died_is_sealed_failed_from_its_launch_record(tmp_path):
    journal = Journal(tmp_path / "journal")
    run_id = journal.reserve_run("abcdef123456")
    writer = journal.start_run("abcdef123456", run_id)
    writer.write_launch({"candidate_id": "abcdef123456", "study": "s", "study_entry": "one-slot",
                         "argv": ["vllm", "serve"], "base_url": "http://127.0.0.1:9", "cwd": "/somewhere"})
    writer.write_table("requests", pd.DataFrame([{"cell_id": "decode-prose-c4", "ok": True}]))
    writer.write_table("cells", pd.DataFrame([{"cell_id": "decode-prose-c4", "valid": True}]))
    failure = Failure(stage="measure", cause="kernel_died", message="the notebook kernel running the run died")
    record = journal.seal_abandoned(run_id, failure)
    assert record.status == "failed" and record.manifest.failure.cause == "kernel_died"
    assert (record.manifest.study_entry, record.manifest.engine.argv) == ("one-slot", ["vllm", "serve"])
    assert "cwd" not in record.manifest.model_dump()  # what only launches a run stays in launch.json
    assert record.table("requests") is not None and record.table("cells") is None  # a failed run has no figures


def test_a_reserved_run_that_never_started_is_given_back(tmp_path):
    journal = Journal(tmp_path / "journal")
    unused, started = journal.reserve_run("abcdef123456"), journal.reserve_run("abcdef123456")
    journal.start_run("abcdef123456", started).write_launch({"candidate_id": "abcdef123456"})
    assert journal.release_run(unused) and not journal.has_run(unused)
    assert not journal.release_run(started) and journal.has_run(started)
