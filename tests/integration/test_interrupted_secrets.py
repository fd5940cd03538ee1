"""A run killed mid-measure is never sealed, so nothing scrubs its files afterwards: its engine's log must hold no
byte of the key the engine printed (both GPU flavours print their arguments, the key among them), and neither may
the site built from the journal. servebook is killed with SIGKILL, which no handler sees."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servebook.journal import Journal
from servebook.present import build_site
from servebook.util.progress import Reporter

pytestmark = pytest.mark.simulator
KEY = "sk-servebook-interrupted-0123456789"
RUN = """
import sys
from servebook.config import Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, simulated

candidate = simulated(sys.argv[2]).model_copy(deep=True)
candidate = type(candidate).model_validate({**candidate.model_dump(mode="json"),
                                            "launch": {**candidate.launch.model_dump(mode="json"),
                                                       "api_key_env": "SB_ENDPOINT"}})
plan = Plan.model_validate({"decode": {"concurrency": [1, 2, 3, 4, 5, 6], "categories": ["prose"], "output_tokens": 64,
                                       "rounds": 3}, "warmup_requests": 1, "max_foreign_cpu_cores": 4})
run_candidate(candidate, plan, Journal(sys.argv[1]), reporter=QUIET)
"""


@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp"])
def test_a_run_killed_mid_measure_publishes_no_byte_of_its_key(engine, tmp_path, monkeypatch):
    journal_dir = tmp_path / "journal"
    servebook = subprocess.Popen([sys.executable, "-c", RUN, str(journal_dir), engine],
                                 env={**os.environ, "SB_ENDPOINT": KEY}, cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(journal_dir.glob("runs/*/requests.parquet")):
            assert servebook.poll() is None, "the run ended before it measured"
            time.sleep(0.1)
        assert list(journal_dir.glob("runs/*/requests.parquet")), "the run never measured"
    finally:
        servebook.send_signal(signal.SIGKILL)
        servebook.wait()
    time.sleep(0.5)  # the engine goes with its parent (PR_SET_PDEATHSIG)
    [run] = Journal(journal_dir).runs()
    assert run.status == "incomplete"
    log = (run.dir / "engine.log").read_bytes()
    assert b"server args" in log or engine == "llamacpp"
    assert KEY.encode() not in log
    monkeypatch.setenv("SB_ENDPOINT", KEY)
    site = tmp_path / "site"
    build_site(Journal(journal_dir), site, reporter=Reporter(quiet=True))
    holding = [str(p.relative_to(site)) for p in site.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert holding == []
