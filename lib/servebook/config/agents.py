"""Concurrent agent sessions: what a plan's `agents` section asks for.

Sessions arrive open-loop (Poisson, at `arrival_rate_per_s`), each a sequence of chat turns whose history grows with
the engine's real replies: the request carries the tool schemas, the answer is followed by a think time (the tool
running, or the user reading), then the tool's result (or a user's follow-up) is appended and the next turn sent.
Now and then a turn spawns a sub-agent: a short child session that starts from a copy of the parent's history. Every
size and time is drawn from the plan's seed before the cell starts (measure.kinds.agents.agenda), so two runs of
one plan send the same sessions. The defaults are shaped like a coding agent (`data/plans/coding-agent.yaml` spells
them out).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from .load import Lengths
from .strict import StrictModel

#: the most text tokens the sessions may hold of their own (about 4 bytes a token as Python text: under a GiB)
MAX_TEXT_TOKENS = 200_000_000
#: the most turns one cell may plan (every turn's request and its record are held until the cell ends)
MAX_REQUESTS = 100_000
#: the longest an agents cell may plan (its arrivals and one session's thinking): past it, a plan is a mistake
MAX_CELL_S = 4 * 3600.0


class ThinkTime(StrictModel):
    """The pause between a reply and the next turn: the tool running or the user reading. `exponential` with the
    mean (seeded), or `fixed`."""

    distribution: Literal["exponential", "fixed"] = "exponential"
    mean_s: float = Field(2.0, ge=0, le=600)
    max_s: float = Field(30.0, gt=0, le=3600, description="a drawn pause is cut to this")


class SubAgents(StrictModel):
    """Sub-agent branches: after a parent's turn, with `probability`, a child session starts from a copy of the
    parent's history (its system prompt, tools and turns so far, the reply included), is handed a brief of
    `brief_tokens`, runs `turns` turns, and its last reply comes back to the parent as that turn's tool result. The
    parent waits for it, as a coding agent waits for the task it delegated."""

    probability: float = Field(0.05, ge=0, le=1, description="per parent turn (the last turn never branches)")
    turns: int = Field(3, ge=1, le=64)
    brief_tokens: int = Field(120, ge=8, le=65_536)


class AgentsPlan(StrictModel):
    """Agent sessions measured as one cell. Token sizes are approximate where they are text (the system prompt, the
    tool schemas, the repo map, tool results): the engine's own count of each prompt is what the figures use."""

    sessions: int = Field(16, ge=1, le=4096, description="parent sessions in the cell (sub-agents come on top)")
    arrival_rate_per_s: float = Field(0.5, gt=0, le=1000, description="sessions start at Poisson arrivals of this "
                                                                      "rate (open loop, whatever the engine's pace)")
    turns: Lengths = Lengths(distribution="uniform", mean=12, low=8, high=16)
    system_tokens: int = Field(2500, ge=16, le=1_000_000, description="the system prompt (shared_system_prompt: the "
                                                                      "same in every session)")
    shared_system_prompt: bool = Field(
        True, description="sessions share their system prompt (and the tool schemas after it), as one agent's "
                          "sessions do; false: each opens with its own (a user's own instructions), so sessions share "
                          "nothing but the chat template's opening, and each needs only its own history cached")
    tool_schema_tokens: int = Field(2000, ge=0, le=1_000_000,
                                    description="the tool schemas every request carries (the shipped coding tools, "
                                                "their descriptions padded to about this many tokens; 0: no tools)")
    repo_map_tokens: int = Field(3000, ge=0, le=1_000_000, description="the session's own first user message: its "
                                                                       "task and a map of its repository")
    tool_result_tokens: Lengths = Lengths(distribution="lognormal", mean=700, cv=1.0, low=20, high=8000)
    output_tokens: Lengths = Lengths(distribution="lognormal", mean=160, cv=0.6, low=16, high=1024)
    user_turn_share: float = Field(0.1, ge=0, le=1, description="turns answered by a user's follow-up of "
                                                                "user_tokens, not by a tool's result")
    user_tokens: int = Field(60, ge=4, le=65_536)
    think_time: ThinkTime = ThinkTime()
    subagents: SubAgents | None = SubAgents()
    tool_calls: Literal["client", "model"] = Field(
        "client", description="who makes each turn's tool call. client: the reply is the engine's, forced to its "
                              "drawn length, and servebook appends the call an agent would have made (a random-weight "
                              "model cannot make one); model: the request asks for a call (tool_choice required, "
                              "length capped, not forced) and a reply without one that parses is counted")
    max_lag_ms: float = Field(50.0, gt=0, description="more than 5% of turns sent later than this after they were due "
                                                       "make the cell invalid (client_lag)")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="the seed every drawn figure comes from")

    # json_schema_input_type: the JSON Schema (config.schemas) accepts the number too
    @field_validator("turns", "tool_result_tokens", "output_tokens", mode="before", json_schema_input_type=Lengths | int)
    @classmethod
    def _length_or_number(cls, value: object) -> object:
        # `turns: 6` is a fixed count
        return {"mean": value} if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _bounded(self) -> "AgentsPlan":
        """What the cell would hold in memory and take in time, refused before launch when past what one client
        process can hold or a plan should run unsaid (4096 sessions of 1M-token texts reached MemoryError after the
        engine was up; 512 turns of 600 s pauses planned 85 hours)."""
        text = self.session_text_tokens() * self.sessions + (self.system_tokens + self.tool_schema_tokens)
        if text > MAX_TEXT_TOKENS:
            raise ValueError(f"agents: the sessions' own texts come to about {text:,} tokens (sessions x (repo_map_tokens"
                             f"{'' if self.shared_system_prompt else ' + system_tokens + tool_schema_tokens'})), past "
                             f"the {MAX_TEXT_TOKENS:,} one client holds in memory; fewer sessions or shorter texts")
        requests = self.expected_requests()
        if requests > MAX_REQUESTS:
            raise ValueError(f"agents: about {requests:,.0f} turns planned (sessions x turns, sub-agents' turns on "
                             f"top), past the {MAX_REQUESTS:,} one cell holds; fewer sessions, turns or sub-agents")
        hours = self.expected_duration_s() / 3600
        if hours * 3600 > MAX_CELL_S:
            raise ValueError(f"agents: the cell would take about {hours:,.1f} hours (sessions arriving over "
                             f"{self.sessions / self.arrival_rate_per_s:,.0f} s, then {self.turns.mean} turns of "
                             f"{self.think_time.mean_s:g} s pauses), past the {MAX_CELL_S / 3600:g} hours a cell may "
                             "plan; fewer turns, shorter think_time or a higher arrival_rate_per_s")
        return self

    def session_text_tokens(self) -> int:
        """The text a session holds of its own (its first message; its system prompt and tools when not shared)."""
        own = self.repo_map_tokens
        return own if self.shared_system_prompt else own + self.system_tokens + self.tool_schema_tokens

    def expected_requests(self) -> float:
        """About how many turns the cell sends: each parent turn but the last may branch into a sub-agent's."""
        branch = self.subagents.probability * self.subagents.turns if self.subagents else 0.0
        return self.sessions * (self.turns.mean + max(self.turns.mean - 1, 0) * branch)

    def expected_duration_s(self) -> float:
        """About how long the cell runs: the sessions' arrivals, then a session's turns of thinking (the engine's
        own time on top, which a plan cannot know)."""
        return self.sessions / self.arrival_rate_per_s + self.turns.mean * self.think_time.mean_s

    @model_validator(mode="after")
    def _sizes(self) -> "AgentsPlan":
        if (self.turns.low or self.turns.mean) < 1 or self.turns.longest > 512:
            raise ValueError("agents.turns: between 1 and 512 turns per session")
        if (self.output_tokens.low or self.output_tokens.mean) < 2:
            raise ValueError("agents.output_tokens: at least 2 tokens per turn, so that every turn has a decode rate")
        if self.tool_calls == "model" and not self.tool_schema_tokens:
            raise ValueError("agents.tool_calls: model asks the engine for tool calls, which needs tools "
                             "(tool_schema_tokens above 0)")
        return self

    def longest_session_tokens(self) -> int:
        """A session's context at its longest drawn sizes, for reading a plan, not for refusing one: a drawn session
        is far shorter, and a turn that overflows the context is counted when it happens (context_overflow)."""
        turns = self.turns.longest
        return (self.system_tokens + self.tool_schema_tokens + self.repo_map_tokens
                + turns * (self.tool_result_tokens.longest + self.output_tokens.longest))
