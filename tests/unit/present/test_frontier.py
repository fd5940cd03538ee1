"""The load charts: what they draw from cell records, and what they refuse to flatter."""

from servebook.present.figures import figure_specs
from servebook.present.frontier import (
    capacity_spec,
    frontier_context,
    goodput_vs_load_spec,
    latency_vs_load_spec,
    pareto_points,
    user_rate,
)

SLO = {"slo_ttft_s": 0.5, "slo_tpot_s": 0.025, "slo_e2e_s": None, "slo_target": 0.9, "gpus": 1}


def probe(candidate: str, run_id: str, rate: float, *, ttft: float, attainment: float, valid: bool = True,
          arrived: float | None = None) -> dict:
    return {"kind": "load", "candidate": candidate, "run_id": run_id, "offered_rps": rate,
            "achieved_rps": arrived if arrived is not None else rate, "ttft_p90_s": ttft, "tpot_p90_s": 0.01,
            "goodput_rps": attainment * rate, "slo_attainment": attainment, "valid": valid, **SLO}


def decode(candidate: str, concurrency: int, aggregate: float, per_request: float, ttft: float = 0.02) -> dict:
    return {"kind": "decode", "candidate": candidate, "run_id": f"{candidate}-1", "concurrency": concurrency,
            "aggregate_tok_s": aggregate, "per_request_tok_s": per_request, "ttft_s": ttft, "output_tokens": 128,
            "valid": True, **SLO}


def test_a_run_context_counts_the_gpus_its_engine_used_and_carries_the_objectives():
    plan = {"slo": {"ttft_s": 2, "tpot_s": 0.05, "attainment": 0.9}}
    candidate = {"knobs": {"tensor_parallel_size": 2}, "launch": {"replicas": 3}}
    assert frontier_context(plan, candidate, host_gpus=8) == {"slo_ttft_s": 2, "slo_tpot_s": 0.05, "slo_e2e_s": None,
                                                              "slo_target": 0.9, "gpus": 6}
    assert frontier_context(plan, candidate, host_gpus=0)["gpus"] == 0  # a CPU host: per server, not per GPU
    assert frontier_context(None, None, 0)["slo_ttft_s"] is None


def test_latency_draws_each_run_in_rate_order_with_the_objectives_dashed_and_invalid_probes_crossed():
    cells = [probe("a", "r1", 8, ttft=0.1, attainment=1), probe("a", "r1", 2, ttft=0.05, attainment=1),
             probe("a", "r1", 32, ttft=9.0, attainment=0, valid=False)]
    spec = latency_vs_load_spec(cells)
    ttft = spec["data"][0]
    assert ttft["x"] == [2, 8, 32] and ttft["y"] == [50, 100, 9000]
    assert ttft["marker"]["symbol"] == ["circle", "circle", "x"]
    assert sorted(shape["y0"] for shape in spec["layout"]["shapes"]) == [25, 500]


def test_goodput_is_drawn_against_the_arrivals_not_the_offered_rate():
    # 33 Poisson arrivals in a window meant for 40 at 8/s: 6.6/s arrived, all met, so the point sits on the diagonal
    cells = [probe("a", "r1", 8, ttft=0.1, attainment=1, arrived=6.6)]
    cells[0]["goodput_rps"] = 6.6
    [line, diagonal] = goodput_vs_load_spec(cells)["data"]
    assert line["x"] == [6.6] and line["y"] == [6.6] and diagonal["x"][-1] == 6.6


def test_capacity_shows_each_runs_interval_and_a_mean_only_over_two_runs_or_more():
    def row(candidate, run_id, value, low, high):
        return {"kind": "capacity", "candidate": candidate, "run_id": run_id, "capacity_rps": value,
                "capacity_low_rps": low, "capacity_high_rps": high, "capacity_cliff": False}

    spec = capacity_spec([row("a", "a1", 10, 9, 11), row("a", "a2", 12, 11, 12.5), row("b", "b1", 8, 7.5, 8.5)])
    names = [t["name"] for t in spec["data"]]
    assert names == ["a", "a: over runs", "b"]
    assert spec["data"][0]["error_x"]["arrayminus"] == [1, 1] and spec["data"][0]["error_x"]["array"] == [1, 0.5]


def test_a_configuration_that_queues_is_not_put_on_the_front_by_its_decode_rate_alone():
    # 8 slots at 16 requests: each request decodes faster once it runs, but half wait a turn for their first token
    queued = decode("slots-8", 16, 1400, 180, ttft=0.7)
    assert user_rate(queued) < 0.75 * 180
    points = {(p["candidate"], p["concurrency"]): p for p in pareto_points(
        [decode("slots-32", 1, 550, 580), decode("slots-32", 16, 1700, 115, ttft=0.05), queued])}
    assert points[("slots-32", 1)]["front"] and points[("slots-32", 16)]["front"]
    assert not points[("slots-8", 16)]["front"]


def test_a_run_of_open_loop_load_only_gets_load_charts_not_empty_closed_loop_ones():
    cells = [probe("a", "r1", 2, ttft=0.05, attainment=1), probe("a", "r1", 8, ttft=0.6, attainment=0.5)]
    titles = [spec["layout"]["title"]["text"].replace("<br>", " ")
              for spec in figure_specs(cells, {"a": {"edges": [], "counts": []}})]
    assert titles == ["Latency p90 vs offered load (dashed: objective)", "Goodput vs arrivals (dotted: all met)"]
    closed = [decode("a", 1, 500, 520), decode("a", 4, 1000, 260)]
    assert any("Pareto" in spec["layout"]["title"]["text"] for spec in figure_specs(closed, {}))
