"""Agent sessions (issue 33): the seeded agenda, the ideal cached tokens of a turn, overflows, the cell's figures and
its validity, from records made here."""

import pytest

from servebook.config import Plan
from servebook.config.agents import AgentsPlan
from servebook.measure.cells import summarize_cell
from servebook.measure.kinds import plan_cells
from servebook.measure.kinds.agents.agenda import (
    CALLED_TOOLS,
    TASK_TOOL,
    TextCutter,
    agenda,
    served_prefixes,
    tools,
    turn_count,
)
from servebook.measure.kinds.agents.session_figures import agents_figures, hit_rates, session_row
from servebook.measure.kinds.agents.sessions import Reply, ideal_after, overflowed
from servebook.measure.observers.reconcile import Check, Reconciliation
from servebook.measure.transport.client import RequestRecord

BRANCHY = AgentsPlan.model_validate({"sessions": 12, "subagents": {"probability": 0.3, "turns": 2}})


def test_the_agenda_is_the_seeds():
    first, again = agenda(BRANCHY), agenda(BRANCHY)
    assert first == again
    assert agenda(BRANCHY.model_copy(update={"seed": 1})) != first
    parents = [s for s in first if s.parent is None]
    assert [s.index for s in parents] == list(range(12)) and parents[0].start_s == 0.0
    assert all(a.start_s < b.start_s for a, b in zip(parents, parents[1:], strict=False))  # Poisson arrivals
    assert all(8 <= len(s.turns) <= 16 for s in parents) and len({len(s.turns) for s in parents}) > 1
    assert all(s.turns[-1].answer == "final" and s.turns[-1].branch is None for s in first)


def test_each_branch_is_a_child_session_numbered_after_the_parents():
    sessions = agenda(BRANCHY)
    children = [s for s in sessions if s.parent is not None]
    assert children and [c.index for c in children] == list(range(12, 12 + len(children)))
    by_index = {s.index: s for s in sessions}
    for child in children:
        turn = by_index[child.parent].turns[child.parent_turn - 1]
        assert turn.branch == child.index and turn.tool == TASK_TOOL and turn.answer == "tool"
        assert turn.answer_tokens == child.turns[-1].output_tokens  # its report is the parent's tool result
        assert len(child.turns) == 2 and all(t.branch is None for t in child.turns)  # one level deep
    assert {t.tool for s in sessions for t in s.turns if t.branch is None} <= set(CALLED_TOOLS)


def test_one_size_changed_leaves_the_other_draws_as_they_were():
    # (the parents' draws: a turn answered by a user spawns no sub-agent, so the children differ)
    more_users = agenda(BRANCHY.model_copy(update={"user_turn_share": 0.5}))[:12]
    same = agenda(BRANCHY)[:12]
    assert [[t.output_tokens for t in s.turns] for s in more_users] == [[t.output_tokens for t in s.turns] for s in same]
    assert sum(t.answer == "user" for s in more_users for t in s.turns) > sum(t.answer == "user" for s in same for t in s.turns)


def test_the_cell_counts_every_turn_of_parents_and_children():
    plan = Plan.model_validate({"decode": None, "prefill": None, "agents": BRANCHY.model_dump()})
    [cell] = plan_cells(plan)
    assert cell.kind == "agents" and cell.n_requests == turn_count(agenda(BRANCHY)) and cell.rate == 0.5


def test_tools_are_padded_to_about_the_plans_size_and_the_same_for_every_session():
    cutter = TextCutter("alpha beta gamma delta " * 400, 4.0)
    small, large = tools(AgentsPlan(tool_schema_tokens=500), cutter), tools(AgentsPlan(tool_schema_tokens=4000), cutter)
    assert [t["function"]["name"] for t in small] == [*CALLED_TOOLS, TASK_TOOL]
    assert len(str(large)) > 3 * len(str(small)) and tools(AgentsPlan(tool_schema_tokens=4000), cutter) == large
    assert tools(AgentsPlan(tool_schema_tokens=0), cutter) == []
    assert cutter.cut(10, 3) == cutter.cut(10, 3) and 30 <= len(cutter.cut(10, 3)) <= 50


def test_a_first_prompt_is_served_what_it_shares_with_sessions_computed_before_it_was_sent():
    rendered = {0: [1, 2, 3, 9], 1: [1, 2, 3, 7, 7], 2: [1, 2, 4], 3: [1, 2, 3, 7, 8]}
    sent = {0: 0.0, 1: 1.0, 2: 2.0, 3: 3.0}
    assert served_prefixes(rendered, sent, {0: 0.5, 1: 1.5, 2: 2.5, 3: 3.5}) == {0: 0, 1: 3, 2: 2, 3: 4}
    # session 1's prompt was still being computed when session 3 was sent, and session 2's never was
    assert served_prefixes(rendered, sent, {0: 0.5, 1: 3.2, 2: None, 3: 3.5}) == {0: 0, 1: 3, 2: 2, 3: 3}


def _turn(session, turn, prompt, cached, completion=16, *, ttft=0.1, t=0.0, parent=None, ideal=None, **extra):
    record = RequestRecord(f"s{session}-t{turn}", "agents", 4, "prose", completion, t_send=t, t_first=t + ttft,
                           t_last=t + ttft + 0.2, prompt_tokens=prompt, completion_tokens=completion,
                           cached_tokens=cached, turn=turn, conversation=session, parent_conversation=parent,
                           ideal_cached_tokens=ideal, t_due=t)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_the_ideal_is_the_extended_turns_prompt_and_output_a_token_short_of_the_prompt():
    base = _turn(0, 1, 1000, 0)
    assert ideal_after(base, _turn(0, 2, 1400, 0), None) == 1016
    assert ideal_after(base, _turn(0, 2, 1010, 0), None) == 1009  # capped: the last prompt token is computed
    assert ideal_after(None, _turn(1, 1, 1200, 0), 800) == 800  # a first turn: its shared prefix
    assert ideal_after(None, _turn(1, 1, 1200, 0), None) is None  # the engine rendered no prompts
    refused = _turn(0, 2, None, None)
    assert ideal_after(base, refused, None) is None


def test_a_turn_overflows_when_its_prompt_and_asked_output_exceed_the_context():
    assert not overflowed(_turn(0, 3, 4000, 0, completion=96), None, 4096)
    assert overflowed(_turn(0, 3, 4001, 0, completion=96), None, 4096)
    refused = _turn(0, 3, None, None)
    refused.completion_tokens, refused.error = None, "BadRequestError: context"
    assert overflowed(refused, 4090, 4096) and not overflowed(refused, None, 4096)


def test_the_cells_figures_are_per_session_then_over_sessions():
    # session 0: TTFTs 0.1 .. 0.5 with a sub-agent's slow turn (1.0) that counts as its own; session 1: all 0.2
    zero = [_turn(0, k, 1000 * k, 900 * k - 100, ttft=0.1 * k, t=float(k), ideal=1000 * k - 100) for k in range(1, 6)]
    child = [_turn(5, 1, 3000, 2000, ttft=1.0, t=2.5, parent=0, ideal=2500)]
    one = [_turn(1, k, 500 * k, 0, ttft=0.2, t=float(k), ideal=400 * k) for k in range(1, 4)]
    figures = agents_figures(zero + child + one)
    assert figures["sessions"] == 2 and figures["subagents"] == 1 and figures["turns"] == 9
    assert session_row(0, zero + child)["p95_turn_ttft_s"] == pytest.approx(1.0)
    assert figures["session_p95_turn_ttft_s"] == pytest.approx((1.0 + 0.2) / 2)  # the median of two sessions
    prompt = 15_000 + 3000 + 3000
    assert figures["ideal_hit_rate"] == pytest.approx((14_500 + 2500 + 2400) / prompt)
    assert figures["measured_hit_rate"] == pytest.approx((13_000 + 2000) / prompt)
    assert figures["overflow_share"] == 0 and figures["parse_failure_share"] is None
    # session 0 runs from its first send (1 s) to its last token (5 + 0.5 + 0.2 s), session 1 from 1 s to 3.4 s
    assert figures["session_turns_per_s"] == pytest.approx((6 / 4.7 + 3 / 2.4) / 2)
    assert hit_rates([_turn(0, 1, 100, 0, ideal=None)]) == (None, 0.0)  # an ideal unknown is not read as 0


def _row(records):
    spec = plan_cells(Plan.model_validate({"decode": None, "prefill": None, "agents": {"sessions": 2}}))[0]
    completion = sum(r.completion_tokens or 0 for r in records if r.ok)
    return summarize_cell(spec, records, Reconciliation("ok", [Check("generated tokens", completion, completion)]))


def test_overflowed_turns_are_counted_apart_and_more_than_one_percent_invalidate():
    served = [_turn(s, k, 1000, 900, t=float(k)) for s in range(2) for k in range(1, 51)]
    refused = _turn(1, 51, None, None, context_overflow=True)
    refused.completion_tokens, refused.error = None, "BadRequestError: exceeds the context"
    row = _row([*served, refused])
    assert row["valid"], row["invalid_reasons"]  # 1 of 101: within 1%, and not a failed request
    truncated = _turn(0, 51, 4000, 900, completion=3, context_overflow=True)
    row = _row([*served, refused, truncated])
    assert row["invalid_codes"] == "context_overflow" and "2 of 102 turns" in row["invalid_reasons"]


def test_asked_tool_calls_that_do_not_parse_invalidate_and_their_length_is_capped():
    asked = [_turn(0, k, 1000, 900, completion=5, tool_call_parsed=True) for k in range(1, 5)]
    asked[0].expected_completion_tokens = 64  # a call ends when it is made: 5 of 64 asked tokens is right
    assert _row(asked)["valid"]
    asked[1].tool_call_parsed = False
    assert _row(asked)["invalid_codes"] == "tool_call_unparsed"
    forced = [_turn(0, 1, 1000, 900, completion=5)]
    forced[0].expected_completion_tokens = 64
    assert _row(forced)["invalid_codes"] == "wrong_length"  # without an asked call the length is forced


class _Delta:
    def __init__(self, content=None, tool_calls=None):
        self.content, self.tool_calls = content, tool_calls


class _Call:
    def __init__(self, index, name=None, arguments=None, id=None):
        self.index, self.id = index, id
        self.function = type("F", (), {"name": name, "arguments": arguments})()


def test_a_reply_keeps_its_text_and_the_calls_that_parse():
    reply = Reply()
    for delta in (_Delta("Let me "), _Delta("look."), _Delta(tool_calls=[_Call(0, "grep", '{"pat', "c1")]),
                  _Delta(tool_calls=[_Call(0, None, 'tern": "x"}')])):
        reply.add(delta)
    assert reply.text == "Let me look."
    assert reply.parsed_calls({"grep"}) == [{"id": "c1", "type": "function",
                                             "function": {"name": "grep", "arguments": '{"pattern": "x"}'}}]
    assert reply.parsed_calls({"read_file"}) == []  # a tool the request did not offer
    broken = Reply()
    broken.add(_Delta(tool_calls=[_Call(0, "grep", '{"pattern": ', "c2")]))
    assert broken.parsed_calls({"grep"}) == []
