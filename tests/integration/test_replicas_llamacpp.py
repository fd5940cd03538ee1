"""Two tiny llama-server replicas behind a real router (sglang-router), and one killed mid-plan."""

import importlib.util
import json

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.measure.cells import plan_cells
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, TOLERANT_CORES, tiny_candidate
from tests.helpers.processes import servers_on_port

pytestmark = pytest.mark.integration
PLAN = Plan.model_validate({"decode": {"concurrency": [4], "categories": ["prose"], "output_tokens": 16,
                                       "rounds": 2}, "warmup_requests": 2, "max_foreign_cpu_cores": TOLERANT_CORES})


def _gone(record) -> None:
    replicas = record.manifest.engine.replicas
    ports = [r["port"] for r in replicas["replicas"]]
    assert all(servers_on_port(port) == [] for port in ports), "no replica outlives its run"
    if replicas["router"]:
        assert servers_on_port(int(replicas["router"]["url"].rsplit(":", 1)[1])) == []


def test_two_replicas_through_the_router_reconcile_per_replica_and_in_sum(llama_install, tmp_path):
    # not skipped when missing: `make setup` installs the router extra, so a missing router is a broken setup
    assert importlib.util.find_spec("sglang_router"), "sglang-router is not installed (pip install -e '.[router]')"
    candidate = tiny_candidate(launch={"replicas": 2, "router": {"kind": "sglang-router", "policy": "round_robin"}})
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cell = record.table("cells").iloc[0]
    assert cell["valid"], cell["invalid_reasons"]
    assert cell["reconciliation"] == "ok", cell["reconciliation_message"]  # the replicas' sum against the client
    generated = json.loads(cell["replica_generation_tokens"])
    assert all(g > 0 for g in generated), "the router sent work to both replicas"
    assert sum(generated) == cell["completion_tokens"]
    assert cell["replica_balance"] == pytest.approx(1.0, abs=0.3)
    assert record.table("requests")["replica"].isna().all(), "through a router servebook does not choose"
    assert (record.dir / "router.log").is_file()
    _gone(record)


def test_replicas_that_ask_for_an_api_key_are_measured_through_the_router_and_the_key_is_kept_nowhere(
        llama_install, tmp_path, monkeypatch):
    """Each replica gets the key (llama-server --api-key refuses requests without it); sglang-router passes the
    client's Authorization header on to the worker it picks, so the router itself needs no key of its own."""
    monkeypatch.setenv("SB_TEST_KEY", "sekret-4711")
    candidate = tiny_candidate(launch={"replicas": 2, "api_key_env": "SB_TEST_KEY",
                                       "router": {"kind": "sglang-router", "policy": "round_robin"}})
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cell = record.table("cells").iloc[0]
    assert cell["valid"] and cell["errors"] == 0, cell["invalid_reasons"]
    assert all(g > 0 for g in json.loads(cell["replica_generation_tokens"])), "both replicas answered the keyed requests"
    replicas = json.loads((record.dir / "launch.json").read_text())["replicas"]
    assert len(replicas) == 2 and all(r["argv"][r["argv"].index("--api-key") + 1] == "***" for r in replicas)
    assert not any("sekret-4711" in f.read_text(errors="replace") for f in record.dir.iterdir()
                   if f.suffix in (".json", ".log")), "the key is redacted from every file the run keeps"
    _gone(record)


def test_a_killed_replica_ends_as_a_degraded_run_naming_it(llama_install, tmp_path):
    # No warm-up, so the kill's clock (from readiness) falls inside the cells, not in unrecorded requests
    plan = PLAN.model_copy(update={"warmup_requests": 0,
                                   "decode": PLAN.decode.model_copy(update={"concurrency": [2, 4], "rounds": 6})})
    candidate = tiny_candidate(launch={"replicas": 2, "kill_replica": {"replica": 1, "after_s": 2.5}})
    record = run_candidate(candidate, plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "degraded", record.manifest.failure
    failure = record.manifest.failure
    assert failure.cause == "replica_lost" and "replica 1" in failure.message and "fault plan" in failure.message
    deaths = record.manifest.engine.replicas["deaths"]
    assert [d["index"] for d in deaths] == [1] and deaths[0]["planned"] and deaths[0]["after_ready_s"] >= 2.5
    cells = record.table("cells")
    assert len(cells) == len(plan_cells(plan)), "every cell is kept"
    assert cells.iloc[-1]["replicas_serving"] == 1, "the cells after the death measured the replica left"
    assert cells.iloc[-1]["valid"], cells.iloc[-1]["invalid_reasons"]
    print(failure.message)
    _gone(record)
