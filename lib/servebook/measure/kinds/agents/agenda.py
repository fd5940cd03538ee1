"""What agent sessions will do, drawn from the plan's seed before the cell starts: arrivals, turns, sizes, pauses,
sub-agent branches, and the text and tools they carry.

Every quantity has its own seeded stream per session (`[seed, stream, session]`), so one plan sends the same
sessions in every run, and changing one size of a plan leaves the others as they were drawn. The texts are cut from
the shipped corpora at word boundaries, sized by the corpus's own characters per token (the engine's tokenizer
counts each prompt exactly; the figures use its counts).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from ....config.agents import AgentsPlan, ThinkTime
from ....config.load import Lengths

Answer = Literal["tool", "user", "final"]
#: the tool a sub-agent branch is called through; the others are the ones a turn's call picks from
TASK_TOOL = "task"


@dataclass(frozen=True)
class Turn:
    output_tokens: int
    #: how the reply is answered: a tool's result, a user's follow-up, or not at all (the session's last turn)
    answer: Answer
    #: the answer's size in tokens (a tool result or a follow-up), approximate: it is text
    answer_tokens: int
    #: the pause after the reply before the answer is sent with the next turn
    think_s: float
    #: the tool the agent calls (tool answers)
    tool: str
    #: the sub-agent session this turn spawns, whose last reply is the turn's tool result (None: no branch)
    branch: int | None = None


@dataclass(frozen=True)
class SessionAgenda:
    index: int
    #: parents: when the session starts, from the cell's start (children start when their parent spawns them: 0)
    start_s: float
    turns: tuple[Turn, ...]
    parent: int | None = None
    #: a child's parent turn (1-based), after whose reply it starts
    parent_turn: int | None = None


def _rng(plan: AgentsPlan, *key: int) -> Any:
    import numpy as np

    return np.random.default_rng([plan.seed, *key])


def draw_lengths(rng: Any, spec: Lengths, n: int) -> list[int]:
    """`n` lengths as the plan's distribution draws them (fixed, uniform on [low, high], or lognormal by mean and
    CV), clipped to [low, high]."""
    if spec.distribution == "fixed":
        values = [float(spec.mean)] * n
    elif spec.distribution == "uniform":
        values = list(rng.uniform(spec.low, (spec.high or spec.mean) + 1, n))
    else:
        sigma = math.sqrt(math.log(1 + spec.cv ** 2))
        values = list(rng.lognormal(math.log(spec.mean) - sigma ** 2 / 2, sigma, n))
    low, high = spec.low or 1, spec.high or 1 << 30
    return [int(min(max(math.floor(v) if spec.distribution == "uniform" else round(v), low), high)) for v in values]


def draw_think(rng: Any, spec: ThinkTime, n: int) -> list[float]:
    if spec.distribution == "fixed":
        return [min(spec.mean_s, spec.max_s)] * n
    return [float(min(t, spec.max_s)) for t in rng.exponential(spec.mean_s, n)] if spec.mean_s else [0.0] * n


def _turns(plan: AgentsPlan, key: tuple[int, ...], count: int, branching: bool) -> list[Turn]:
    """`count` turns of one session, each quantity from its own stream."""
    outputs = draw_lengths(_rng(plan, *key, 0), plan.output_tokens, count)
    results = draw_lengths(_rng(plan, *key, 1), plan.tool_result_tokens, count)
    users = list(_rng(plan, *key, 2).random(count) < plan.user_turn_share)
    thinks = draw_think(_rng(plan, *key, 3), plan.think_time, count)
    picks = list(_rng(plan, *key, 4).integers(0, len(CALLED_TOOLS), count))
    branches = list(_rng(plan, *key, 5).random(count) < (plan.subagents.probability if plan.subagents else 0.0))
    out = []
    for k in range(count):
        last = k == count - 1
        answer: Answer = "final" if last else "user" if users[k] else "tool"
        branch = branching and not last and answer == "tool" and bool(branches[k])
        size = 0 if last else plan.user_tokens if answer == "user" else results[k]
        out.append(Turn(outputs[k], answer, size, thinks[k],
                        TASK_TOOL if branch else CALLED_TOOLS[int(picks[k])], branch=-1 if branch else None))
    return out


def agenda(plan: AgentsPlan) -> list[SessionAgenda]:
    """Every session of the cell: the parents in arrival order (the first at 0 s), then their sub-agents, numbered on
    from the parents in the order they are spawned."""
    gaps = _rng(plan, 0).exponential(1.0 / plan.arrival_rate_per_s, plan.sessions)
    starts = [0.0] + [float(t) for t in gaps[1:].cumsum()] if plan.sessions > 1 else [0.0]
    counts = draw_lengths(_rng(plan, 1), plan.turns, plan.sessions)
    parents: list[SessionAgenda] = []
    children: list[SessionAgenda] = []
    next_child = plan.sessions
    for s in range(plan.sessions):
        turns = _turns(plan, (2, s), counts[s], branching=plan.subagents is not None)
        numbered = []
        for k, turn in enumerate(turns, 1):
            if turn.branch is None:
                numbered.append(turn)
                continue
            assert plan.subagents is not None
            child = _turns(plan, (3, s, k), plan.subagents.turns, branching=False)
            children.append(SessionAgenda(next_child, 0.0, tuple(child), parent=s, parent_turn=k))
            # the pause is the one before the child starts; the parent goes on when the child's last reply is in
            numbered.append(Turn(turn.output_tokens, turn.answer, child[-1].output_tokens, turn.think_s, turn.tool,
                                 branch=next_child))
            next_child += 1
        parents.append(SessionAgenda(s, starts[s], tuple(numbered)))
    return parents + children


def turn_count(sessions: list[SessionAgenda]) -> int:
    return sum(len(s.turns) for s in sessions)


def run_salt(tag: str) -> str:
    """A short mark of the run and attempt that opens the system prompt: no earlier attempt or run on the same
    engine (attached, or a cell measured again) left these prompts in its cache."""
    return hashlib.sha256(f"agents:{tag}".encode()).hexdigest()[:8]


@dataclass(frozen=True)
class TextCutter:
    """Text of about n tokens, cut from `text` at word boundaries, the same for the same key."""

    text: str
    chars_per_token: float

    def cut(self, tokens: int, key: int) -> str:
        if tokens <= 0:
            return ""
        want = max(1, round(tokens * self.chars_per_token))
        doubled = self.text * (want // max(1, len(self.text)) + 2)
        start = (key * 7919) % len(self.text)
        while start > 0 and not self.text[start - 1].isspace():
            start -= 1
        end = start + want
        while end < len(doubled) and not doubled[end].isspace():
            end += 1
        return doubled[start:end].strip()


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


_STR = {"type": "string"}
#: a coding agent's tools, as such agents declare them (their descriptions are padded to the plan's size)
CODING_TOOLS: tuple[dict[str, Any], ...] = (
    _tool("read_file", "Read a file of the repository, optionally a range of its lines.",
          {"path": _STR, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, ["path"]),
    _tool("edit_file", "Replace an exact string in a file with another.",
          {"path": _STR, "old": _STR, "new": _STR}, ["path", "old", "new"]),
    _tool("write_file", "Write a whole file.", {"path": _STR, "content": _STR}, ["path", "content"]),
    _tool("run_shell", "Run a shell command in the repository and return its output.",
          {"command": _STR, "timeout_s": {"type": "number"}}, ["command"]),
    _tool("grep", "Search the repository's files for a regular expression.",
          {"pattern": _STR, "path": _STR, "glob": _STR}, ["pattern"]),
    _tool("list_dir", "List a directory of the repository.", {"path": _STR}, ["path"]),
    _tool(TASK_TOOL, "Hand a self-contained sub-task to a sub-agent and wait for its report.",
          {"description": _STR, "prompt": _STR}, ["description", "prompt"]),
)
CALLED_TOOLS: tuple[str, ...] = tuple(t["function"]["name"] for t in CODING_TOOLS if t["function"]["name"] != TASK_TOOL)
#: tokens a tool's JSON schema takes besides its description, for padding the descriptions to the plan's size
_SCHEMA_TOKENS = 60


def tools(plan: AgentsPlan, cutter: TextCutter) -> list[dict[str, Any]]:
    """The tool schemas every request carries, their descriptions padded to about `tool_schema_tokens` in all;
    none when the plan asks for no tools. The same in every session (a prefix they share)."""
    if not plan.tool_schema_tokens:
        return []
    pad = max(0, plan.tool_schema_tokens // len(CODING_TOOLS) - _SCHEMA_TOKENS)
    out = []
    for i, tool in enumerate(CODING_TOOLS):
        function = dict(tool["function"])
        function["description"] = f"{function['description']} {cutter.cut(pad, 100 + i)}".strip()
        out.append({"type": "function", "function": function})
    return out


def call_arguments(tool: str, session: int, turn: int) -> dict[str, Any]:
    """The arguments the client's call of `tool` carries: small, and the same for the same turn in every run."""
    path = f"src/module_{(session * 31 + turn) % 97}.py"
    return {"read_file": {"path": path}, "edit_file": {"path": path, "old": "return None", "new": "return value"},
            "write_file": {"path": path, "content": "pass\n"},
            "run_shell": {"command": f"python -m pytest -x -k case_{turn}"},
            "grep": {"pattern": f"def handler_{turn}"}, "list_dir": {"path": "src"},
            TASK_TOOL: {"description": f"sub-task of turn {turn}", "prompt": "Investigate and report back."},
            }.get(tool, {})


def tool_call(tool: str, session: int, turn: int) -> dict[str, Any]:
    return {"id": f"call_{session}_{turn}", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(call_arguments(tool, session, turn))}}


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def served_prefixes(rendered: dict[int, list[int]], sent: dict[int, float],
                    ready: dict[int, float | None]) -> dict[int, int]:
    """Per session's first prompt (as the engine renders it), the tokens a perfect prefix cache serves of it from other
    sessions' first prompts: its longest common prefix with any whose first token had come (the engine had computed
    it) before this one was sent; 0 where none had. Every later turn of a session starts with its first prompt, so
    these are all the prefixes other sessions hold for it."""
    out = {}
    for s, tokens in rendered.items():
        earlier = [t for t, at in ready.items() if t != s and at is not None and at <= sent[s]]
        out[s] = max((common_prefix(tokens, rendered[t]) for t in earlier), default=0)
    return out
