"""A measured request's raw row (`RequestRecord`): what one streamed request did, as requests.parquet keeps it, and
what its stream tells of reasoning while it runs (`ReasoningSplit`). The client (measure.transport.client) fills it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

#: the delta fields a reasoning model's thinking arrives in (the first one set counts: an engine that sends both for
#: compatibility sends the same text twice)
REASONING_FIELDS = ("reasoning_content", "reasoning")
#: where a request's reasoning token count came from: the engine's usage, per-chunk usage on the reasoning chunks, or
#: a stream whose every token was reasoning
ReasoningSource = Literal["usage", "chunks", "stream"]


@dataclass
class ReasoningSplit:
    """What the stream tells of reasoning while it runs; settled into the record when it ends."""

    #: the engine's own count of reasoning tokens, the last usage that gave one
    reported: int | None = None
    #: reasoning tokens from per-chunk usage (None once a chunk could not be attributed: no usage on a chunk with
    #: text, or one chunk with both reasoning and answer, as a drafter's run across the end of thinking)
    counted: int | None = 0
    completion_seen: int = 0
    phase: str | None = None


@dataclass
class RequestRecord:
    request_id: str
    cell_id: str
    concurrency: int
    category: str
    expected_completion_tokens: int
    t_send: float
    t_first: float | None = None
    t_last: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    chunk_count: int = 0
    finish_reason: str | None = None
    error: str | None = None
    server_prompt_ms: float | None = None
    server_predicted_per_second: float | None = None
    server_draft_tokens: int | None = None
    server_draft_accepted: int | None = None
    turn: int | None = None  # reuse cells: the request's turn in its conversation (1 = the first)
    conversation: int | None = None
    #: open-loop cells: when the schedule wanted the request sent, and whether it counts (outside the warm-up)
    t_due: float | None = None
    measured: bool = True
    #: open-loop cells sent from several processes (measure.transport.senders): which one sent it (None: the run's own)
    client_process: int | None = None
    #: sliced cells (plan.decode.slices): the slice the request was sent in; other seats measured between slices
    slice_index: int = 0
    #: several replicas without a router: the replica servebook sent it to (measure.observers.replicas; None: one endpoint)
    replica: int | None = None
    #: replay cells: the prompt tokens a perfect prefix cache serves of it, by the trace's hash ids (config.traces);
    #: agent turns: by the history it resends (measure.kinds.agents.sessions)
    ideal_cached_tokens: int | None = None
    #: token prompts unique from their first token (Workloads.unique_prompt): the tokens of their opening, the
    #: opener and the run's tag before the shared filler. A cache hit no longer than that matched another prompt's
    #: opening by chance (a radix cache, SGLang's, matches a single token), never its content.
    opening_tokens: int | None = None
    #: reasoning models (chat streams only): when the first and the last reasoning chunk and the first answer chunk
    #: arrived, and how many chunks carried reasoning; journals written before these columns lack them
    t_first_reasoning: float | None = None
    t_last_reasoning: float | None = None
    t_first_answer: float | None = None
    reasoning_chunks: int = 0
    #: the completion tokens that were reasoning (None: not known, never 0 for "not reported"), and whence the count
    reasoning_tokens: int | None = None
    reasoning_source: ReasoningSource | None = None
    #: an interference probe (plan.prefill.probes): a short decode request sent beside the cell's own, counted in
    #: its reconciliation and validity, never in its figures
    probe: bool = False
    #: agent turns: the session that spawned this one's session (a sub-agent's parent; None: a parent session)
    parent_conversation: int | None = None
    #: agent turns: the turn's prompt and asked output did not fit the engine's context per request
    context_overflow: bool = False
    #: agent turns that asked the engine for a tool call: whether one came back that parses (None: none asked)
    tool_call_parsed: bool | None = None
    chunk_times: list[float] = field(default_factory=list, repr=False)
    chunk_tokens: list[int | None] = field(default_factory=list, repr=False)
    #: per kept chunk: "reasoning", "answer" or "mixed" (chat), None (a completion's text)
    chunk_phases: list[str | None] = field(default_factory=list, repr=False)
    split: ReasoningSplit = field(default_factory=ReasoningSplit, repr=False)
    #: the streamed text, where the request asked to keep it (decode cells: measure.figures.realism reads it)
    text_parts: list[str] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None and self.completion_tokens is not None

    @property
    def ttft(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_send

    @property
    def decode_rate(self) -> float | None:
        """(completion_tokens - 1) / (t_last - t_first): decode only, prompt reading excluded."""
        if not self.ok or self.t_first is None or self.t_last is None or self.completion_tokens is None \
                or self.completion_tokens < 2:
            return None
        span = self.t_last - self.t_first
        return (self.completion_tokens - 1) / span if span > 0 else None

    @property
    def answer_tokens(self) -> int | None:
        """The completion tokens of the answer: all of them less the reasoning ones (None where those are unknown)."""
        if not self.ok or self.reasoning_tokens is None or self.completion_tokens is None:
            return None
        return self.completion_tokens - self.reasoning_tokens

    @property
    def reasoning_ttft(self) -> float | None:
        return None if self.t_first_reasoning is None else self.t_first_reasoning - self.t_send

    @property
    def answer_ttft(self) -> float | None:
        """Send to the first answer chunk: what a user of a reasoning model waits before the answer starts."""
        return None if self.t_first_answer is None else self.t_first_answer - self.t_send

    @property
    def reasoning_rate(self) -> float | None:
        """(reasoning_tokens - 1) / (last - first reasoning chunk): the thinking phase's own decode rate."""
        return _rate(self.reasoning_tokens if self.ok else None, self.t_first_reasoning, self.t_last_reasoning)

    @property
    def answer_rate(self) -> float | None:
        """(answer_tokens - 1) / (t_last - first answer chunk): the answer phase's own decode rate."""
        return _rate(self.answer_tokens, self.t_first_answer, self.t_last)

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        for kept_apart in ("chunk_times", "chunk_tokens", "chunk_phases", "split", "text_parts"):
            data.pop(kept_apart)
        return data


def _rate(tokens: int | None, first: float | None, last: float | None) -> float | None:
    if tokens is None or tokens < 2 or first is None or last is None or last <= first:
        return None
    return (tokens - 1) / (last - first)
