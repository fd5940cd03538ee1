"""`servebook run --url`: a server someone else started, measured in one command with no YAML (the quick plan),
sealed as a verified run and summed up in one screen. llama.cpp for real; vLLM and SGLang through their
simulators' API shapes."""

import subprocess
import sys
from contextlib import contextmanager

import pytest

from servebook.journal import Journal
from servebook.launch.process import free_port
from tests.helpers.cli import servebook
from tests.helpers.processes import wait_healthy

SUMMARY_LINES = 40  # one screen


@contextmanager
def started(argv: list[str], port: int, timeout_s: float = 60):
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_healthy(port, timeout_s), f"{argv[0]} did not come up on {port}"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait(10)


def summary_of(result) -> str:
    """The summary: what is printed after the progress lines, up to where the run was recorded."""
    out = result.stdout
    return out[out.index("run 20"):]


def check_summary(summary: str, journal, engine: str) -> None:
    assert len(summary.splitlines()) <= SUMMARY_LINES, summary
    for words in ("TTFT p50", "TPOT p99", "ITL p99", "E2E p50", "engine counters against the client's",
                  "claims against the server's own report: verified model", "every table: servebook journal show",
                  # the quick plan's cells hold a few requests: their tails are marked, not passed off as p99s
                  "* from fewer samples than the percentile needs at 99% confidence"):
        assert words in summary, words
    [record] = Journal(journal).runs()
    assert record.status == "completed" and record.identity.candidate["launch"]["mode"] == "attach"
    assert record.identity.candidate["engine"] == engine
    assert record.identity.plan["name"] == "quick"
    assert record.manifest.summary.valid_cells == record.manifest.summary.cells == 8


@pytest.mark.parametrize("flavor, argv", [
    ("vllm", ["vllm", "serve", "/models/llama-8b", "--served-model-name", "llama8b", "--max-num-seqs", "16"]),
    # started without --enable-cache-report, as a team's own SGLang may be: cached tokens are then unknown, not 0
    ("sglang", ["sglang", "serve", "--model-path", "org/qwen", "--enable-metrics", "--max-running-requests", "8"]),
])
def test_a_simulated_gpu_engine_is_detected_measured_and_verified(tmp_path, flavor, argv):
    port = free_port()
    simulator = [sys.executable, "-m", "servebook.simulator", "--flavor", flavor, "--", *argv,
                 "--port", str(port)]
    journal = tmp_path / "journal"
    with started(simulator, port, 30) as url:
        result = servebook("run", "--url", url, "--journal", journal)
    assert f"{flavor} (/v1/models says owned_by {flavor})" in result.stderr
    summary = summary_of(result)
    check_summary(summary, journal, flavor)
    assert "INVALID" not in summary


def test_a_llama_server_started_by_hand(llama_install, tmp_path):
    from servebook.models.tiny_models import tiny_model_path

    port = free_port()
    argv = [str(llama_install.server), "-m", str(tiny_model_path("target")), "--port", str(port), "--host",
            "127.0.0.1", "-np", "4", "-c", "16384", "--metrics"]
    journal = tmp_path / "journal"
    with started(argv, port) as url:
        first = servebook("run", "--url", url, "--journal", journal)
        # the same server measured again: its prefix cache holds the first run's prompts, and cold prefill must
        # still be cold (every run opens its prompts at its own place)
        second = servebook("run", "--url", url, "--journal", journal)
    runs = Journal(journal).runs()
    assert len(runs) == 2 and all(r.status == "completed" for r in runs)
    assert runs[0].identity.candidate_id == runs[1].identity.candidate_id, "the same server is the same candidate"
    for result in (first, second):
        summary = summary_of(result)
        assert "INVALID" not in summary and "engine counters against the client's: 8 ok" in summary, summary
        assert len(summary.splitlines()) <= SUMMARY_LINES
    claims = runs[0].manifest.engine.verification.claims
    assert claims["knobs.max_running_requests"].status == "verified" and claims["model"].status == "verified"


def test_nothing_listening_or_both_inputs_is_one_line_and_exit_2(tmp_path):
    port = free_port()
    result = servebook("run", "--url", f"http://127.0.0.1:{port}", "--journal", tmp_path / "j", check=False)
    assert result.returncode == 2 and f"nothing answers at 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    both = servebook("run", "data/candidates/tiny-llamacpp.yaml", "--url", "http://127.0.0.1:1", "--journal",
                     tmp_path / "j", check=False)
    assert both.returncode == 2 and "not both or neither" in both.stderr
    assert not (tmp_path / "j" / "runs").exists() or not any((tmp_path / "j" / "runs").iterdir())
