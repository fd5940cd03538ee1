"""Agent sessions sent against an engine: open-loop arrivals, histories that grow with the engine's own replies.

Each turn is one streamed chat request carrying the session's whole history and the tool schemas. Its reply comes
back as text (the engine's, forced to the turn's drawn length); after the turn's think time the next turn resends the
history with that reply, the agent's tool call, and the tool's result (or a user's follow-up) appended.

Who makes the tool call (plan.agents.tool_calls): `client` (the default) appends the call an agent would have made
to the engine's reply, since a random-weight model makes none; what is measured is then the serving of an agent's
traffic, not the model's ability to call tools. `model` asks the engine for a call (tool_choice required, the
length capped rather than forced), records whether one came back that parses, and goes on with the client's call
where none did.

A sub-agent copies its parent's history up to the parent's reply (its tool call left out), is handed a brief,
runs its own turns, and its last reply is the parent's tool result. The ideal cached tokens of a turn are those of
the turn its history extends: that turn's prompt as the engine counted it and the tokens it generated (what an
unbounded prefix cache holds, if the reply sent back as text tokenizes to the tokens generated); a session's first
turn is served the longest prefix it shares with the first prompts of other sessions that had their first token
before it was sent, as the engine renders them.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ....config.agents import AgentsPlan
from ...prompts import filler_text
from ...transport.client import PREPARE_AHEAD_S, RequestRecord
from ...transport.direct import stream_direct
from .agenda import SessionAgenda, TextCutter, Turn, agenda, run_salt, served_prefixes, tool_call, tools

if TYPE_CHECKING:
    from ...contract import CellSpec, OnDone, Requests

#: between building every session's first prompt and the first arrival
LEAD_S = 0.25


@dataclass
class Reply:
    """One streamed reply as it arrives: its text, and the tool calls the engine parsed from it (by index)."""

    parts: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)

    def add(self, delta: Any) -> None:
        if delta.content:
            self.parts.append(delta.content)
        for call in delta.tool_calls or []:
            held = self.calls.setdefault(call.index or 0, {"id": "", "name": "", "arguments": ""})
            held["id"] = call.id or held["id"]
            if call.function is not None:
                held["name"] += call.function.name or ""
                held["arguments"] += call.function.arguments or ""

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def parsed_calls(self, names: set[str]) -> list[dict[str, Any]]:
        """The engine's calls, as history entries, if every one names a tool and its arguments parse as an object."""
        out = []
        for index in sorted(self.calls):
            call = self.calls[index]
            try:
                arguments = json.loads(call["arguments"] or "{}")
            except json.JSONDecodeError:
                return []
            if call["name"] not in names or not isinstance(arguments, dict):
                return []
            out.append({"id": call["id"] or f"call_{index}", "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"] or "{}"}})
        return out


def ideal_after(base: RequestRecord | None, record: RequestRecord, first: int | None) -> int | None:
    """What a perfect prefix cache serves of `record`'s prompt: the prompt and output of the turn it extends
    (`base`), or for a session's first turn its prefix shared with earlier sessions (`first`); never more than one
    token short of its prompt (an engine computes the last prompt token to sample the first output)."""
    if record.prompt_tokens is None:
        return None
    if base is None:
        served = first
    elif base.prompt_tokens is None or base.completion_tokens is None:
        served = None
    else:
        served = base.prompt_tokens + base.completion_tokens
    return None if served is None else max(0, min(served, record.prompt_tokens - 1))


class Texts:
    """The session's words: the shared system prompt, each session's task, tool results, follow-ups, briefs."""

    def __init__(self, plan: AgentsPlan, cutter: TextCutter, salt: str):
        self.plan, self.cutter, self.salt = plan, cutter, salt

    def system(self, session: int) -> str:
        """The system prompt: the same for every session, or (not shared) opening with the session's own words."""
        own = "" if self.plan.shared_system_prompt else f"Session {session}'s own instructions. "
        return (f"{own}[{self.salt}] You are a coding agent working in a user's repository. Use the tools to read, "
                f"search, edit and test the code; answer briefly.\n\n{self.cutter.cut(self.plan.system_tokens, 1)}")

    def opening(self, session: int) -> list[dict[str, Any]]:
        task = (f"Session {session}: make the failing test pass.\n\nRepository map:\n"
                f"{self.cutter.cut(self.plan.repo_map_tokens, 1000 + session)}")
        return [{"role": "system", "content": self.system(session)}, {"role": "user", "content": task}]

    def result(self, session: int, turn: int, tokens: int, tool: str) -> str:
        return f"[{tool} output, session {session}, turn {turn}]\n{self.cutter.cut(tokens, session * 1009 + turn)}"

    def follow_up(self, session: int, turn: int) -> str:
        return f"Follow-up {turn}: {self.cutter.cut(self.plan.user_tokens, 500_000 + session * 1009 + turn)}"

    def brief(self, child: int, parent: int, turn: int) -> str:
        assert self.plan.subagents is not None
        return (f"Sub-task {child} from session {parent}, turn {turn}: "
                f"{self.cutter.cut(self.plan.subagents.brief_tokens, 900_000 + child)}")


class SessionDriver:
    """One agents cell: every session of the plan's agenda, each a task on one event loop."""

    def __init__(self, workloads: "Requests", spec: "CellSpec", plan: AgentsPlan, on_done: "OnDone", salt: str):
        self.workloads, self.spec, self.plan, self.on_done = workloads, spec, plan, on_done
        self.salt = salt
        self.sessions = agenda(plan)
        self.by_index = {s.index: s for s in self.sessions}
        self.records: list[RequestRecord] = []

    async def prepare(self) -> None:
        """What the sessions need before the clock starts: the texts, the tools, and every session's first prompt as
        the engine renders it, for its ideal (none where the engine renders none)."""
        text = filler_text()
        tokens = await self.workloads.filler("prose")  # the same text, tokenized once per run
        self.texts = Texts(self.plan, TextCutter(text, len(text) / max(1, len(tokens))), self.salt)
        self.tools = tools(self.plan, self.texts.cutter)
        self.names = {t["function"]["name"] for t in self.tools}
        endpoint = self.workloads.endpoint
        self.rendered: dict[int, list[int]] | None = {}
        for session in (s for s in self.sessions if s.parent is None):
            body: dict[str, Any] = {"messages": self.texts.opening(session.index)}
            if self.tools:
                body["tools"] = self.tools
            tokens_of = await endpoint.adapter.render_chat(self.workloads.http, endpoint.base_url, body, endpoint.auth)
            if tokens_of is None:
                self.rendered = None
                return
            self.rendered[session.index] = tokens_of

    async def run(self) -> list[RequestRecord]:
        await self.prepare()
        start = time.monotonic() + LEAD_S
        parents = [s for s in self.sessions if s.parent is None]
        # No full collection during the cell: each walked every object of the process (its modules, tables, the
        # sessions' histories) and held the event loop 100 to 225 ms, four times in a 256-session cell, and the turns
        # due meanwhile left that late. The young generations are still collected; the rest once the cell is over.
        thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
        try:
            await asyncio.gather(*(self.session(s, start + s.start_s, self.texts.opening(s.index), None)
                                   for s in parents))
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
        self._first_turn_ideals()
        return sorted(self.records, key=lambda r: (r.t_due or 0.0, r.conversation or 0, r.turn or 0))

    def _first_turn_ideals(self) -> None:
        """The parents' first turns: served what other sessions' first prompts, computed before they were sent,
        share with them (known only once every session has run); unknown where the engine rendered no prompts."""
        firsts = {r.conversation: r for r in self.records if r.turn == 1 and r.parent_conversation is None}
        if self.rendered is None:
            return
        served = served_prefixes(self.rendered, {s: r.t_send for s, r in firsts.items() if s is not None},
                                 {s: r.t_first for s, r in firsts.items() if s is not None})
        for session, record in firsts.items():
            record.ideal_cached_tokens = ideal_after(None, record, served.get(session or 0))

    def _request_body(self, turn: Turn) -> tuple[int, dict[str, Any]]:
        """(max_tokens, extra body) of a turn: its tools, and its length forced (client calls) or capped."""
        endpoint = self.workloads.endpoint
        asks_call = self.plan.tool_calls == "model" and turn.answer == "tool"
        extra: dict[str, Any] = dict(endpoint.request_extras) if asks_call else endpoint.extras(turn.output_tokens)
        if self.tools:
            extra |= {"tools": self.tools, "tool_choice": "required" if asks_call else "auto"}
        return turn.output_tokens, extra

    async def session(self, agenda_: SessionAgenda, due: float, history: list[dict[str, Any]],
                      base: RequestRecord | None) -> str:
        """Send the session's turns in order from `due`; its last reply's text (a sub-agent's report)."""
        reply, added = Reply(), "\n".join(str(m.get("content") or "") for m in history[-1 if base else 0:])
        for k, turn in enumerate(agenda_.turns, 1):
            record, reply = await self._turn(agenda_, k, turn, due, history, base, added)
            if not record.ok or record.context_overflow:
                for _ in agenda_.turns[k:]:
                    self.on_done()  # the session cannot go on: what it would have sent is not sent
                return reply.text
            if turn.answer == "final":
                break
            base, due = record, (record.t_last or time.monotonic()) + turn.think_s
            assistant: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if turn.answer == "user":
                added = self.texts.follow_up(agenda_.index, k)
                history = [*history, assistant, {"role": "user", "content": added}]
                continue
            calls = reply.parsed_calls(self.names) if record.tool_call_parsed else [
                tool_call(turn.tool, agenda_.index, k)]
            if turn.branch is None:
                added = self.texts.result(agenda_.index, k, turn.answer_tokens, turn.tool)
            else:
                child = self.by_index[turn.branch]
                brief = {"role": "user", "content": self.texts.brief(child.index, agenda_.index, k)}
                added = await self.session(child, due, [*history, assistant, brief], record)
                due = time.monotonic()
            history = [*history, {**assistant, "tool_calls": calls},
                       {"role": "tool", "tool_call_id": calls[0]["id"], "content": added}]
        return reply.text

    async def _turn(self, agenda_: SessionAgenda, k: int, turn: Turn, due: float, history: list[dict[str, Any]],
                    base: RequestRecord | None, added: str) -> tuple[RequestRecord, Reply]:
        """One turn at `due`: `added` is the text its history holds beyond the turn it extends (`base`)."""
        max_tokens, extra = self._request_body(turn)
        workloads = self.workloads
        record = workloads.record(self.spec, f"{self.spec.cell_id}-s{agenda_.index}-t{k}", max_tokens, turn=k,
                                  conversation=agenda_.index, parent_conversation=agenda_.parent, t_due=due)
        reply = Reply()
        self.records.append(record)
        await asyncio.sleep(max(0.0, due - PREPARE_AHEAD_S - time.monotonic()))
        # without the SDK (direct.stream_direct): its preparation of a 26-message history took 30 ms of the event
        # loop a turn, and 256 sessions' turns left seconds late
        endpoint = workloads.endpoint
        await stream_direct(workloads.streams, endpoint.base_url, endpoint.auth, record, workloads.request(
            max_tokens, messages=history, extra_body=extra, on_delta=reply.add))
        if self.plan.tool_calls == "model" and turn.answer == "tool":
            record.tool_call_parsed = bool(reply.parsed_calls(self.names))
        if base is not None:  # a parent's first turn is judged when every session has run (_first_turn_ideals)
            record.ideal_cached_tokens = ideal_after(base, record, None)
        context = workloads.endpoint.context_tokens
        if context is not None:
            # refused: the prompt held at least the turn it extends and the added text (counted only then)
            floor = None if record.prompt_tokens is not None else \
                (0 if base is None else (base.prompt_tokens or 0) + (base.completion_tokens or 0)) \
                + await self._count(added)
            record.context_overflow = overflowed(record, floor, context)
        self.on_done()
        return record, reply

    async def _count(self, text: str) -> int:
        try:
            return len(await self.workloads.tokenize(text))
        except Exception:  # noqa: BLE001 - a tokenizer that fails now leaves the floor at what is known
            return 0


def overflowed(record: RequestRecord, floor: int | None, context: int) -> bool:
    """Whether the turn did not fit the engine's context per request: its prompt as the engine counted it, or where
    the engine refused it the least it held (`floor`), with its asked output."""
    prompt = record.prompt_tokens if record.prompt_tokens is not None else floor
    return prompt is not None and prompt + record.expected_completion_tokens > context


async def send_sessions(workloads: "Requests", spec: "CellSpec", on_done: "OnDone") -> list[RequestRecord]:
    plan = workloads.plan.agents
    assert plan is not None  # an agents cell exists only with an agents section
    # a salt per attempt: a cell measured again (remeasure_disturbed) must not find the first attempt's prompts
    attempt = workloads.cache["agents_attempts"] = workloads.cache.get("agents_attempts", 0) + 1
    driver = SessionDriver(workloads, spec, plan, on_done, run_salt(f"{workloads.tag}:{spec.cell_id}:{attempt}"))
    return await driver.run()
