"""A simulated reasoning model: how much of its output is thinking, and how each engine streams it.

The model thinks when the engine it plays was given a way to tell thinking from the answer (vLLM and SGLang
--reasoning-parser, llama.cpp --reasoning-format or --reasoning on), and a chat request does not switch it off
(chat_template_kwargs.enable_thinking false, reasoning_effort none). Its first tokens are then reasoning, a share
of max_tokens set by the effort, then the answer. Each engine's shape (docs/reasoning.md has the sources):

- vLLM: the thinking in `delta.reasoning` (`delta.reasoning_content` before the field's rename:
  --sim-reasoning-field reasoning_content), and under a parser `usage.completion_tokens_details.reasoning_tokens`
  on the final usage and, with continuous usage, on every chunk (chat_completion/serving.py); the releases before
  that count (--sim-reasoning-usage none) say nothing.
- SGLang: `delta.reasoning_content`, the count at the top of usage (`usage.reasoning_tokens`, usage_processor.py).
- llama.cpp: `delta.reasoning_content`, no count in usage.

Only chat requests think: no engine applies a template or a parser to a completion of a token prompt. The counters
count every token, thinking and answer alike, as the engines' generation counters do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the share of max_tokens thought before answering, by reasoning effort (the default: "medium")
EFFORT_SHARE = {"minimal": 0.1, "low": 0.25, "medium": 0.5, "high": 0.75, "xhigh": 0.85, "max": 0.9}


@dataclass
class ReasoningShape:
    """How the simulated engine streams a reasoning model's thinking."""

    #: the delta field the thinking arrives in
    field: str = "reasoning_content"
    #: where usage counts it: "details" (completion_tokens_details.reasoning_tokens), "top" (usage.reasoning_tokens),
    #: None (nowhere)
    usage: str | None = None
    #: whether a request that does not say thinks (llama.cpp --reasoning off: it does not)
    default_on: bool = True
    #: the server's effort (llama.cpp --reasoning-effort), and the most tokens it may think (--reasoning-budget)
    effort: str | None = None
    budget: int | None = None
    parser: str | None = None

    def thinking_tokens(self, body: dict, max_tokens: int) -> int:
        """How many of a chat request's first tokens are thinking."""
        kwargs = body.get("chat_template_kwargs") or {}
        effort = body.get("reasoning_effort") or self.effort
        on = bool(kwargs.get("enable_thinking", self.default_on)) and effort != "none"
        if not on:
            return 0
        tokens = int(max_tokens * EFFORT_SHARE.get(str(effort), EFFORT_SHARE["medium"]))
        return min(tokens, self.budget) if self.budget is not None and self.budget >= 0 else tokens

    def usage_fields(self, reasoning: int) -> dict[str, Any]:
        if self.usage == "details":
            return {"completion_tokens_details": {"reasoning_tokens": reasoning}}
        return {"reasoning_tokens": reasoning} if self.usage == "top" else {}

    def delta(self, reasoning: str, answer: str) -> dict[str, Any]:
        out: dict[str, Any] = {self.field: reasoning} if reasoning else {}
        if answer:
            out["content"] = answer
        return out


def vllm_shape(parser: str | None, field: str, usage: str) -> ReasoningShape | None:
    return ReasoningShape(field, None if usage == "none" else "details", parser=parser) if parser else None


def sglang_shape(parser: str | None) -> ReasoningShape | None:
    return ReasoningShape("reasoning_content", "top", parser=parser) if parser else None


def llamacpp_shape(reasoning_format: str | None, mode: str | None, effort: str | None,
                   budget: int | None) -> ReasoningShape | None:
    """llama.cpp separates thinking under --reasoning-format (not none), or --reasoning on|off with its default
    format; without either flag the simulated model does not think."""
    if reasoning_format == "none" or (reasoning_format is None and mode is None):
        return None
    return ReasoningShape("reasoning_content", None, default_on=mode != "off", effort=effort, budget=budget)
