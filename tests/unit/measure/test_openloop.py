"""Open-loop schedules, objectives and the client-lag fault: pure functions of the plan and of recorded requests."""

import json

import pytest
from pydantic import ValidationError

from servebook.config import Plan
from servebook.config.load import LoadPlan, ServiceObjectives
from servebook.measure.cells import objective_figures, plan_cells
from servebook.measure.kinds import kind_of
from servebook.measure.observers.reconcile import Reconciliation
from servebook.measure.openloop import attainment, probe_window, read_trace, schedule
from servebook.measure.transport.client import RequestRecord
from servebook.measure.validity import CellEvidence, cell_faults
from tests.helpers.records import request_record


def test_poisson_arrivals_have_the_asked_rate_and_a_seeded_schedule():
    plan = LoadPlan(rates_rps=[20], warmup_s=1, duration_s=50)
    arrivals = schedule(plan, 20)
    measured = [a for a in arrivals if a.measured]
    assert abs(len(measured) / 50 - 20) < 2  # 1000 expected, Poisson SD about 32
    assert [a.due_s for a in arrivals] == [a.due_s for a in schedule(plan, 20)]
    assert all(not a.measured for a in arrivals if a.due_s < 1)


def test_every_rate_meets_the_same_bursts_and_lengths_compressed_in_time():
    """Common random numbers: a capacity search probes two configurations at different rates, and both must meet
    the same pattern, or their capacities differ by the luck of two patterns as well as by the configurations."""
    plan = LoadPlan(warmup_s=1, duration_s=20, prompt_tokens={"distribution": "uniform", "low": 10, "high": 500},
                    output_tokens={"distribution": "lognormal", "mean": 32, "cv": 1.0, "low": 2, "high": 256})
    slow, fast = schedule(plan, 4.0), schedule(plan, 10.0)
    assert len(fast) > 2 * len(slow)
    for a, b in zip(slow, fast, strict=False):
        assert b.due_s == pytest.approx(a.due_s * 0.4)
        assert (a.prompt_tokens, a.output_tokens) == (b.prompt_tokens, b.output_tokens)
    longer = schedule(plan.model_copy(update={"duration_s": 200}), 10.0)
    assert [a.due_s for a in longer[:len(fast)]] == [a.due_s for a in fast]  # a longer window only adds arrivals
    other = schedule(plan.model_copy(update={"seed": 1}), 10.0)
    assert [a.due_s for a in other[:20]] != [a.due_s for a in fast[:20]]


def test_a_round_draws_its_own_arrivals_and_the_first_round_the_plans():
    from servebook.measure.openloop import arrival_seed

    assert arrival_seed(7, 0) == 7
    assert len({arrival_seed(7, r) for r in range(6)}) == 6


def test_bursty_arrivals_scatter_more_than_poisson_ones():
    import statistics

    def gaps_cv(plan: LoadPlan) -> float:
        times = [a.due_s for a in schedule(plan, 10)]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        return statistics.stdev(gaps) / statistics.fmean(gaps)

    poisson = gaps_cv(LoadPlan(rates_rps=[10], duration_s=200))
    bursty = gaps_cv(LoadPlan(rates_rps=[10], duration_s=200, arrival="gamma", burstiness=3))
    assert 0.85 < poisson < 1.15 and bursty > 2.2


def test_lengths_are_drawn_from_their_distribution_and_clipped():
    plan = LoadPlan(rates_rps=[50], duration_s=40, prompt_tokens={"distribution": "uniform", "low": 100, "high": 200},
                    output_tokens={"distribution": "lognormal", "mean": 64, "cv": 1.0, "low": 8, "high": 512})
    arrivals = schedule(plan, 50)
    assert all(100 <= a.prompt_tokens <= 200 for a in arrivals)
    outputs = [a.output_tokens for a in arrivals]
    assert all(8 <= o <= 512 for o in outputs) and 50 < sum(outputs) / len(outputs) < 80
    with pytest.raises(ValidationError, match="burstiness is for gamma"):
        LoadPlan(rates_rps=[1], burstiness=2)
    with pytest.raises(ValidationError, match="ascending"):
        LoadPlan(rates_rps=[2, 1])


def test_a_trace_sets_the_arrivals_and_lengths_scaled_to_the_rate(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps({"timestamp": 1000 * i, "input_length": 100 + i, "output_length": 10 + i})
                               for i in range(10)))
    rows = read_trace(trace)
    assert rows[0] == (0.0, 100, 10) and len(rows) == 10
    plan = LoadPlan(rates_rps=[5], warmup_s=0, duration_s=4, trace=str(trace))
    arrivals = schedule(plan, 5, rows)
    assert len(arrivals) == 20  # 10 requests over 9 s at ~1.1/s, brought to 5/s over 4 s
    assert {a.prompt_tokens for a in arrivals} <= {100 + i for i in range(10)}
    (tmp_path / "bad.jsonl").write_text('{"timestamp": 1}\n')
    with pytest.raises(ValueError, match="input_length"):
        read_trace(tmp_path / "bad.jsonl")


def record(i: float, ttft: float, span: float, tokens: int = 11, due: float | None = None,
           send: float | None = None) -> RequestRecord:
    t_send = send if send is not None else i
    return request_record(i, cell_id="load-1rps", concurrency=0, tokens=tokens, t_send=t_send, t_first=t_send + ttft,
                          t_last=t_send + ttft + span, t_due=due)


def test_attainment_counts_requests_meeting_every_objective_with_an_exact_interval():
    slo = ServiceObjectives(ttft_s=0.5, tpot_s=0.05, attainment=0.9)
    records = [record(i, 0.2, 0.3) for i in range(18)] + [record(18, 0.9, 0.3), record(19, 0.2, 1.0)]
    figures = attainment(records, slo, window_s=10)
    assert figures["slo_attainment"] == 0.9 and figures["goodput_rps"] == 1.8 and figures["slo_met"]
    assert figures["slo_attainment_low"] < 0.9 < figures["slo_attainment_high"] < 1
    with pytest.raises(ValidationError, match="at least one"):
        ServiceObjectives()


def test_a_client_that_fell_behind_its_schedule_makes_the_cell_disturbed():
    def faults(lags_ms):
        records = [record(i, 0.1, 0.2, due=float(i), send=i + lag / 1000) for i, lag in enumerate(lags_ms)]
        evidence = CellEvidence("load", "prose", 11, 100, records, Reconciliation("ok", ""), max_lag_ms=10,
                                checks=kind_of("load").checks)
        return [f.code for f in cell_faults(evidence)]

    assert faults([1] * 200 + [40] * 5) == []  # a few late sends are the host's blips
    assert faults([1] * 100 + [40] * 10) == ["client_lag"]


def test_load_cells_come_from_the_plan_and_report_their_window():
    plan = Plan.model_validate({"decode": None, "prefill": None, "slo": {"ttft_s": 0.5},
                                "load": {"rates_rps": [1, 2.5], "warmup_s": 1, "duration_s": 5}})
    cells = [c for c in plan_cells(plan) if c.kind == "load"]
    assert [c.cell_id for c in cells] == ["load-1rps", "load-2.5rps"] and cells[1].rate == 2.5
    assert Plan().id == Plan.model_validate({}).id and "load" not in Plan().canonical_json()
    records = [record(i, 0.2, 0.3, due=float(i), send=float(i)) for i in range(6)]
    records[0].measured = False
    figures = objective_figures(cells[0], records, plan)
    assert figures["offered_rps"] == 1 and figures["achieved_rps"] == 1.0 and figures["slo_attainment"] == 1.0
    assert figures["aggregate_tok_s"] == 5 * 11 / 5


@pytest.mark.parametrize("rate", [0.7, 2.0, 8.0, 8.354, 11.31, 40.0])
def test_a_capacity_probe_window_holds_at_least_its_minimum_of_measured_requests(rate):
    # min_requests / rate holds that many only on average: at 11.31 requests/s a 3.54 s window drew 34 arrivals
    # on the H200, too few for 34 of 34 to show 90% attainment at 95%
    plan = LoadPlan(warmup_s=1, prompt_tokens={"mean": 1024}, output_tokens={"mean": 128})
    window = probe_window(plan, rate, base_s=3, min_requests=40)
    measured = sum(a.measured for a in schedule(plan.model_copy(update={"duration_s": window}), rate))
    assert window >= 3 and 40 <= measured <= 40 + max(6, 3 * rate)  # the base window, or just enough more


def test_outcomes_that_miss_together_are_worth_fewer_requests_and_get_a_wider_interval():
    import random

    from servebook.measure.openloop import attainment_interval, effective_requests

    rng = random.Random(7)
    independent = [rng.random() < 0.9 for _ in range(200)]
    assert 0.6 * 200 <= effective_requests(independent) <= 200
    # the same share, but the misses come in bursts of ten, as requests queued behind one Poisson burst do
    bursty = ([True] * 90 + [False] * 10) * 2
    assert effective_requests(bursty) < 0.2 * 200
    share, low, high, _ = attainment_interval(bursty)
    _, low_independent, high_independent, _ = attainment_interval(sorted(bursty, key=lambda _: rng.random()))
    assert share == 0.9 and high - low > 2 * (high_independent - low_independent)
    assert effective_requests([True] * 50) == 50 and attainment_interval([True] * 50)[2] == 1.0


def test_a_load_beyond_one_process_pace_is_sent_from_several_on_half_the_cores():
    from servebook.measure.transport.senders import processes_for

    assert processes_for(30, None, cores=16) == 1
    assert processes_for(100, None, cores=16) == 3  # 40 requests/s each
    assert processes_for(1000, None, cores=16) == 8  # the other half of the cores serve the engine
    assert processes_for(100, None, cores=2) == 1
    assert processes_for(10, 4, cores=2) == 4  # what the plan asks for, as asked
    # 32 requests/s of 128 tokens each: 4,096 chunks/s, where one process fell behind on an H200 host
    assert processes_for(32, None, cores=16, output_tokens=128) == 3
