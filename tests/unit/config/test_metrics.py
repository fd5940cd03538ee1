"""The judged metrics' one home (config/metrics.py): every metric a rule may name has a row, measured by a kind
that exists, and what rules, verdicts and searches read from it is what they spelled before."""

from typing import get_args

import pytest
from pydantic import ValidationError

from servebook.config.metrics import LOWER_IS_BETTER, METRIC_WORDS, METRICS, Metric
from servebook.config.plan import Plan
from servebook.config.rules import ComparisonRule
from servebook.config.search import Objective
from servebook.measure.kinds import kind_of


def test_every_metric_has_one_row_measured_by_a_registered_kind():
    assert tuple(METRICS) == get_args(Metric)
    for name, row in METRICS.items():
        assert row.column == name and kind_of(row.kind).name == row.kind
    assert LOWER_IS_BETTER == {"ttft_s", "ttft_p90_s", "next_turn_ttft_s", "replay_ttft_p90_s", "answer_ttft_s",
                               "itl_p99_s", "probe_itl_p99_s", "probe_ttft_p95_s", "session_p95_turn_ttft_s"}
    assert METRIC_WORDS["capacity_rps"] == "capacity under the objectives"


def test_rules_and_objectives_read_the_rows():
    assert ComparisonRule(metric="next_turn_ttft_s", max_regression_pct=5).kind == "reuse"
    assert ComparisonRule(metric="steady_tok_s", max_regression_pct=5).kind == "decode"
    assert Objective(metric="ttft_p90_s").lower_is_better and not Objective(metric="prefill_tok_s").lower_is_better
    assert Objective(metric="aggregate_tok_s", concurrency=4).describe() == "aggregate decode at 4 requests"
    with pytest.raises(ValidationError, match="a run has one capacity"):
        ComparisonRule(metric="capacity_rps", max_regression_pct=5, concurrency=[1])
    with pytest.raises(ValidationError, match="select cells by prompt_tokens, not concurrency/category"):
        ComparisonRule(metric="prefill_tok_s", max_regression_pct=5, category="prose")
    with pytest.raises(ValidationError, match="select cells by concurrency/category, not prompt_tokens"):
        ComparisonRule(metric="ttft_s", max_regression_pct=5, prompt_tokens=[512])


def test_the_latency_under_load_metrics_and_what_their_rules_need_of_the_plan():
    assert ComparisonRule(metric="itl_p99_s", max_regression_pct=10, concurrency=[4]).kind == "decode"
    rule = ComparisonRule(metric="probe_itl_p99_s", max_regression_pct=20, prompt_tokens=[2048])
    assert rule.kind == "prefill"
    # the prefill cells carry the probes' figures only where the plan sends probes
    assert Plan().unmatched(rule) == ["probe_itl_p99_s needs plan.prefill.probes, and the plan's prefill section has "
                                      "none"]
    assert Plan.model_validate({"prefill": {"prompt_tokens": [512, 2048], "probes": {}}}).unmatched(rule) == []
    with pytest.raises(ValidationError, match="select cells by prompt_tokens, not concurrency/category"):
        ComparisonRule(metric="probe_ttft_p95_s", max_regression_pct=5, concurrency=[1])
