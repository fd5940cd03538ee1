"""Output realism: what the generated text of a decode cell was like, measured, so a drafter's gain is read
against the output it was earned on.

Two ways a benchmark's output flatters a drafter: a model that loops (random weights repeat one token; a small real
model's greedy continuation repeats its last sentence) makes every n-gram guess right, and a forced length
(`ignore_eos`) keeps a model writing past where it would have stopped, into exactly such a loop. Each is a figure
of the cell (docs/metrics.md, "Output realism"):

- `ngram_share`: of the generated tokens, the share that an n-gram lookup over the prompt and the output so far
  predicts (the longest earlier match of the last 4, 3 or 2 tokens, most recent first): what a prompt-lookup drafter
  lives on. A copy task earns it from the prompt; a loop earns it from the output.
- `loop_share`: the same lookup over the output alone: the share of the output that repeats the output itself.
- `forced_tail_share`: the share of the forced length written after the point where the model, asked the same
  prompt greedily without a forced length, stopped on its own (0 where it ran to the limit).

A third way is read from the first two: output that repeats the prompt (what the n-gram lookup predicts and the
output alone does not). A copy or edit task asks for exactly that; a prose or code task answered by echoing its
prompt (a base model handed an instruction as raw text does) was not done, and flatters prompt lookup as a loop does.

The lookup reads the engine's own tokens of the text (its tokenizer endpoint), so it sees what the engine drafts on.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...util.errors import InputError

if TYPE_CHECKING:
    from ..transport.client import RequestRecord, StreamRequest
    from ..workloads import Workloads

__all__ = ["COPY_CATEGORIES", "ECHO_LIMIT", "FORCED_TAIL_LIMIT", "LOOP_LIMIT", "NGRAM_MAX", "NGRAM_MIN",
           "REALISM_COLUMNS", "Realism", "cell_realism", "echo_share", "lookup_hits", "realism_codes", "realism_of",
           "sample_text", "tail_share"]

#: the longest and shortest n-gram the lookup matches (vLLM's prompt lookup searches 2 to 5 by its docs' example;
#: llama.cpp's n-gram drafters key on a few tokens too): a single token would match by chance in any text
NGRAM_MAX = 4
NGRAM_MIN = 2
#: beyond these shares a cell's output is mostly loop, or mostly past the model's own end: a drafter's gain on it
#: says little about text a user would be served
LOOP_LIMIT = 0.5
FORCED_TAIL_LIMIT = 0.5
ECHO_LIMIT = 0.5
#: categories whose task is to give the prompt back, changed or not: their echo is the workload, never a flaw
COPY_CATEGORIES = frozenset({"copy"})
#: the requests of a cell whose outputs are read (the first ones): enough for a share, few enough to tokenize fast
ANALYSED_REQUESTS = 16
#: the fields that force an output's length; a probe for the model's own end sends the request without them
FORCING_FIELDS = ("ignore_eos", "min_tokens")
#: characters of one output kept beside the figures, so a reader sees what "loops" means in this cell
SAMPLE_CHARS = 160

REALISM_COLUMNS = ("ngram_share", "loop_share", "forced_tail_share", "realism_requests", "output_sample")


def lookup_hits(context: Sequence[int], output: Sequence[int], *, n_max: int = NGRAM_MAX,
                n_min: int = NGRAM_MIN) -> int:
    """How many tokens of `output` an n-gram lookup predicts, reading `context` and then the output so far: at each
    position the longest suffix (n_max down to n_min tokens) seen before names the token that followed it last."""
    tables: list[dict[tuple[int, ...], int]] = [{} for _ in range(n_max + 1)]
    sequence = list(context) + list(output)
    start = len(context)
    hits = 0
    for p, token in enumerate(sequence):
        if p >= start:
            for n in range(n_max, n_min - 1, -1):
                if p >= n:
                    guess = tables[n].get(tuple(sequence[p - n:p]))
                    if guess is not None:
                        hits += guess == token
                        break
        for n in range(n_min, min(n_max, p) + 1):
            tables[n][tuple(sequence[p - n:p])] = token
    return hits


def tail_share(forced_tokens: int, natural_tokens: int | None) -> float:
    """The share of a forced output written after the model's own end (`natural_tokens`: the length it stopped at
    unforced; None: it did not stop before the forced length)."""
    if forced_tokens <= 0 or natural_tokens is None:
        return 0.0
    return max(0, forced_tokens - natural_tokens) / forced_tokens


@dataclass(frozen=True)
class Realism:
    """One request's output: its tokens as the engine tokenizes them, its prompt's, and (where probed) the length
    at which the model stopped without a forced length."""

    prompt_tokens: Sequence[int]
    output_tokens: Sequence[int]
    forced_tokens: int
    natural_tokens: int | None = None
    probed: bool = False


def realism_of(outputs: list[Realism], sample: str | None = None) -> dict[str, Any]:
    """A cell's realism figures over its analysed requests, token-weighted (long outputs weigh as their length);
    the forced tail over the probed ones. Empty outputs count for nothing."""
    counted = [o for o in outputs if o.output_tokens]
    if not counted:
        return dict.fromkeys(REALISM_COLUMNS)
    total = sum(len(o.output_tokens) for o in counted)
    ngram = sum(lookup_hits(o.prompt_tokens, o.output_tokens) for o in counted)
    loop = sum(lookup_hits((), o.output_tokens) for o in counted)
    probed = [o for o in outputs if o.probed]
    tail = statistics.fmean(tail_share(o.forced_tokens, o.natural_tokens) for o in probed) if probed else None
    return {"ngram_share": ngram / total, "loop_share": loop / total, "forced_tail_share": tail,
            "realism_requests": len(counted), "output_sample": sample}


def sample_text(text: str) -> str:
    """The opening of one output, on one line, for readers."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SAMPLE_CHARS else flat[:SAMPLE_CHARS - 1] + "\u2026"


def echo_share(row: dict[str, Any]) -> float | None:
    """The share of a cell's output that repeats its prompt: predicted by the lookup over prompt and output, not by
    the lookup over the output alone."""
    ngram, loop = _number(row.get("ngram_share")), _number(row.get("loop_share"))
    return None if ngram is None or loop is None else max(0.0, ngram - loop)


def realism_codes(row: dict[str, Any]) -> list[str]:
    """What a cell's output was, as codes a verdict reads: `output_loops` (most of it repeats itself),
    `prompt_echo` (most of it repeats the prompt, in a category whose task is not to: `row["category"]`),
    `forced_tail` (most of it lies past the model's own end). Empty: realistic, or not measured."""
    codes = []
    loop, tail = _number(row.get("loop_share")), _number(row.get("forced_tail_share"))
    if loop is not None and loop >= LOOP_LIMIT:
        codes.append("output_loops")
    echo = echo_share(row)
    if echo is not None and echo >= ECHO_LIMIT and row.get("category") not in COPY_CATEGORIES:
        codes.append("prompt_echo")
    if tail is not None and tail >= FORCED_TAIL_LIMIT:
        codes.append("forced_tail")
    return codes


def _number(value: Any) -> float | None:
    """A figure as a float; None where it is missing (None, NaN or not a number)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


async def cell_realism(workloads: "Workloads", records: list["RequestRecord"], probes: int) -> dict[str, Any]:
    """A decode cell's realism, read after its measured window (its counters already scraped): the first requests'
    outputs tokenized by the engine, and the first `probes` of them sent again greedily without a forced length to
    find where the model stops on its own. All None where the engine tokenizes nothing (an attached server without
    a tokenizer endpoint): not measured, never zero."""
    sent, workloads.sent = workloads.sent, {}
    chosen = [r for r in records if r.ok and r.text_parts and r.request_id in sent][:ANALYSED_REQUESTS]
    outputs: list[Realism] = []
    prompts: dict[str, list[int]] = {}
    try:
        for index, record in enumerate(chosen):
            request = sent[record.request_id]
            output = await workloads.tokenize("".join(record.text_parts))
            prompt = await _prompt_tokens(workloads, request, prompts)
            natural, probed = None, False
            if index < probes and any(k in (request.extra_body or {}) for k in FORCING_FIELDS):
                natural, probed = await _natural_length(workloads, record, request), True
            outputs.append(Realism(prompt, output, record.completion_tokens or len(output), natural, probed))
    except InputError:
        return dict.fromkeys(REALISM_COLUMNS)
    return realism_of(outputs, sample_text("".join(chosen[0].text_parts)) if chosen else None)


async def _prompt_tokens(workloads: "Workloads", request: "StreamRequest", seen: dict[str, list[int]]) -> list[int]:
    """The prompt as tokens: a token prompt as it is, chat messages' text tokenized (the template's few tokens
    around them left out: they hold nothing an n-gram lookup would copy)."""
    if isinstance(request.prompt, list):
        return request.prompt
    text = request.prompt if isinstance(request.prompt, str) else "\n".join(
        str(m.get("content") or "") for m in request.messages or [])
    if text not in seen:
        seen[text] = await workloads.tokenize(text)
    return seen[text]


async def _natural_length(workloads: "Workloads", record: "RequestRecord", request: "StreamRequest") -> int | None:
    """Where the model ends the same request greedily with nothing forcing its length: its completion tokens when
    it stopped on its own, None when it ran to the limit (or the probe failed: no tail is claimed then)."""
    from ..transport.client import RequestRecord

    free = {k: v for k, v in (request.extra_body or {}).items() if k not in FORCING_FIELDS}
    probe = RequestRecord(f"{record.request_id}-natural", record.cell_id, 1, record.category,
                          request.max_tokens, t_send=0.0)
    await workloads.stream(probe, replace(request, extra_body=free, keep_text=False, keep_chunk_times=False))
    if not probe.ok or probe.finish_reason != "stop":
        return None
    return probe.completion_tokens
