"""Numbers a reader can trust (issue 55): intervals that cannot contradict the verdict (a figure over runs on the
log scale, a range of two runs, the same estimate in tables, charts and verdicts), one capacity figure per candidate,
and a stalled request dropped from its probe rather than the probe (compare.html's count of the cells it lists is
checked in Chromium: tests/e2e/test_site_browser.py)."""

import pandas as pd
import pytest

from servebook.config.load import ServiceObjectives
from servebook.estimates import Spread
from servebook.journal import Journal
from servebook.journal.synthetic import write_capacity_run
from servebook.measure.kinds.capacity import probe_of
from servebook.measure.transport.client import RequestRecord
from servebook.present.figures import aggregate_vs_concurrency_spec
from servebook.present.load_tables import capacity_estimates, load_table
from servebook.present.site.pages import cell_records, summarize_run
from servebook.present.site.planning import planning_table
from servebook.present.tables import estimate_tables


def test_a_figure_over_runs_is_a_geometric_mean_on_the_log_scale_and_two_runs_show_their_range():
    # the demo's baseline decode: two runs, whose t interval was [-524.3, 947.3] tok/s
    two = Spread.of([150.0, 273.0])
    assert two.kind == "range" and (two.low, two.high) == (150.0, 273.0)
    assert two.center == pytest.approx((150.0 * 273.0) ** 0.5)
    assert two.text(".1f") == "202.4 range [150.0, 273.0]"
    three = Spread.of([12.0, 21.2, 30.0])
    assert three.kind == "interval" and 0 < three.low < three.center < three.high
    assert three.center == pytest.approx((12.0 * 21.2 * 30.0) ** (1 / 3))
    assert Spread.of([5.0]).text(".1f") == "5.0"
    assert Spread.of([0.0, 0.2, 0.4]).kind == "range"  # a zero has no log: its range, never below zero
    assert Spread.of([-1.0, 2.0, 3.0]).kind == "interval"  # a figure that can be negative keeps its t interval


def decode_cells(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"candidate": name, "run_id": f"{name}-{i}", "kind": "decode", "category": "prose",
                          "concurrency": 1, "cell_id": "decode-prose-c1", "aggregate_tok_s": v, "valid": True}
                         for name, runs in values.items() for i, v in enumerate(runs)])


def test_tables_and_charts_show_the_same_estimate_and_no_interval_below_zero():
    cells = decode_cells({"baseline": [150.0, 273.0], "one-slot": [10.0, 12.0, 16.0]})
    [table] = estimate_tables(cells)
    assert "geometric mean" in table.title and "range" in table.title
    rows = {row.values[0]: row.values for row in table.rows}
    aggregate = table.columns.index("Aggregate tok/s")
    assert rows["baseline"][aggregate] == "202.4 range [150.0, 273.0]"
    one_slot = Spread.of([10.0, 12.0, 16.0])
    assert rows["one-slot"][aggregate] == one_slot.text(".1f") and "[-" not in rows["one-slot"][aggregate]
    chart = aggregate_vs_concurrency_spec(cells)
    bars = {trace["name"]: trace for trace in chart["data"]}
    assert bars["baseline"]["y"] == [pytest.approx(Spread.of([150.0, 273.0]).center)]
    assert bars["baseline"]["y"][0] - bars["baseline"]["error_y"]["arrayminus"][0] == pytest.approx(150.0)
    assert bars["one-slot"]["y"][0] - bars["one-slot"]["error_y"]["arrayminus"][0] == pytest.approx(one_slot.low)


def test_one_capacity_figure_per_candidate_in_the_capacity_and_the_planning_tables(tmp_path):
    journal = Journal(tmp_path / "journal")
    for i, held in enumerate((23.2, 19.2)):
        write_capacity_run(journal, label="baseline", capacity_rps=held, index=i)
    summaries = [summarize_run(r) for r in journal.runs()]
    table = capacity_estimates(cell_records(summaries))
    [row] = table.rows
    figure = Spread.of([23.2, 19.2]).center  # neither the newest run's 19.2 nor the mean 21.2
    assert row.values[3] == f"{figure:.3g} range [19.2, 23.2]"
    planning = planning_table({"baseline": summaries})
    [unit] = [r.values for r in planning.rows if "requests/s" in r.values[1]]
    assert unit[1].startswith(f"{figure:.3g} requests/s") and "geometric mean of 2 runs" in unit[1]


def record(i: int, ttft: float, stalled: bool = False) -> RequestRecord:
    span = 0.005 if stalled else 0.4  # 9 tokens in 5 ms: read in a burst, far faster than the engine made them
    return RequestRecord(f"r{i}", "capacity-8rps", 0, "prose", 9, t_send=0.0, t_first=ttft, t_last=ttft + span,
                         prompt_tokens=64, completion_tokens=9, server_predicted_per_second=20.0)


def test_a_stalled_request_is_dropped_from_its_probe_not_the_probe():
    # 69 of 76 unstalled requests meet the objectives (90.8%); the one stalled read could have flipped the probe
    # (69 of 77 is 89.6%), which threw the whole probe out before
    slo = ServiceObjectives(ttft_s=1.0, tpot_s=0.1, attainment=0.9)
    measured = [record(i, 0.1) for i in range(69)] + [record(69 + i, 2.0) for i in range(7)] + [record(99, 2.0, True)]
    row = {"cell_id": "capacity-8rps", "valid": False, "invalid_codes": "client_stall", "slo_attainment": 69 / 77,
           "slo_met": False}
    probe = probe_of(8.0, row, measured, slo, 10.0)
    assert probe.tells(0.9) and probe.holds(0.9) and probe.requests == 76 and probe.stalls_dropped == 1
    assert row["slo_attainment"] == pytest.approx(69 / 76) and row["slo_dropped_requests"] == 1 and row["slo_met"]
    # a probe invalid for another fault is thrown out, and its row never says it held
    thrown = {"cell_id": "capacity-2rps", "kind": "load", "valid": False, "invalid_codes": "counters_disagree",
              "invalid_reasons": "counters disagree", "slo_met": True, "slo_attainment": 1.0}
    assert not probe_of(2.0, dict(thrown), measured, slo, 10.0).tells(0.9)
    kept = {**thrown, **row, "cell_id": "capacity-8rps", "kind": "load", "invalid_reasons": "client stalled"}
    table = load_table([thrown, kept])
    held = {r.values[0]: r.values[table.columns.index("Held")] for r in table.rows}
    assert held == {"capacity-2rps": "not counted", "capacity-8rps": "yes (1 stalled request dropped)"}


def test_the_planning_arithmetic_stands_beside_the_measured_replicas(tmp_path):
    """Issue 57, item 4: one replica's capacity times two, beside what two replicas of the same configuration held
    (its estimate with its range, and its share of the arithmetic); a configuration of its own gets none."""
    journal = Journal(tmp_path / "journal")
    two = {"replicas": 2, "simulator": True}
    for i, (label, held, launch) in enumerate([("one", 10.0, {"simulator": True}), ("one", 11.0, {"simulator": True}),
                                               ("two", 19.0, two), ("two", 21.0, two)]):
        write_capacity_run(journal, label=label, capacity_rps=held, index=4 * i, launch=launch)
    # another configuration (other knobs): not a replica of "one"
    write_capacity_run(journal, label="other", capacity_rps=30.0, index=1, launch=two)
    runs = {}
    for record in journal.runs():
        runs.setdefault(record.identity.label, []).append(summarize_run(record))
    planning = planning_table(runs)
    assert planning.columns[2:] == ["2 replicas", "4 replicas", "8 replicas"]
    rows = {r.values[0]: r.values for r in planning.rows}
    unit, both = Spread.of([10.0, 11.0]).center, Spread.of([19.0, 21.0])
    assert rows["one"][2] == (f"{2 * unit:.3g} requests/s (arithmetic); two measured {both.text('.3g')}: "
                              f"{both.center / (2 * unit):.2f} of the arithmetic")
    assert rows["one"][3] == f"{4 * unit:.3g} requests/s (arithmetic)"
    assert "measured" not in " ".join(rows["two"] + rows["other"])
