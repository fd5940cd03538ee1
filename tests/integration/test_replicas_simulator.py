"""Several replicas measured as one endpoint, through the simulator (quick, no engine build): the load reaches
every replica and every replica's counters are scraped and reconcile as a sum. On the code before launch.replicas
served local runs, a replicated candidate was refused, and compose runs sent everything to the first port."""

import json

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, make_candidate
from tests.helpers.processes import servers_on_port

pytestmark = pytest.mark.simulator
PLAN = Plan.model_validate({"decode": {"concurrency": [4], "categories": ["prose"], "output_tokens": 16,
                                       "rounds": 2}, "warmup_requests": 1, "max_foreign_cpu_cores": 4})


def test_load_and_scrapes_reach_every_replica(tmp_path):
    candidate = make_candidate("llamacpp", name="sim-two", knobs={"max_running_requests": 4},
                               launch={"simulator": True, "ready_timeout_s": 10, "replicas": 2})
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    requests = record.table("requests")
    assert sorted(requests["replica"].unique()) == [0, 1]
    per_replica = requests.groupby("replica").size().tolist()
    assert per_replica[0] == per_replica[1] > 0  # round robin over the replicas
    scrapes = record.table("scrapes")
    labels = {json.loads(labels).get("servebook_replica") for labels in scrapes["labels"]}
    assert labels == {"0", "1"}, "every replica's /metrics is scraped"
    cell = record.table("cells").iloc[0]
    assert cell["reconciliation"] == "ok", cell["reconciliation_message"]
    assert cell["replica_reconciliation"] == "ok,ok"
    in_cell = requests[requests["cell_id"] == cell["cell_id"]].groupby("replica").size().tolist()
    assert json.loads(cell["replica_requests"]) == in_cell
    assert cell["replica_balance"] == pytest.approx(1.0)
    assert cell["replicas_serving"] == 2
    replicas = record.manifest.engine.replicas
    ports = [r["port"] for r in replicas["replicas"]]
    assert len(set(ports)) == 2 and replicas["deaths"] == []
    assert all(servers_on_port(port) == [] for port in ports)
    assert (record.dir / "engine-r1.log").is_file()


def test_a_killed_replica_seals_a_degraded_run_the_journal_lists_and_a_verdict_counts_as_failed(tmp_path):
    from servebook.config import VerdictRules
    from servebook.measure.cells import plan_cells
    from servebook.verdicts.judge import judge_runs
    from tests.helpers.processes import alive

    plan = PLAN.model_copy(update={"warmup_requests": 0, "decode": PLAN.decode.model_copy(
        update={"concurrency": [2, 4], "rounds": 8, "output_tokens": 32})})
    candidate = make_candidate("llamacpp", name="sim-killed", knobs={"max_running_requests": 4},
                               launch={"simulator": True, "ready_timeout_s": 10, "replicas": 2,
                                       "kill_replica": {"replica": 0, "after_s": 0.3}})
    journal = Journal(tmp_path)
    record = run_candidate(candidate, plan, journal, reporter=QUIET)
    assert record.status == "degraded" and record.manifest.failure.cause == "replica_lost"
    replicas = record.manifest.engine.replicas
    [death] = replicas["deaths"]
    assert death["index"] == 0 and death["planned"]
    assert not alive({r["pid"] for r in replicas["replicas"]}), "no replica outlives its run"
    cells = record.table("cells")
    assert len(cells) == len(plan_cells(plan)) and cells.iloc[-1]["replicas_serving"] == 1, "every cell is kept"
    assert cells.iloc[-1]["valid"], "the cells after the death measured the replica left, tokenizer included"
    requests = record.table("requests")
    assert set(requests[requests["error"].isna()]["replica"]) >= {1}, "the replica left served on"
    assert list(journal.select(status="degraded")["run_id"]) == [record.run_id], "listed and filterable as such"
    verdict = judge_runs([(record.manifest, cells)], [], VerdictRules(), is_baseline=True)
    assert verdict.outcome == "failed" and verdict.reasons[0].startswith("replica_lost: replica 0")
