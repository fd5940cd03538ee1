"""Several replicas measured as one endpoint, through the simulator (quick, no engine build): the load reaches
every replica and every replica's counters are scraped and reconcile as a sum. On the code before launch.replicas
served local runs, a replicated candidate was refused, and compose runs sent everything to the first port."""

import json

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.measure.validity import only_disturbed
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


def _consecutive_free_ports(n: int) -> int:
    """The first of `n` consecutive ports free now (replicas take consecutive ports from launch.port)."""
    import socket

    from servebook.launch.process import free_port

    for _ in range(50):
        first = free_port()
        sockets = [socket.socket() for _ in range(1, n)]
        try:
            for k, sock in enumerate(sockets, start=1):
                sock.bind(("127.0.0.1", first + k))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise AssertionError("no consecutive free ports")


#: a cell long enough that a freeze a few requests in ends inside it: 4 streams of 40 requests each
STALL_PLAN = Plan.model_validate({"decode": {"concurrency": [4], "categories": ["prose"], "output_tokens": 32,
                                             "rounds": 40, "realism_probes": 0}, "prefill": None,
                                  "warmup_requests": 0, "max_foreign_cpu_cores": 4, "remeasure_disturbed": 0})


def _stalled_cell(tmp_path, *, router: bool, freeze_router: bool):
    """The stall plan's cell, measured while the router (or replica 0) is stopped for 7 s once replica 0 has
    finished 10 requests of the cell."""
    import os

    from tests.helpers.processes import Freezer, metric, router_below

    port = _consecutive_free_ports(2)
    launch = {"simulator": True, "ready_timeout_s": 10, "replicas": 2, "port": port}
    if router:
        launch["router"] = {"kind": "sglang-router", "policy": "round_robin"}
    candidate = make_candidate("llamacpp", name="sim-frozen", knobs={"max_running_requests": 4}, launch=launch)
    replica0 = f"http://127.0.0.1:{port}"
    find = (lambda: router_below(os.getpid())) if freeze_router else \
        (lambda: next(iter(servers_on_port(port)), None))
    ready = lambda: metric(replica0, "llamacpp:tokens_predicted_total") >= 10 * 32 \
        and metric(replica0, "llamacpp:requests_processing") >= 1
    with Freezer(find, ready, seconds=7.0) as freezer:
        record = run_candidate(candidate, STALL_PLAN, Journal(tmp_path), reporter=QUIET)
    assert freezer.error is None and freezer.stopped_pgid is not None, "the freeze happened mid-cell"
    assert record.status == "completed", record.manifest.failure
    [cell] = record.table("cells").to_dict("records")
    return cell


def test_a_router_stopped_mid_cell_makes_the_cell_invalid_as_stalled(tmp_path):
    """Issue 56: a router stopped (SIGSTOP) mid-cell and let go on was waited out, and the cell, its throughput a
    fraction of the same shape's, was sealed valid. Every stream fell silent at once: the cell stalled."""
    cell = _stalled_cell(tmp_path, router=True, freeze_router=True)
    assert not cell["valid"] and "stalled" in cell["invalid_codes"].split(","), cell["invalid_reasons"]
    assert "no stream received anything for" in cell["invalid_reasons"]
    assert not only_disturbed(cell["invalid_codes"].split(",")), "the deployment's fault, not the host's"


def test_a_replica_stopped_mid_cell_is_named_as_the_one_that_stalled(tmp_path):
    """Without a router servebook spreads the requests itself and records each one's replica: the stopped
    replica's streams fell silent while the other's went on, and the reason names it."""
    cell = _stalled_cell(tmp_path, router=False, freeze_router=False)
    assert not cell["valid"] and "stalled" in cell["invalid_codes"].split(","), cell["invalid_reasons"]
    assert "no stream of replica 0 received anything for" in cell["invalid_reasons"]
