"""Scaling as a verdict: N replicas against M judged as the multiple they hold, with its interval over runs."""

import pandas as pd
import pytest
from pydantic import ValidationError

from servebook.config import VerdictRules
from servebook.config.scaling import ScalingRule
from servebook.journal import Manifest
from servebook.verdicts.judge import judge_runs
from servebook.verdicts.scaling import ScalingComparison

DONE = Manifest(status="completed")
RULES = VerdictRules(scaling=[ScalingRule(metric="capacity_rps", min_efficiency=0.9)])


def capacity(value: float, round_: int) -> pd.DataFrame:
    frame = pd.DataFrame([{"cell_id": "capacity", "kind": "capacity", "category": None, "concurrency": 0,
                           "target_prompt_tokens": None, "capacity_rps": value, "valid": True,
                           "invalid_reasons": "", "reconciliation": "ok"}])
    frame.attrs["block"] = ("machine", str(round_))
    return frame


def judged(one: list[float], two: list[float], scale=(2, 1)):
    runs = [(DONE, capacity(v, i)) for i, v in enumerate(two)]
    return judge_runs(runs, [capacity(v, i) for i, v in enumerate(one)], RULES, is_baseline=False, scale=scale)


def test_two_replicas_holding_twice_one_are_accepted_with_the_efficiency_and_its_interval():
    verdict = judged([10.0, 10.4, 9.8, 10.1], [20.1, 20.6, 19.7, 20.3])
    assert verdict.outcome == "accepted", verdict.reasons
    (c,) = [c for c in verdict.comparisons if isinstance(c, ScalingComparison)]
    assert c.efficiency == pytest.approx(1.0, abs=0.02)
    low, high = c.shown_bounds
    assert 1 + low / 100 > 1.8 and 1 + high / 100 < 2.2  # the multiple's interval, over runs
    assert verdict.reasons[0].startswith("scaling 2 vs 1 replicas, capacity under the objectives, per run: x2.0")
    assert "efficiency 100%" in verdict.reasons[0] and "(rule: at least 90% of x2, so x1.80)" in verdict.reasons[0]


def test_two_replicas_holding_one_and_a_half_are_rejected():
    verdict = judged([10.0, 10.4, 9.8, 10.1], [15.2, 14.8, 15.1, 15.0])
    assert verdict.outcome == "rejected", verdict.reasons
    assert verdict.reasons[0].startswith("scaling 2 vs 1 replicas") and "efficiency 75%" in verdict.reasons[0]


def test_noisy_runs_near_the_rule_stay_inconclusive():
    verdict = judged([10.0, 12.0, 8.5], [18.0, 21.0, 16.0])
    assert verdict.outcome == "inconclusive", verdict.reasons
    assert verdict.reasons[0].startswith("inconclusive: scaling 2 vs 1 replicas")


def test_same_replica_count_is_not_a_scaling_comparison():
    verdict = judged([10.0, 10.2], [10.1, 10.0], scale=(1, 1))
    assert not verdict.comparisons and verdict.outcome == "accepted"


def test_rules_without_scaling_keep_their_hash():
    assert VerdictRules().hash == VerdictRules(scaling=[]).hash
    assert VerdictRules().hash != RULES.hash


@pytest.mark.parametrize("rule,match", [
    ({"metric": "per_request_tok_s", "min_efficiency": 0.9}, "replicas do not multiply it"),
    ({"metric": "ttft_s", "min_efficiency": 0.9}, "replicas do not multiply it"),
    ({"metric": "capacity_rps", "min_efficiency": 0.9, "concurrency": [4]}, "select no cells"),
    ({"metric": "aggregate_tok_s", "min_efficiency": 0.9, "prompt_tokens": [256]}, "not prompt_tokens"),
    ({"metric": "aggregate_tok_s", "min_efficiency": 0.9, "speedup": 2}, "speedup"),
])
def test_a_scaling_rule_judges_only_figures_replicas_multiply_on_cells_it_can_select(rule, match):
    with pytest.raises(ValidationError, match=match):
        ScalingRule.model_validate(rule)


def test_the_shipped_replicas_study_loads_and_a_scaling_rule_on_unmeasured_cells_is_refused():
    from pathlib import Path

    from servebook.config import load_study

    path = Path(__file__).parents[2] / "data" / "studies" / "tiny-replicas.yaml"
    study = load_study(path)
    assert [e.candidate.launch.replicas for e in study.expand()] == [1, 2]
    assert study.verdict.scaling[0].min_efficiency == 0.9
    data = study.model_dump(mode="json", exclude_unset=True)
    data["verdict"]["scaling"] = [{"metric": "aggregate_tok_s", "min_efficiency": 0.9, "concurrency": [64]}]
    with pytest.raises(ValidationError, match=r"verdict.scaling\[0\]: concurrency \[64\]"):
        type(study).model_validate(data)
