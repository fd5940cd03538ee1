"""Load rates and capacity searches are finite, positive and bounded, each bound said: a NaN passed every check and
failed after the engine started, an infinite or huge rate hung building its schedule, and a tiny first rate made
the first probe wait for hours."""

import pytest

from servebook.config import InputError, Plan, validate

CAPACITY = {"decode": None, "prefill": None, "load": {}, "slo": {"ttft_s": 1.0}}


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), 1e9])
def test_a_load_rate_that_is_not_finite_or_beyond_the_client_is_refused(rate):
    with pytest.raises(InputError, match="rates_rps"):
        validate(Plan, {"decode": None, "prefill": None, "load": {"rates_rps": [1.0, rate]}}, "plan.yaml")


@pytest.mark.parametrize("field, value", [("high_rps", float("inf")), ("high_rps", 1e9), ("low_rps", float("nan")),
                                          ("precision_pct", float("nan"))])
def test_a_capacity_search_is_finite_and_bounded(field, value):
    with pytest.raises(InputError, match=field):
        validate(Plan, {**CAPACITY, "capacity": {field: value}}, "capacity")


def test_a_first_rate_whose_probe_would_wait_for_hours_is_refused_with_the_lowest_allowed():
    with pytest.raises(InputError, match=r"low_rps 0.001: the first probe would wait 50,000 s .* low_rps >= 0.0139"):
        validate(Plan, {**CAPACITY, "capacity": {"low_rps": 0.001}}, "capacity")
    assert validate(Plan, {**CAPACITY, "capacity": {"low_rps": 0.02}}, "capacity").capacity.low_rps == 0.02


def test_the_usual_rates_still_pass():
    plan = validate(Plan, {"decode": None, "prefill": None, "load": {"rates_rps": [0.5, 2, 9000]}}, "plan.yaml")
    assert plan.load.rates_rps == [0.5, 2, 9000]
