"""Open-loop cells against the simulator over loopback: requests leave on their schedule whatever the engine's pace,
the window's figures and the objectives' attainment are recorded, and a client that cannot keep its schedule
(slowed on purpose here) leaves the cell disturbed with the lag stated, never a figure of the engine."""

import time

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.measure.openloop import schedule
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, TOLERANT_CORES, simulated

pytestmark = pytest.mark.simulator


def load_plan(rates: list[float], duration_s: float = 3.0) -> Plan:
    return Plan.model_validate({
        "decode": None, "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": TOLERANT_CORES,
        "load": {"rates_rps": rates, "warmup_s": 0.5, "duration_s": duration_s, "prompt_tokens": 64,
                 "output_tokens": {"distribution": "uniform", "low": 8, "high": 24}},
        "slo": {"ttft_s": 0.5, "tpot_s": 0.05}})


def test_open_loop_cells_keep_their_schedule_and_report_attainment_and_goodput(tmp_path):
    plan = load_plan([2, 8])
    record = run_candidate(simulated("vllm"), plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells").set_index("cell_id")
    assert list(cells.index) == ["load-2rps", "load-8rps"]
    assert cells["valid"].all(), cells["invalid_reasons"].tolist()
    for cell_id, rate in (("load-2rps", 2), ("load-8rps", 8)):
        row = cells.loc[cell_id]
        scheduled = sum(a.measured for a in schedule(plan.load, rate)) / plan.load.duration_s
        assert row["offered_rps"] == rate and row["achieved_rps"] == pytest.approx(scheduled)  # every one completed
        # well inside the 50 ms that invalidates a cell; 10 ms was crossed (10.6) on a quiet 2-core host
        assert row["send_lag_p99_ms"] < 25 and 0 <= row["slo_attainment"] <= 1
        assert row["slo_attainment_low"] <= row["slo_attainment"] <= row["slo_attainment_high"]
        assert row["goodput_rps"] <= row["achieved_rps"] + 1e-9
    requests = record.table("requests")
    load = requests[requests["cell_id"] == "load-8rps"]
    assert load["t_due"].notna().all() and (~load["measured"]).any() and load["measured"].any()
    # each request was forced to its own drawn length, and got it
    assert (load["completion_tokens"] == load["expected_completion_tokens"]).all()
    assert load["expected_completion_tokens"].nunique() > 3
    # the peers' percentiles as sealed are those computed again from the raw requests and chunks (measure.figures.latency)
    from servebook.measure.figures.latency import LATENCY_COLUMNS
    from servebook.measure.figures.latency_tables import with_latency

    recomputed = with_latency(cells.reset_index().drop(columns=LATENCY_COLUMNS), requests, record.table("chunks"))
    for column in LATENCY_COLUMNS:
        assert recomputed[column].tolist() == pytest.approx(cells[column].tolist(), rel=1e-9, nan_ok=True), column
    assert cells["request_rps"].tolist() == pytest.approx(cells["achieved_rps"].tolist())
    assert (cells["ttft_p50_ms"] <= cells["ttft_p99_ms"]).all() and cells["itl_p50_ms"].notna().all()


def test_a_slowed_client_falls_behind_and_its_cell_is_disturbed_with_the_lag(tmp_path, monkeypatch):
    import servebook.measure.transport.senders as senders  # where open-loop requests are sent from

    original = senders.stream_request

    async def slowed(client, record, request):
        time.sleep(0.03)  # blocks the event loop, as an overloaded client process would: every later send waits
        return await original(client, record, request)

    monkeypatch.setattr(senders, "stream_request", slowed)
    record = run_candidate(simulated("vllm"), load_plan([50], duration_s=1.0), Journal(tmp_path), reporter=QUIET)
    [cell] = record.table("cells").to_dict("records")
    assert not cell["valid"] and "client_lag" in cell["invalid_codes"].split(",")
    assert "after they were due" in cell["invalid_reasons"] and cell["send_lag_p99_ms"] > 10


def test_a_capacity_search_records_its_probes_and_its_capacity_as_a_cell(tmp_path):
    plan = Plan.model_validate({
        "decode": None, "prefill": None, "warmup_requests": 1, "max_foreign_cpu_cores": TOLERANT_CORES,
        "load": {"warmup_s": 0.5, "prompt_tokens": 64, "output_tokens": 32},
        "slo": {"ttft_s": 0.3, "attainment": 0.9},
        "capacity": {"low_rps": 2, "max_probes": 5, "probe_s": 2, "min_requests": 15,
                                                               "narrowing_requests": 30}})
    record = run_candidate(simulated("vllm"), plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    probes = cells[cells["cell_id"].str.startswith("capacity-")]
    [row] = cells[cells["kind"] == "capacity"].to_dict("records")
    assert 2 <= len(probes) <= 5 and row["capacity_probes"] == len(probes)
    held = probes[probes["slo_met"].astype(bool)]["offered_rps"]
    missed = probes[~probes["slo_met"].astype(bool)]["offered_rps"]
    # 4 slots of 32-token requests at about 10 ms a step hold about 10 requests/s; 2/s holds, 32/s cannot. The
    # capacity lies where the fitted attainment crosses the target, between the probes that held and missed.
    assert 2 <= max(held) <= row["capacity_rps"] <= min(missed[missed > max(held)], default=32) < 33
    assert row["valid"] and row["reconciliation"] == "ok"
    from servebook.present import report
    from servebook.util.render import to_text

    shown = to_text(report(record).blocks())
    assert f"capacity: holds {row['capacity_rps']:.3g} requests/s" in shown and "TTFT <= 0.3 s for 90%" in shown


def test_the_next_round_of_a_candidate_draws_the_next_arrivals_under_the_same_plan(tmp_path):
    """Runs of one round share arrivals (common random numbers across candidates); the next round draws new ones,
    so that the runs average over patterns. The run stays recorded under the plan as written."""
    plan, journal = load_plan([4], duration_s=1.0), Journal(tmp_path)
    first = run_candidate(simulated("vllm"), plan, journal, reporter=QUIET)
    second = run_candidate(simulated("vllm"), plan, journal, reporter=QUIET)
    assert first.manifest.plan_id == second.manifest.plan_id == plan.id
    seeds = [int(r.table("cells").set_index("cell_id").loc["load-4rps", "arrival_seed"]) for r in (first, second)]
    assert seeds == [plan.load.seed, plan.load.seed + 1]
    due = [r.table("requests")["t_due"] - r.table("requests")["t_due"].min() for r in (first, second)]
    assert len(due[0]) != len(due[1]) or not (due[0].round(3).to_numpy() == due[1].round(3).to_numpy()).all()


def test_a_load_sent_from_two_processes_keeps_one_schedule(tmp_path):
    """Beyond one process's pace the arrivals are dealt to sending processes: every request still leaves on the
    schedule's clock, and the records come back together in one cell."""
    plan = load_plan([20], duration_s=2.0)
    plan = plan.model_copy(update={"load": plan.load.model_copy(update={"client_processes": 2})})
    record = run_candidate(simulated("vllm"), plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    [cell] = record.table("cells").to_dict("records")
    assert cell["valid"], cell["invalid_reasons"]
    requests = record.table("requests")
    assert sorted(requests["client_process"].unique()) == [0, 1]
    assert len(requests) == len(schedule(plan.load, 20))
    assert requests["error"].isna().all()
    lag_ms = (requests["t_send"] - requests["t_due"]) * 1000
    # one late send in 43 is a scheduling hiccup of a 2-core host (38 ms seen once); the cell's own rule, checked
    # above as valid, allows 5% beyond 50 ms
    assert lag_ms.median() < 10 and lag_ms.quantile(0.9) < 25
    assert (requests["t_send"] >= requests["t_due"] - 1e-3).all()  # none left before it was due


def _probe_into_a_crash(tmp_path, **load):
    """A capacity probe of over 100 requests at 4/s into the simulator, which crashes once it has streamed 40
    measured tokens: in the probe's second request."""
    plan = Plan.model_validate({
        "decode": None, "prefill": None, "warmup_requests": 0, "max_foreign_cpu_cores": TOLERANT_CORES,
        "load": {"warmup_s": 0.5, "prompt_tokens": 64, "output_tokens": 32, **load},
        "slo": {"ttft_s": 1.0, "attainment": 0.9},
        "capacity": {"low_rps": 4, "max_probes": 2, "probe_s": 30, "min_requests": 100, "narrowing_requests": 100}})
    record = run_candidate(simulated("vllm", "crash_mid_stream"), plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "failed" and record.manifest.failure.cause == "crash", record.manifest.failure
    return plan, record


def test_a_probe_into_an_engine_that_died_stops_sending_and_fails_the_run_with_the_death(tmp_path):
    """Issue 56: an engine that crashed 1 s into a capacity probe of 124 requests at 4/s was told dead only once the
    probe's whole schedule had been sent into it (34.9 s). A failed request has the engine's liveness checked, and a
    dead engine stops the schedule: the run fails with the crash, most of the probe unsent."""
    from servebook.measure.openloop import probe_window

    plan, record = _probe_into_a_crash(tmp_path)
    window = probe_window(plan.load, 4, 30, 100)
    scheduled = len(schedule(plan.load.model_copy(update={"duration_s": window}), 4))
    sent = record.table("requests")
    assert scheduled > 100 and 0 < len(sent) < scheduled / 2, (len(sent), scheduled)
    assert sent["error"].notna().any(), "the requests the death failed are kept"


def test_senders_into_an_engine_that_died_are_stopped(tmp_path):
    """The same probe sent from two processes: their parent hears nothing of their requests, so it checks the
    engine while they send, and stops them once it is dead; their shares come back failed, saying so."""
    from servebook.measure.transport.senders import ENGINE_DIED

    _, record = _probe_into_a_crash(tmp_path, client_processes=2)
    sent = record.table("requests")
    assert (sent["error"] == ENGINE_DIED).any(), sent["error"].value_counts()
