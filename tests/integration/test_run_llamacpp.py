"""Runs against the real llama-server on the tiny random-weight model."""

import json

import pytest

from servebook.config.errors import InputError
from servebook.journal import Journal
from servebook.run import run_candidate
from servebook.util.errors import RunInterrupted
from servebook.util.progress import Reporter
from tests.helpers.candidates import SMALL_PLAN, tiny_candidate
from tests.helpers.processes import servers_on_port, wait_healthy
from tests.helpers.registry import count_lookups

pytestmark = pytest.mark.integration


def test_clean_run_reconciles_every_cell(llama_install, tmp_path):
    journal = Journal(tmp_path)
    record = run_candidate(tiny_candidate(), SMALL_PLAN, journal, reporter=Reporter(quiet=True))
    assert record.status == "completed", record.manifest.failure

    cells = record.table("cells")
    assert list(cells["cell_id"]) == ["decode-prose-c1", "decode-prose-c2", "decode-code-c1", "decode-code-c2",
                                      "prefill-256", "prefill-1024"]
    assert cells["valid"].all(), cells[["cell_id", "invalid_reasons"]]
    assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].tolist()
    assert (cells.loc[cells.kind == "decode", "aggregate_tok_s"] > 0).all()

    requests = record.table("requests")
    decode = requests[requests.cell_id.str.startswith("decode")]
    assert len(decode) == 1 + 2 + 1 + 2
    assert (decode["completion_tokens"] == 16).all()
    assert (decode["finish_reason"] == "length").all()
    prefill = requests[requests.cell_id.str.startswith("prefill")]
    assert sorted(prefill["prompt_tokens"]) == [256, 1024]
    assert (prefill["cached_tokens"] == 0).all()

    scrapes = record.table("scrapes")
    assert {"before", "after"} == set(scrapes["phase"])
    assert "llamacpp:tokens_predicted_total" in set(scrapes["name"])
    assert record.table("chunks") is not None and len(record.table("chunks")) > 0

    manifest = record.manifest
    assert manifest.candidate_id == tiny_candidate().id
    assert manifest.plan_id == SMALL_PLAN.id
    assert "0c1e570" in (manifest.environment.engine_version or "")
    assert manifest.environment.model_digest.startswith("sha256:")
    launch = json.loads((record.dir / "launch.json").read_text())
    assert launch["argv"][0].endswith("llama-server") and "--metrics" in launch["argv"]
    assert "listening" in (record.dir / "engine.log").read_text()

    # the server is gone once the run is sealed
    port = int(launch["base_url"].rsplit(":", 1)[1])
    assert servers_on_port(port) == []
    index = journal.index()
    assert index.loc[0, "status"] == "completed" and index.loc[0, "valid_cells"] == 6


def test_drafter_with_synthetic_acceptance_drafts_and_reconciles(llama_install, tmp_path):
    candidate = tiny_candidate(knobs={"max_running_requests": 1, "context_length": 4096,
                                      "drafter": {"kind": "draft_model", "model": "tiny:draft",
                                                  "max_draft_tokens": 4, "synthetic_length": 3}})
    plan = SMALL_PLAN.model_copy(update={"prefill": None})
    record = run_candidate(candidate, plan, Journal(tmp_path), reporter=Reporter(quiet=True))
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    assert cells["valid"].all(), cells["invalid_reasons"].tolist()
    assert (cells["draft_acceptance"] > 0).all()
    assert (cells["draft_tokens"] > 0).all(), "the drafted tokens, summed over the requests' own timings"
    requests = record.table("requests")
    assert (requests["server_draft_tokens"] > 0).all()
    scrapes = record.table("scrapes")
    drafted = scrapes[(scrapes.name == "llamacpp:spec_decode_num_draft_tokens_total") & (scrapes.phase == "after")]
    assert drafted["value"].max() > 0


def test_a_run_interrupted_after_some_cells_keeps_them_readable(llama_install, tmp_path, monkeypatch):
    """Ctrl-C after the first cells: the engine is stopped and the run sealed `interrupted` with its finished cells."""
    import servebook.measure.loop as loop
    from servebook.present import report

    finished = []
    real = loop.Measurement.run_cell

    async def run_cell_then_stop(self, spec, on_done=lambda: None):
        # at the third cell, not at a cell measured again because the host disturbed it (plan.remeasure_disturbed)
        if len(finished) == 2 and spec.cell_id not in finished:
            raise KeyboardInterrupt
        outcome = await real(self, spec, on_done)
        if spec.cell_id not in finished:
            finished.append(spec.cell_id)
        return outcome

    monkeypatch.setattr(loop.Measurement, "run_cell", run_cell_then_stop)
    journal = Journal(tmp_path)
    with pytest.raises(RunInterrupted, match="interrupted after 2 cells"):
        run_candidate(tiny_candidate(), SMALL_PLAN, journal, reporter=Reporter(quiet=True))
    [record] = journal.runs()
    assert record.status == "interrupted" and record.manifest.failure.cause == "interrupted"
    cells = record.table("cells")
    assert list(cells["cell_id"]) == finished and cells["valid"].all()
    assert set(record.table("requests")["cell_id"]) >= set(finished)
    shown = " ".join(str(report(record)).split())
    assert "sealed as interrupted" in shown and report(record).tables()  # the finished cells are shown


def test_a_key_from_the_environment_protects_the_engine_and_never_reaches_the_journal(llama_install, tmp_path,
                                                                                     monkeypatch):
    key = "sk-servebook-test-5f1c2a"
    monkeypatch.setenv("SERVEBOOK_TEST_KEY", key)
    candidate = tiny_candidate(launch={"api_key_env": "SERVEBOOK_TEST_KEY"})
    plan = SMALL_PLAN.model_copy(update={"prefill": None})
    record = run_candidate(candidate, plan, Journal(tmp_path), reporter=Reporter(quiet=True))
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    # llama-server protects /metrics with the key too: reconciled cells prove the scrapes carried it
    assert (cells["reconciliation"] == "ok").all() and cells["valid"].all()
    argv = json.loads((record.dir / "launch.json").read_text())["argv"]
    assert argv[argv.index("--api-key") + 1] == "***"
    leaked = [p for p in record.dir.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert leaked == []


def test_attach_to_a_server_that_needs_a_key(llama_install, tmp_path, monkeypatch):
    import subprocess

    import httpx

    from servebook.launch.process import free_port
    from servebook.models.tiny_models import tiny_model_path

    key = "sk-attach-test-77"
    monkeypatch.setenv("ATTACH_KEY", key)
    port = free_port()
    server = subprocess.Popen([str(llama_install.server), "-m", str(tiny_model_path("target")), "--port", str(port),
                               "--host", "127.0.0.1", "-np", "2", "-c", "8192", "--metrics", "--api-key", key],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    attach = {"mode": "attach", "url": f"http://127.0.0.1:{port}", "api_key_env": "ATTACH_KEY"}
    journal = Journal(tmp_path)
    try:
        assert wait_healthy(port, 60)
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 401  # the key is needed
        # Claims the server contradicts are refused before anything is recorded.
        for knobs, model, words in [({"max_running_requests": 8}, "tiny:target",
                                     "max_running_requests: the candidate says 8, the server reports 2"),
                                    ({}, "tiny:draft", "model: the candidate says"),
                                    ({"context_length": 32768}, "tiny:target", "context_length")]:
            liar = tiny_candidate(knobs=knobs, model={"path": model}, launch=attach)
            with pytest.raises(InputError, match=words):
                run_candidate(liar, SMALL_PLAN.model_copy(update={"prefill": None}), journal,
                              reporter=Reporter(quiet=True))
        assert journal.run_ids() == []
        candidate = tiny_candidate(knobs={"max_running_requests": 2, "context_length": 8192, "chunk_size": 256},
                                   launch=attach)
        plan = SMALL_PLAN.model_copy(update={"prefill": None})
        record = run_candidate(candidate, plan, journal, reporter=Reporter(quiet=True))
    finally:
        server.kill()
        server.wait(10)
    assert record.status == "completed", record.manifest.failure
    assert (record.table("cells")["reconciliation"] == "ok").all()
    claims = record.manifest.engine.verification.claims
    assert claims["knobs.max_running_requests"].value == 2 and claims["model"].status == "verified"
    assert claims["knobs.chunk_size"].status == "not_verified"  # llama.cpp does not report its batch size


def test_a_launched_run_looks_its_engine_up_once(llama_install, tmp_path, monkeypatch):
    """Preflight, the GPU checks and the claims check are handed the run's adapter (each looked it up again)."""
    candidate = tiny_candidate()  # it claims a context, which the engine's own arithmetic checks
    registry = count_lookups(monkeypatch)
    plan = SMALL_PLAN.model_copy(update={"prefill": None})
    record = run_candidate(candidate, plan, Journal(tmp_path), reporter=Reporter(quiet=True))
    assert record.status == "completed", record.manifest.failure
    assert record.manifest.engine.verification.claims["knobs.context_length"].status == "verified"
    assert registry.looked_up == ["llamacpp"]
