"""A reasoning model's stream, as each engine shapes it, is split into its thinking and its answer: when each began,
how many tokens each had (the engine's count where it gives one, per-chunk usage else, never a 0 for "not said"),
each phase's decode rate; a cell's reconciliation checks reasoning + answer against the engine's generation counter,
or only their total where some stream's split is unknown, and says which."""

import asyncio
import json

import httpx
import pandas as pd
import pytest
from openai import AsyncOpenAI
from openai.types import Completion
from openai.types.chat import ChatCompletionChunk

from servebook.engines import ServerCounts
from servebook.measure.figures.reasoning import REASONING_COLUMNS, client_split, reasoning_figures
from servebook.measure.kinds import CellSpec
from servebook.measure.log import CellOutcome, MeasurementLog
from servebook.measure.observers.reconcile import ClientCounts, reconcile
from servebook.measure.transport.client import RequestRecord, StreamRequest, _record_chunk, settle_reasoning, stream_request

PROMPT = 20


def usage(completion: int, reasoning: int | None = None, *, top_level: bool = False) -> dict:
    out: dict = {"prompt_tokens": PROMPT, "completion_tokens": completion, "total_tokens": PROMPT + completion}
    if reasoning is not None and top_level:
        out["reasoning_tokens"] = reasoning  # SGLang's place for it (openai/usage_processor.py)
    elif reasoning is not None:
        # the OpenAI place for it, which vLLM fills where it reports one (0.26.0 streamed none live: see below)
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def chunk(delta: dict, finish: str | None = None, use: dict | None = None, *, choices: bool = True) -> dict:
    body: dict = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []}
    if use is not None:
        body["usage"] = use
    return body


def stream(pieces: list[tuple[str, int]], *, field: str = "reasoning", continuous: bool = True,
           details: bool = True, top_level: bool = False, reported: int | None = None) -> list[dict]:
    """A chat stream of `pieces` ("reasoning" / "answer" / "mixed", tokens in the chunk), shaped as vLLM 0.26 sends
    it with continuous usage (chat_completion/serving.py): a role chunk, one chunk per piece with cumulative usage
    (and, under a reasoning parser, the cumulative reasoning count), the finish, then the usage chunk."""
    out, done, thought = [], 0, 0
    said = (lambda r: r) if details else (lambda r: None)
    out.append(chunk({"role": "assistant", "content": ""}, use=usage(0, said(0), top_level=top_level)
                     if continuous else None))
    for i, (phase, n) in enumerate(pieces):
        done += n
        thought += n if phase == "reasoning" else (n // 2 if phase == "mixed" else 0)
        delta = {field: "w" * n} if phase in ("reasoning", "mixed") else {}
        if phase in ("answer", "mixed"):
            delta["content"] = "a" * n
        finish = "length" if i == len(pieces) - 1 else None
        out.append(chunk(delta, finish, usage(done, said(thought), top_level=top_level) if continuous else None))
    final = reported if reported is not None else said(thought)
    out.append(chunk({}, use=usage(done, final, top_level=top_level), choices=False))
    return out


def record_of(chunks: list[dict], *, chat: bool = True) -> RequestRecord:
    """Each chunk parsed by the SDK's own type and folded in at t = 1, 2, 3 ... (sent at t = 0)."""
    record = RequestRecord("r", "decode-prose-c1", 1, "prose", 8, t_send=0.0)
    counted = 0
    for t, body in enumerate(chunks, start=1):
        counted = _record_chunk(record, ChatCompletionChunk.model_validate(body), float(t), counted, chat=chat,
                                keep_chunk_times=True)
    settle_reasoning(record)
    return record


def test_vllms_stream_is_split_with_its_own_reasoning_count():
    record = record_of(stream([("reasoning", 1)] * 5 + [("answer", 1)] * 3))
    assert (record.reasoning_tokens, record.reasoning_source, record.answer_tokens) == (5, "usage", 3)
    # the role chunk at t=1, reasoning at t=2..6, the answer at t=7..9
    assert (record.reasoning_ttft, record.answer_ttft, record.ttft) == (2.0, 7.0, 2.0)
    assert record.reasoning_rate == pytest.approx(4 / 4) and record.answer_rate == pytest.approx(2 / 2)
    assert record.chunk_phases == ["reasoning"] * 5 + ["answer"] * 3
    assert record.reasoning_chunks == 5 and record.completion_tokens == 8


def test_the_older_field_name_and_no_engine_count_fall_back_to_per_chunk_usage():
    # vLLM before the rename streamed `reasoning_content`, and before completion_tokens_details said nothing
    record = record_of(stream([("reasoning", 2), ("reasoning", 1), ("answer", 1), ("answer", 3)],
                              field="reasoning_content", details=False))
    assert (record.reasoning_tokens, record.reasoning_source, record.answer_tokens) == (3, "chunks", 4)


def test_sglang_reports_its_count_at_the_top_of_usage():
    record = record_of(stream([("reasoning", 1)] * 4 + [("answer", 1)] * 2, field="reasoning_content",
                              continuous=False, top_level=True))
    assert (record.reasoning_tokens, record.reasoning_source) == (4, "usage")


def test_a_count_the_stream_cannot_give_is_none_never_zero():
    # llama.cpp: reasoning_content deltas, usage only at the end and no reasoning count in it
    mixed = record_of(stream([("reasoning", 1)] * 3 + [("answer", 1)] * 2, field="reasoning_content",
                             continuous=False, details=False))
    assert mixed.reasoning_tokens is None and mixed.answer_tokens is None and mixed.reasoning_source is None
    assert mixed.answer_ttft == 5.0, "the times are known even where the counts are not"
    # a drafter's run across the end of thinking: one chunk of both, so per-chunk usage cannot split it
    drafted = record_of(stream([("reasoning", 3), ("mixed", 4), ("answer", 2)], details=False))
    assert drafted.reasoning_tokens is None and drafted.chunk_phases[1] == "mixed"


def test_an_engine_zero_beside_streamed_reasoning_is_a_parser_that_does_not_count():
    # vLLM's parsers that keep the base class's count return 0 although they streamed reasoning
    record = record_of(stream([("reasoning", 1)] * 3 + [("answer", 1)] * 2, details=False, reported=0))
    assert (record.reasoning_tokens, record.reasoning_source) == (3, "chunks")


def test_a_stream_of_thinking_only_is_all_reasoning_and_one_without_any_says_so_only_if_the_engine_does():
    thinking = record_of(stream([("reasoning", 1)] * 4, field="reasoning_content", continuous=False, details=False))
    assert (thinking.reasoning_tokens, thinking.reasoning_source, thinking.answer_tokens) == (4, "stream", 0)
    assert thinking.answer_ttft is None and thinking.answer_rate is None
    silent = record_of(stream([("answer", 1)] * 4, continuous=False, details=False))
    assert silent.reasoning_tokens is None, "no reasoning streamed and none reported: not a reasoning stream"
    counted = record_of(stream([("answer", 1)] * 4))  # vLLM with a parser, thinking off: it counts 0 itself
    assert (counted.reasoning_tokens, counted.reasoning_source) == (0, "usage")


def test_a_completion_of_a_token_prompt_is_never_split():
    # no engine applies a reasoning parser to a completion: its thinking is text like any other
    body = {"id": "c", "object": "text_completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "text": "<think>x", "finish_reason": "length"}]}
    record = RequestRecord("r", "prefill-256", 1, "prose", 1, t_send=0.0)
    _record_chunk(record, Completion.model_validate(body), 1.0, 0, chat=False, keep_chunk_times=True)
    settle_reasoning(record)
    assert record.t_first == 1.0 and record.t_first_answer is None and record.chunk_phases == [None]


def cell_records(*pieces: list[tuple[str, int]], **shape) -> list[RequestRecord]:
    records = []
    for i, p in enumerate(pieces):
        r = record_of(stream(p, **shape))
        r.request_id = f"r{i}"
        records.append(r)
    return records


def test_a_cells_figures_and_its_reconciliation_of_reasoning_plus_answer():
    records = cell_records([("reasoning", 1)] * 5 + [("answer", 1)] * 3, [("reasoning", 1)] * 3 + [("answer", 1)] * 5)
    figures = reasoning_figures(records)
    assert set(REASONING_COLUMNS) <= set(figures)
    assert (figures["reasoning_tokens"], figures["answer_tokens"], figures["reasoning_split"]) == (8, 8, "split")
    assert figures["answer_ttft_s"] == pytest.approx((7.0 + 5.0) / 2) and figures["reasoning_ttft_s"] == 2.0
    reasoning, answer, split = client_split(records)
    client = ClientCounts(2 * PROMPT, None, 16, reasoning, answer, split)
    agreed = reconcile(client, ServerCounts(prompt_tokens=2 * PROMPT, cached_tokens=None, generation_tokens=16))
    assert agreed.split == "split"
    assert "generated tokens 16 (reasoning 8 + answer 8) = server" in agreed.message
    off = reconcile(client, ServerCounts(prompt_tokens=2 * PROMPT, cached_tokens=None, generation_tokens=17))
    assert off.status == "mismatch" and "generated tokens (reasoning 8 + answer 8): client 16, server 17" in off.message


def test_a_cell_with_a_stream_whose_split_is_unknown_is_reconciled_on_the_total_only_and_marked():
    records = cell_records([("reasoning", 1)] * 5 + [("answer", 1)] * 3)
    records += cell_records([("reasoning", 1)] * 2 + [("answer", 1)] * 6, continuous=False, details=False)
    reasoning, answer, split = client_split(records)
    assert (reasoning, answer, split) == (None, None, "total_only")
    assert reasoning_figures(records)["reasoning_split"] == "total_only"
    result = reconcile(ClientCounts(2 * PROMPT, 0, 16, reasoning, answer, split),
                       ServerCounts(prompt_tokens=2 * PROMPT, cached_tokens=0, generation_tokens=16))
    assert result.status == "ok" and result.split == "total_only"
    assert result.message.endswith("generated tokens 16 = server; cached tokens 0 = server; reasoning and answer "
                                   "not told apart in every stream: reconciled on their total only")
    assert result.to_dict()["split"] == "total_only"


def test_a_cell_where_nothing_reasoned_has_only_the_answer_wait_and_an_unchanged_reconciliation():
    records = cell_records([("answer", 1)] * 4, continuous=False, details=False)
    figures = reasoning_figures(records)
    assert figures["answer_ttft_s"] == 2.0 and figures["reasoning_split"] is None and figures["reasoning_tokens"] is None
    result = reconcile(ClientCounts(PROMPT, None, 4, *client_split(records)),
                       ServerCounts(prompt_tokens=PROMPT, cached_tokens=None, generation_tokens=4))
    assert result.split is None and "reasoning" not in result.message


def test_the_raw_rows_keep_the_split_and_each_chunks_phase():
    records = cell_records([("reasoning", 2), ("answer", 1)])
    spec = CellSpec("decode-prose-c1", "decode", "prose", 1, 1, 3)
    log = MeasurementLog(outcomes=[CellOutcome(spec, records, None, None, {})])  # type: ignore[arg-type]
    row = log.request_rows()[0]
    assert (row["reasoning_tokens"], row["reasoning_source"], row["reasoning_chunks"]) == (2, "usage", 1)
    assert "split" not in row and "chunk_phases" not in row
    assert [c["phase"] for c in log.chunk_rows()] == ["reasoning", "answer"]


def test_through_the_sdk_a_chat_request_carries_the_knobs_fields_and_its_stream_is_split():
    seen: dict = {}
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n"
                    for c in stream([("reasoning", 1)] * 3 + [("answer", 1)] * 2)) + b"data: [DONE]\n\n"

    def engine(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content))
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async def go() -> RequestRecord:
        http = httpx.AsyncClient(transport=httpx.MockTransport(engine))
        async with http:
            sdk = AsyncOpenAI(base_url="http://engine/v1", api_key="k", http_client=http, max_retries=0)
            record = RequestRecord("r", "c", 1, "prose", 5, t_send=0.0)
            extra = {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "low"}
            return await stream_request(sdk, record, StreamRequest("m", 5, messages=[{"role": "user", "content": "q"}],
                                                                   extra_body=extra))

    record = asyncio.run(go())
    assert seen["chat_template_kwargs"] == {"enable_thinking": True} and seen["reasoning_effort"] == "low"
    assert (record.reasoning_tokens, record.answer_tokens, record.reasoning_source) == (3, 2, "usage")
    assert record.t_first_reasoning < record.t_first_answer <= record.t_last


def decode_cells(answer_ttft: float, reasoning_rate: float) -> pd.DataFrame:
    return pd.DataFrame([{"cell_id": "decode-prose-c4", "kind": "decode", "category": "prose", "concurrency": 4,
                          "target_prompt_tokens": None, "answer_ttft_s": answer_ttft, "reasoning_tok_s": reasoning_rate,
                          "reasoning_split": "split", "valid": True, "invalid_reasons": "", "reconciliation": "ok"}])


def test_the_reasoning_figures_enter_verdict_rules_with_repeats_and_intervals():
    from servebook.config import ComparisonRule, VerdictRules
    from servebook.journal import Manifest
    from servebook.verdicts.judge import judge_runs

    rules = VerdictRules(rules=[ComparisonRule(metric="answer_ttft_s", concurrency=[4], max_regression_pct=10),
                                ComparisonRule(metric="reasoning_tok_s", concurrency=[4], max_regression_pct=10)])
    baseline = [decode_cells(t, r) for t, r in ((2.00, 100.0), (2.04, 101.0), (1.98, 99.5))]

    def verdict(cells):
        return judge_runs([(Manifest(status="completed", run_id=f"r{i}"), c) for i, c in enumerate(cells)],
                          baseline, rules, is_baseline=False)

    thinking_longer = verdict([decode_cells(t, r) for t, r in ((2.60, 100.5), (2.66, 99.0), (2.58, 100.0))])
    assert thinking_longer.outcome == "rejected"
    answer = next(c for c in thinking_longer.comparisons if c.metric == "answer_ttft_s")
    assert answer.runs == 3 and answer.baseline_runs == 3 and answer.change_low_pct > 10
    assert any(r.startswith("time to the first answer token, prose at 4 requests: +") for r in thinking_longer.reasons)
    same = verdict([decode_cells(t, r) for t, r in ((2.01, 100.0), (1.99, 100.4), (2.02, 99.8))])
    assert same.outcome == "accepted", same.reasons


def test_the_within_run_error_of_a_reasoning_figure_reads_its_own_columns_and_none_in_older_tables():
    from servebook.verdicts.noise import within_run_se

    rows = pd.DataFrame([r.row() for r in cell_records([("reasoning", 1)] * 5 + [("answer", 1)] * 3,
                                                       [("reasoning", 1)] * 3 + [("answer", 1)] * 5)])
    # answer waits of 7 and 5 s: a CV of 23.6% over the square root of two requests
    assert within_run_se([rows], "decode-prose-c1", "answer_ttft_s") == pytest.approx(100 * 1.4142 / 6 / 1.4142, 1e-3)
    older = rows.drop(columns=["t_first_answer", "t_first_reasoning", "t_last_reasoning", "reasoning_tokens"])
    assert within_run_se([older], "decode-prose-c1", "answer_ttft_s") is None
    assert within_run_se([older], "decode-prose-c1", "reasoning_tok_s") is None


def recorded_vllm_stream(thinking: str) -> list[dict]:
    """A chat stream recorded live from vLLM 0.26.0 on an H200 (`tools/gpu-host/gpu-host.sh reasoning`: the random 1B
    checkpoint as a thinking model under `--reasoning-parser deepseek_r1`, 12 tokens forced, continuous usage)."""
    from pathlib import Path
    path = Path(__file__).parents[2] / "fixtures" / "vllm-0.26.0" / f"reasoning-stream-thinking-{thinking}.sse"
    _request, _, events = path.read_text().partition("\n\n")
    return [json.loads(line[5:]) for line in events.splitlines()
            if line.startswith("data:") and line[5:].strip() != "[DONE]"]


def test_live_vllm_thinking_stream_is_all_reasoning_counted_from_its_per_chunk_usage():
    """Live, vLLM 0.26.0 streams `delta.reasoning` and, unlike what its non-streamed usage may carry, puts no
    completion_tokens_details.reasoning_tokens in any chunk's usage: the count comes from the stream. A random
    model never closes its </think>, so the whole forced length is reasoning and no answer began."""
    chunks = recorded_vllm_stream("on")
    assert all("completion_tokens_details" not in (c.get("usage") or {}) for c in chunks)
    record = record_of(chunks)
    assert (record.completion_tokens, record.reasoning_tokens, record.reasoning_source) == (12, 12, "stream")
    assert record.answer_tokens == 0 and record.answer_ttft is None
    assert record.reasoning_ttft == record.ttft == 2.0  # the role chunk first, then reasoning


def test_live_vllm_stream_with_thinking_off_is_all_answer_and_claims_no_reasoning():
    record = record_of(recorded_vllm_stream("off"))
    assert record.completion_tokens == 12 and record.reasoning_chunks == 0
    assert record.reasoning_tokens is None and record.reasoning_ttft is None, "no reasoning is not a 0 the engine said"
    assert record.ttft == 2.0
