"""Bad inputs and dying engines end as one clear message or a failed run, never as numbers."""

import json
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from servebook.config import DecodePlan, InputError, Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from servebook.util.progress import Reporter
from tests.helpers.candidates import SMALL_PLAN, tiny_candidate
from tests.helpers.processes import requests_processing, servers_on_port, wait_healthy

pytestmark = pytest.mark.integration
QUIET = Reporter(quiet=True)


@pytest.mark.parametrize("extra_args,expected", [
    (["--definitely-not-a-flag"], "invalid argument: --definitely-not-a-flag"),
    (["--draft-max", "4"], "has been removed"),
])
def test_flag_the_engine_rejects_is_a_failed_run(llama_install, tmp_path, extra_args, expected):
    journal = Journal(tmp_path)
    record = run_candidate(tiny_candidate(extra_args=extra_args), SMALL_PLAN, journal, reporter=QUIET)
    assert record.status == "failed"
    failure = record.manifest.failure
    assert failure.cause == "bad_flag" and failure.stage == "launch"
    assert expected in failure.message
    assert expected in failure.log_tail
    assert record.manifest.summary is None
    assert record.table("cells") is None  # a failed run yields no numbers
    assert [r.status for r in journal.runs()] == ["failed"]


def test_missing_model_is_one_clear_error_and_no_run(llama_install, tmp_path):
    journal = Journal(tmp_path)
    with pytest.raises(InputError, match=r"model.path: model file not found: /no/such/model.gguf"):
        run_candidate(tiny_candidate(model={"path": "/no/such/model.gguf"}), SMALL_PLAN, journal, reporter=QUIET)
    assert journal.runs() == []


def test_port_in_use_is_one_clear_error(llama_install, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InputError, match=rf"launch.port: 127.0.0.1:{port} is already in use"):
            run_candidate(tiny_candidate(launch={"port": port}), SMALL_PLAN, Journal(tmp_path), reporter=QUIET)


def test_not_ready_in_time_is_a_timeout_and_the_server_is_stopped(llama_install, tmp_path):
    candidate = tiny_candidate(launch={"ready_timeout_s": 0.05})
    record = run_candidate(candidate, SMALL_PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "failed"
    assert record.manifest.failure.cause == "timeout"
    port = int(json.loads((record.dir / "launch.json").read_text())["base_url"].rsplit(":", 1)[1])
    assert servers_on_port(port) == []


def test_engine_killed_in_the_middle_of_a_cell(llama_install, tmp_path):
    journal = Journal(tmp_path)
    long_plan = Plan(decode=DecodePlan(concurrency=[2], categories=["prose"], output_tokens=4000, rounds=2),
                     prefill=None, warmup_requests=0)
    candidate = tiny_candidate(knobs={"max_running_requests": 2, "context_length": 16384})
    killed = {}

    def killer():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            launches = list(Path(tmp_path, "runs").glob("*/launch.json"))
            if launches:
                base_url = json.loads(launches[0].read_text())["base_url"]
                if requests_processing(base_url) >= 1:
                    port = int(base_url.rsplit(":", 1)[1])
                    for pid in servers_on_port(port):
                        import os

                        os.kill(pid, signal.SIGKILL)
                        killed["pid"] = pid
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    record = run_candidate(candidate, long_plan, journal, reporter=QUIET)
    thread.join(5)
    assert killed, "the killer never saw a request in flight"
    assert record.status == "failed"
    failure = record.manifest.failure
    assert failure.stage == "measure"
    assert failure.cause == "crash" and "signal 9" in failure.message
    requests = record.table("requests")  # the raw rows of the interrupted cell are kept
    assert len(requests) >= 2 and requests["error"].notna().any()
    assert record.table("cells") is None
    assert [r.status for r in journal.runs()] == ["failed"]


def test_a_run_next_to_a_busy_engine_has_disturbed_cells_left_out_of_the_verdict(llama_install, tmp_path):
    import threading

    from servebook.config import VerdictRules
    from servebook.launch.process import free_port
    from servebook.measure.validity import only_disturbed
    from servebook.models.tiny_models import tiny_model_path
    from servebook.verdicts import judge_run
    from tests.helpers.candidates import SMALL_PLAN as plan

    # A second real server kept busy, as another user's engine would be.
    port = free_port()
    other = subprocess.Popen([str(llama_install.server), "-m", str(tiny_model_path("draft")), "--port",
                              str(port), "--host", "127.0.0.1", "-np", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()

    def keep_busy():
        for _ in range(500):  # bounded: stops by itself even if the test dies
            if stop.is_set():
                return
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/completion", timeout=30,
                                    json={"prompt": "busy", "n_predict": 256, "ignore_eos": True})
                if answer.status_code != 200:  # still loading
                    time.sleep(0.2)
            except httpx.HTTPError:
                time.sleep(0.2)

    loaders = [threading.Thread(target=keep_busy, daemon=True) for _ in range(2)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not servers_on_port(port):
            time.sleep(0.05)
        wait_healthy(port, max(1.0, deadline - time.monotonic()))
        for loader in loaders:
            loader.start()
        # Two engines share two cores, so the other one gets well under a core; a low limit makes the test
        # about detection, not about how much CPU the other engine happens to win.
        small = plan.model_copy(update={"prefill": None, "max_foreign_cpu_cores": 0.1})
        record = run_candidate(tiny_candidate(), small, Journal(tmp_path), reporter=QUIET)
    finally:
        stop.set()
        other.kill()  # a busy llama-server drains its requests on SIGTERM; this one need not
        other.wait(10)
        for loader in loaders:
            loader.join(35)
    findings = record.manifest.environment.preflight
    assert [f.code for f in findings] == ["W_HOST_BUSY"]
    assert str(other.pid) in findings[0].message
    cells = record.table("cells")
    assert (cells["foreign_cpu_cores"] > 0.1).any(), cells["foreign_cpu_cores"].tolist()
    assert cells["invalid_reasons"].str.contains("host busy: other processes used").any()
    # disturbed cells are lost evidence, not the candidate's fault: they leave the statistics, named. The busy
    # neighbour may also stall the client (client_stall, another disturbance): whatever disturbed a cell, it is
    # left out, and a verdict on no cell at all is inconclusive (a CI run had every cell disturbed, one of them by
    # a stall alone)
    verdict = judge_run(record.manifest, cells, None, VerdictRules(), is_baseline=True)
    disturbed = cells[~cells["valid"] & cells["invalid_codes"].map(lambda codes: only_disturbed(codes.split(",")))]
    assert (~cells["valid"]).sum() == len(disturbed), cells["invalid_codes"].tolist()
    left_out = verdict.left_out_cells  # one count in the reasons, each cell typed (verdicts.left_out)
    assert len(left_out) == len(disturbed) > 0 and any("host_busy" in cell.codes for cell in left_out)
    assert sorted(cell.cell_id for cell in left_out) == sorted(disturbed["cell_id"])
    assert verdict.outcome == ("inconclusive" if len(disturbed) == len(cells) else "accepted")
    telemetry = record.table("telemetry")
    assert set(telemetry["phase"]) == {"before", "after"} and telemetry["host_busy_cpu_s"].notna().all()


def test_every_cell_records_others_cpu_and_is_marked_exactly_when_over_the_limit(llama_install, tmp_path):
    from servebook.measure.observers.host import DEFAULT_MAX_FOREIGN_CORES, MIN_FOREIGN_CORES
    from tests.helpers.candidates import SMALL_PLAN as plan

    default = plan.model_copy(update={"prefill": None, "max_foreign_cpu_cores": None})
    record = run_candidate(tiny_candidate(), default, Journal(tmp_path), reporter=QUIET)
    cells = record.table("cells")
    assert cells["foreign_cpu_cores"].notna().all() and (cells["foreign_cpu_cores"] >= 0).all()
    busy = cells["invalid_reasons"].str.contains("host busy")
    # the limit each cell was held to is relative to the cores the run left idle (measure.observers.host.ForeignLimit)
    limits = cells["foreign_cpu_limit"]
    assert limits.between(MIN_FOREIGN_CORES, DEFAULT_MAX_FOREIGN_CORES).all() and cells["own_cpu_cores"].gt(0).all()
    assert (busy == (cells["foreign_cpu_cores"] > limits)).all()
