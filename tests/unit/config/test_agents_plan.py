"""The agents section of a plan (issue 33): its defaults are a coding agent's, the shipped plan spells them out, bad
sizes are refused with the field named, and plans without it keep their ids."""

import pytest
from pydantic import ValidationError

from servebook.config import Plan, load_plan
from servebook.config.agents import AgentsPlan
from servebook.config.rules import ComparisonRule
from servebook.util.resources import shipped_file


def test_the_shipped_coding_agent_plan_is_the_sections_defaults():
    plan = load_plan(shipped_file("plans", "coding-agent.yaml"))
    assert plan.agents == AgentsPlan()
    assert plan.decode is None and plan.prefill is None
    assert "agents" in plan.needs_tokenizer  # its texts are sized by the engine's tokenizer


def test_defaults_are_shaped_like_a_coding_agent():
    agents = AgentsPlan()
    first = agents.system_tokens + agents.tool_schema_tokens + agents.repo_map_tokens
    assert 5000 <= first <= 10_000 and agents.tool_result_tokens.mean > agents.output_tokens.mean
    assert agents.turns.low == 8 and agents.turns.high == 16 and agents.think_time.distribution == "exponential"
    assert agents.subagents is not None and 0 < agents.subagents.probability < 0.5
    assert agents.longest_session_tokens() > first


def test_numbers_read_as_fixed_sizes():
    agents = AgentsPlan.model_validate({"turns": 6, "output_tokens": 16, "tool_result_tokens": 200})
    assert agents.turns.distribution == "fixed" and agents.turns.mean == 6
    assert agents.output_tokens.mean == 16 and agents.tool_result_tokens.longest == 200


@pytest.mark.parametrize("section, field", [
    ({"sessions": 0}, "sessions"),
    ({"turns": 0}, "turns"),
    ({"output_tokens": 1}, "output_tokens"),
    ({"tool_calls": "model", "tool_schema_tokens": 0}, "tool_calls"),
    ({"think_time": {"distribution": "gamma"}}, "think_time"),
    ({"subagents": {"probability": 2}}, "subagents"),
    ({"arrival_rate_per_s": float("nan")}, "arrival_rate_per_s"),
    ({"sesions": 4}, "sesions"),
])
def test_bad_sections_are_refused_naming_the_field(section, field):
    with pytest.raises(ValidationError, match=field):
        Plan.model_validate({"agents": section})


def test_a_plan_without_agents_keeps_its_id_and_one_with_them_has_its_own():
    plain = Plan.model_validate({"decode": None})
    assert Plan.model_validate({"decode": None, "agents": None}).id == plain.id
    with_agents = Plan.model_validate({"decode": None, "agents": {}})
    assert with_agents.id != plain.id
    assert Plan.model_validate({"decode": None, "agents": {"seed": 1}}).id != with_agents.id


def test_rules_on_session_metrics_judge_the_agents_cells():
    rule = ComparisonRule(metric="session_p95_turn_ttft_s", max_regression_pct=10)
    assert rule.kind == "agents"
    assert Plan.model_validate({"decode": None}).unmatched(rule) == [
        "session_p95_turn_ttft_s needs agent sessions, and the plan has no agents section"]
    assert Plan.model_validate({"decode": None, "agents": {}}).unmatched(rule) == []
    with pytest.raises(ValidationError, match="they judge every agents cell"):
        ComparisonRule(metric="session_turns_per_s", max_regression_pct=10, concurrency=[4])


@pytest.mark.parametrize("section, words", [
    ({"sessions": 4096, "repo_map_tokens": 1_000_000}, "sessions' own texts come to about"),
    ({"sessions": 4096, "turns": 64, "subagents": {"probability": 1.0, "turns": 8}}, "turns planned"),
    ({"sessions": 4, "turns": 512, "think_time": {"mean_s": 600, "max_s": 3600}}, "the cell would take about 85.3 hours"),
    ({"seed": -1}, "seed"),
])
def test_an_agents_section_that_could_not_run_is_refused_before_launch(section, words):
    """Each failed only after the engine was up (MemoryError at 4.6 GB, a traceback, an 85-hour cell unsaid)."""
    from servebook.config import InputError, validate

    with pytest.raises(InputError, match=words):
        validate(Plan, {"decode": None, "prefill": None, "agents": section}, "plan")
