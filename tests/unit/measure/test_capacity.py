"""The capacity search against synthetic engines whose capacity is known: probes placed by doubling and bisection,
the answer read back through a monotone fit with an interval, cliffs and client limits said."""

import asyncio
import math

import numpy as np
import pytest

from servebook.config.load import CapacitySearch
from servebook.measure.kinds.capacity.search import Probe, capacity_of, capacity_row, describe_capacity, search


def engine(capacity: float, rng: np.random.Generator, requests: int = 200, width: float = 0.03):
    """Attainment falls from 1 to 0 around `capacity` (a logistic knee `width` wide, relative), each probe a
    binomial draw of `requests` requests."""
    from scipy import stats

    async def probe(rate: float, requests: int = 0) -> Probe:
        p = 1 / (1 + math.exp((rate / capacity - 1) / width * 4)) * 0.98 + 0.02 * (rate < capacity)
        met = int(rng.binomial(requests, min(max(p, 0.0), 1.0)))
        ci = stats.binomtest(met, requests).proportion_ci(0.95, method="exact")
        return Probe(rate, requests, met / requests, float(ci.low), float(ci.high))
    return probe


@pytest.mark.parametrize("capacity", [3.7, 11.8, 42.0, 260.0])
def test_the_search_finds_a_known_capacity_within_5_percent_in_12_probes(capacity):
    spec = CapacitySearch(low_rps=1, high_rps=1024, precision_pct=5, max_probes=12)
    found = []
    for seed in range(40):
        probes = asyncio.run(search(engine(capacity, np.random.default_rng(seed)), spec, 0.9))
        assert len(probes) <= 12
        figures = capacity_of(probes, 0.9, spec.precision_pct)
        found.append(figures["capacity_rps"])
    # the rate where the knee's attainment is 90%, the truth the search estimates
    truth = capacity * (1 + 0.03 / 4 * math.log(0.98 / 0.88 - 1)) if capacity else capacity
    within = [f is not None and abs(f - truth) / truth <= 0.05 for f in found]
    assert sum(within) >= 38, (truth, found)


def test_the_interval_brackets_the_capacity_and_a_collapse_is_a_cliff():
    probes = [Probe(4, 100, 1.0, 0.96, 1.0), Probe(8, 100, 0.97, 0.91, 0.99), Probe(16, 100, 0.1, 0.05, 0.18),
              Probe(12, 100, 0.92, 0.85, 0.97), Probe(14, 100, 0.2, 0.13, 0.29), Probe(13, 100, 0.3, 0.21, 0.4)]
    figures = capacity_of(probes, 0.9, 10)
    # where the fit crosses 90% between the last probe that holds (12: 92%) and the next (13: 30%)
    assert figures["capacity_rps"] == pytest.approx(12 + 0.02 / 0.62)
    assert figures["capacity_low_rps"] == 8 and figures["capacity_high_rps"] == 13
    assert figures["capacity_cliff"] is True
    # a noisy dip below a higher rate that holds is smoothed by the monotone fit, not taken as the answer
    dip = [Probe(4, 100, 1.0, 0.96, 1.0), Probe(6, 100, 0.88, 0.8, 0.94), Probe(8, 100, 0.95, 0.89, 0.98),
           Probe(10, 100, 0.4, 0.3, 0.5)]
    assert 8 < capacity_of(dip, 0.9)["capacity_rps"] < 8.5


def test_a_client_that_cannot_offer_the_load_ends_the_search_with_a_lower_bound():
    async def probe(rate: float, requests: int = 0) -> Probe:
        return Probe(rate, 100, 1.0, 0.96, 1.0, valid=rate < 20, client_limited=rate >= 20)

    probes = asyncio.run(search(probe, CapacitySearch(low_rps=5), 0.9))
    assert [p.rate for p in probes] == [5, 20]
    row = capacity_row(probes, [{"reconciliation": "ok", "invalid_codes": ""}]
                       + [{"reconciliation": "ok", "invalid_codes": "client_lag", "invalid_reasons": "late"}], 0.9, 5)
    assert row["capacity_rps"] == 5 and row["capacity_client_limited"] and row["valid"]
    assert "lower bound" in describe_capacity(row, "TTFT <= 2 s for 90% of requests")


def test_capacity_is_a_metric_that_verdicts_judge_over_runs():
    import pandas as pd

    from servebook.config import ComparisonRule, Plan
    from servebook.verdicts import compare_rule

    rule = ComparisonRule(metric="capacity_rps", max_regression_pct=5)
    assert rule.kind == "capacity"
    with pytest.raises(ValueError, match="select no cells"):
        ComparisonRule(metric="capacity_rps", max_regression_pct=5, concurrency=[1])
    searching = Plan.model_validate({"load": {}, "slo": {"ttft_s": 2}, "capacity": {}})
    assert Plan().unmatched(rule) and not searching.unmatched(rule)

    def runs(values):
        return [pd.DataFrame([{"cell_id": "capacity", "kind": "capacity", "category": "prose", "concurrency": 0,
                               "target_prompt_tokens": None, "capacity_rps": v}]) for v in values]

    [cell] = compare_rule(runs([9.0, 9.1, 8.9]), runs([10.0, 10.1, 9.9]), rule)
    assert cell.change_pct == pytest.approx(-10, abs=0.2)
    assert cell.p_beyond is not None and cell.p_beyond < 0.01 and not cell.ok  # beyond the 5% limit
    assert cell.text().startswith("capacity under the objectives, per run: -10.0% [")


def test_a_probe_whose_client_fell_behind_still_fails_when_the_engine_missed_anyway():
    async def probe(rate: float, requests: int = 0) -> Probe:
        overloaded = rate >= 20  # the engine falls over above 10/s, and the client with it
        return Probe(rate, 100, 0.02 if overloaded else (1.0 if rate <= 10 else 0.5), 0.0, 1.0,
                     valid=not overloaded, client_limited=overloaded)

    probes = asyncio.run(search(probe, CapacitySearch(low_rps=5, precision_pct=5), 0.9))
    figures = capacity_of(probes, 0.9)
    assert 9.5 <= figures["capacity_rps"] <= 10.5 and not figures["capacity_client_limited"]


def test_an_invalid_probe_is_probed_again_rather_than_taken_for_a_failure():
    seen: list[float] = []

    async def probe(rate: float, requests: int = 0) -> Probe:
        seen.append(rate)
        attainment = 1.0 if rate <= 10 else 0.0
        first_at_two = rate == 2 and seen.count(2) == 1  # one stalled probe, whose requests all met the objectives
        return Probe(rate, 50, attainment, attainment - 0.05, attainment, valid=not first_at_two)

    probes = asyncio.run(search(probe, CapacitySearch(low_rps=2, precision_pct=5), 0.9))
    assert seen[:3] == [2, 2, 8] and min(seen) == 2  # never sent down below the stalled rate
    row = capacity_of(probes, 0.9)
    assert 9.5 <= row["capacity_rps"] <= 10.5


def test_a_rate_invalid_twice_ends_the_search_with_what_came_before():
    async def probe(rate: float, requests: int = 0) -> Probe:
        return Probe(rate, 50, 1.0, 0.93, 1.0, valid=rate < 8)

    probes = asyncio.run(search(probe, CapacitySearch(low_rps=2), 0.9))
    assert [p.rate for p in probes] == [2, 8, 8]


def test_a_probe_whose_stalled_reads_were_dropped_does_not_end_the_search():
    """One slot at 32 requests/s on the tiny model: 3 of 89 reads stalled, and no request met the objectives. The
    stalled reads are dropped from the probe (not the probe), so the search bisects on instead of stopping at the
    last rate that held."""
    async def probe(rate: float, requests: int = 0) -> Probe:
        attainment = 1.0 if rate <= 10 else 0.0
        return Probe(rate, 80, attainment, attainment - 0.05, min(attainment + 0.05, 1.0), valid=rate < 30,
                     stalls_dropped=3 if rate >= 30 else 0)

    probes = asyncio.run(search(probe, CapacitySearch(low_rps=2, precision_pct=5), 0.9))
    assert [p.rate for p in probes][:3] == [2, 8, 32] and len(probes) > 4  # 32 told "fails" once, then bisection
    row = capacity_of(probes, 0.9)
    assert 9.5 <= row["capacity_rps"] <= 10.5
