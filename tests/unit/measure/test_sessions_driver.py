"""The sessions driver against an engine made here (issue 33): every turn resends the history with the engine's own
reply, the agent's tool call and the tool's result; a sub-agent starts from its parent's history; a turn is due a
think time after the reply it answers; the first prompts' shared prefix comes from the engine's rendering."""

import asyncio
import json

from openai.types.chat import ChatCompletionChunk

from servebook.config import Plan
from servebook.measure.kinds import plan_cells
from servebook.measure.kinds.agents.agenda import TextCutter, agenda, run_salt
from servebook.measure.kinds.agents.sessions import Texts
from servebook.measure.loop import send_cell
from servebook.measure.prompts import filler_text
from servebook.measure.transport.endpoint import Endpoint
from servebook.measure.workloads import Workloads

PLAN = Plan.model_validate({"decode": None, "prefill": None, "agents": {
    "sessions": 3, "arrival_rate_per_s": 5, "turns": 4, "system_tokens": 40, "tool_schema_tokens": 700,
    "repo_map_tokens": 30, "tool_result_tokens": 20, "output_tokens": 3, "user_turn_share": 0.3,
    "think_time": {"distribution": "fixed", "mean_s": 0.05}, "subagents": {"probability": 0.5, "turns": 2}}})


def _chunk(**fields):
    chunk = ChatCompletionChunk.model_validate({"id": "x", "object": "chat.completion.chunk", "created": 0,
                                                "model": "m", **fields})
    return json.loads(chunk.model_dump_json(exclude_none=True))


class _Engine:
    """Answers every chat request (its events, as measure.transport.sse's client gives them) with `max_tokens` words naming the
    request, and counts a prompt as its words; renders a first prompt as the words of its messages."""

    kind, reconciles, usage_omits_zero_cached = "fake", False, False

    def __init__(self):
        self.bodies: list[dict] = []

    def events(self, url, headers, payload, record=None):
        body = json.loads(payload)
        assert url == "http://engine/v1/chat/completions" and body["stream"] is True
        return self.reply(body)

    def reply(self, body):
        max_tokens = body["max_tokens"]
        self.bodies.append(body)
        n = len(self.bodies)
        prompt = sum(len(str(m.get("content") or "").split()) for m in body["messages"])

        async def stream():
            for i in range(max_tokens):
                yield _chunk(choices=[{"index": 0, "delta": {"content": f"r{n}w{i} "}, "finish_reason": None}])
            yield _chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "length"}])
            yield _chunk(choices=[], usage={"prompt_tokens": prompt, "completion_tokens": max_tokens,
                                            "total_tokens": prompt + max_tokens,
                                            "prompt_tokens_details": {"cached_tokens": 0}})
        return stream()

    def request_extras(self, output_tokens):
        return {"ignore_eos": True}

    def stream_options(self):
        return {"include_usage": True}

    def server_timings(self, extra):
        return None

    async def tokenize(self, http, base_url, text, model, headers):
        return list(range(len(text.split())))

    async def render_chat(self, http, base_url, body, headers):
        return [hash(w) for m in body["messages"] for w in str(m["content"]).split()]


def _system_words():
    text = filler_text()
    texts = Texts(PLAN.agents, TextCutter(text, len(text) / len(text.split())), run_salt("run-1:agents:1"))
    return len(texts.system(0).split())


def _run():
    engine = _Engine()
    endpoint = Endpoint("http://engine", engine, context_tokens=100_000)  # type: ignore[arg-type]
    workloads = Workloads(endpoint, PLAN, "run-1", engine, None, "m", engine)  # type: ignore[arg-type]
    spec = plan_cells(PLAN)[0]
    records = asyncio.run(send_cell(workloads, spec, lambda: None))
    return engine, records


def test_every_turn_resends_the_history_with_the_engines_reply_the_call_and_its_result():
    engine, records = _run()
    by_id = {r.request_id: r for r in records}
    assert len(records) == len(engine.bodies) == plan_cells(PLAN)[0].n_requests
    assert all(r.ok and not r.context_overflow and r.tool_call_parsed is None for r in records)
    sent = {json.dumps(b["messages"][:2]): b for b in engine.bodies}
    assert len({json.dumps(b["messages"][0]) for b in engine.bodies}) == 1  # one system prompt, shared
    assert len(sent) >= 3
    for body in engine.bodies:
        assert body["tools"] and body["tool_choice"] == "auto" and body["ignore_eos"] is True
        messages = body["messages"]
        for before, after in zip(messages, messages[1:], strict=False):
            if before["role"] == "assistant":
                assert before["content"].startswith("r") and len(before["content"].split()) == 3  # the reply
                if "tool_calls" in before:
                    assert after == {"role": "tool", "tool_call_id": before["tool_calls"][0]["id"],
                                     "content": after["content"]}
                else:
                    assert after["role"] == "user"  # a follow-up, or a sub-agent's brief
    spawning = {(s.parent, s.parent_turn) for s in agenda(PLAN.agents) if s.parent is not None}
    for r in records:
        if r.turn > 1 and r.parent_conversation is None:
            previous = by_id[f"agents-s{r.conversation}-t{r.turn - 1}"]
            assert r.ideal_cached_tokens == previous.prompt_tokens + previous.completion_tokens
            if (r.conversation, r.turn - 1) not in spawning:  # (after a sub-agent: when its report is in)
                assert r.t_due == previous.t_last + 0.05  # the think time after the reply it answers


def _reply(engine, body):
    n = engine.bodies.index(body) + 1
    return "".join(f"r{n}w{i} " for i in range(3))


def test_a_sub_agent_starts_from_its_parents_history_and_reports_back():
    engine, records = _run()
    children = [s for s in agenda(PLAN.agents) if s.parent is not None]
    assert children, "the plan's seed spawns sub-agents"
    for child in children:
        own = [b for b in engine.bodies if any(str(m["content"]).startswith(f"Sub-task {child.index} ")
                                               for m in b["messages"])]
        parent = [b for b in engine.bodies if b["messages"][1]["content"].startswith(f"Session {child.parent}:")
                  and not any(str(m["content"]).startswith("Sub-task ") for m in b["messages"])]
        spawned, resumed = parent[child.parent_turn - 1], parent[child.parent_turn]
        first, last = own[0], own[-1]
        assert len(own) == 2
        # the parent's history and reply, its call to the sub-agent left out, then the brief
        assert first["messages"][:-2] == spawned["messages"]
        assert first["messages"][-2] == {"role": "assistant", "content": _reply(engine, spawned)}
        # the parent goes on with its call to the sub-agent answered by the sub-agent's last reply
        call, result = resumed["messages"][-2:]
        assert call["tool_calls"][0]["function"]["name"] == "task"
        assert result == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": _reply(engine, last)}
    served = [r for r in records if r.parent_conversation is not None and r.turn == 1]
    assert all(r.ideal_cached_tokens for r in served)


def test_first_turns_are_served_their_prefix_shared_with_sessions_served_before():
    _, records = _run()
    firsts = sorted((r for r in records if r.turn == 1 and r.parent_conversation is None), key=lambda r: r.t_send)
    assert firsts[0].ideal_cached_tokens == 0
    # the shared system prompt (its words, as the engine here renders and counts them), and "Session"
    for r in firsts[1:]:
        assert any(other.t_first <= r.t_send for other in firsts if other is not r)
        assert r.ideal_cached_tokens == _system_words() + 1


class _CallingEngine(_Engine):
    """Asked for a call, it makes one on odd requests and a broken one on even ones."""

    def reply(self, body):
        if body.get("tool_choice") != "required":
            return super().reply(body)
        self.bodies.append(body)
        n = len(self.bodies)
        arguments = '{"path": "a.py"}' if n % 2 else '{"path": '

        async def stream():
            yield _chunk(choices=[{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
                {"index": 0, "id": f"model_{n}", "type": "function",
                 "function": {"name": "read_file", "arguments": arguments}}]}}])
            yield _chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
            yield _chunk(choices=[], usage={"prompt_tokens": 50, "completion_tokens": 2, "total_tokens": 52,
                                            "prompt_tokens_details": {"cached_tokens": 0}})
        return stream()


def test_asked_for_calls_the_engine_makes_them_and_those_that_do_not_parse_are_counted():
    plan = PLAN.model_copy(update={"agents": PLAN.agents.model_copy(update={"tool_calls": "model", "subagents": None,
                                                                            "user_turn_share": 0.0})})
    engine = _CallingEngine()
    workloads = Workloads(Endpoint("http://engine", engine), plan, "run-1", engine, None, "m", engine)  # type: ignore[arg-type]
    records = asyncio.run(send_cell(workloads, plan_cells(plan)[0], lambda: None))
    asked = [r for r in records if r.tool_call_parsed is not None]
    assert len(asked) == 9 and {r.tool_call_parsed for r in asked} == {True, False}  # 3 sessions of 3 tool turns
    for body in engine.bodies:
        asks = body.get("tool_choice") == "required"
        assert ("ignore_eos" in body) != asks  # an asked call ends the reply: its length is capped, not forced
        calls = [m["tool_calls"][0]["id"] for m in body["messages"] if m.get("tool_calls")]
        # a call that parsed goes on in the history as the engine made it; one that did not, as the agent would have
        assert all(c.startswith(("model_", "call_")) for c in calls)
        assert all(int(c.split("_")[1]) % 2 for c in calls if c.startswith("model_"))


def test_sessions_with_their_own_system_prompts_share_only_the_opening():
    plan = PLAN.model_copy(update={"agents": PLAN.agents.model_copy(update={"shared_system_prompt": False})})
    engine = _Engine()
    workloads = Workloads(Endpoint("http://engine", engine), plan, "run-1", engine, None, "m", engine)  # type: ignore[arg-type]
    records = asyncio.run(send_cell(workloads, plan_cells(plan)[0], lambda: None))
    systems = {b["messages"][0]["content"] for b in engine.bodies}
    assert len(systems) == 3 and all(s.startswith("Session ") for s in systems)
    firsts = [r for r in records if r.turn == 1 and r.parent_conversation is None]
    assert sorted(r.ideal_cached_tokens for r in firsts) == [0, 1, 1]  # the word "Session", as the engine here counts
