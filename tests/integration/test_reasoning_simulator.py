"""Reasoning models through servebook's simulator, as each engine streams them: a run with knobs.reasoning on has its
chat cells' reasoning and answer told apart and reconciled with the engine's generation counter, which counts both;
a stream whose reasoning count cannot be known is reconciled on the total only, and says so."""

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.present.claims import claim_text
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, make_candidate

pytestmark = pytest.mark.simulator
OUTPUT = 24
#: chat decode cells (no prompt_tokens: corpus prompts as messages) beside a cold prefill of token prompts, which no
#: engine's reasoning parser sees
PLAN = Plan.model_validate({"decode": {"concurrency": [1, 2], "categories": ["prose"], "output_tokens": OUTPUT,
                                       "rounds": 2},
                            "prefill": {"prompt_tokens": [256], "requests": 2}, "warmup_requests": 1,
                            "max_foreign_cpu_cores": 4})


def thinking(engine: str, reasoning: dict, *extra_args: str, name: str = "thinks"):
    return make_candidate(engine, name=f"sim-{engine}-{name}", knobs={"max_running_requests": 4, "reasoning": reasoning},
                          extra_args=list(extra_args), launch={"simulator": True, "ready_timeout_s": 4})


def completed(candidate, tmp_path):
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells").set_index("cell_id")
    assert cells["valid"].all(), cells["invalid_reasons"].to_dict()
    assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].to_dict()
    return record, cells


@pytest.mark.parametrize(("engine", "reasoning", "extra", "source"), [
    ("vllm", {"parser": "qwen3", "mode": "on"}, (), "usage"),
    # a vLLM from before the field's rename and before completion_tokens_details: counted from per-chunk usage
    ("vllm", {"parser": "qwen3", "mode": "on"}, ("--sim-reasoning-field", "reasoning_content",
                                                 "--sim-reasoning-usage", "none"), "chunks"),
    ("sglang", {"parser": "qwen3", "effort": "high"}, (), "usage"),
])
def test_a_run_with_reasoning_on_splits_and_reconciles_its_chat_cells(engine, reasoning, extra, source, tmp_path):
    record, cells = completed(thinking(engine, reasoning, *extra), tmp_path)
    decode = cells[cells["kind"] == "decode"]
    assert (decode["reasoning_split"] == "split").all()
    assert (decode["reasoning_tokens"] + decode["answer_tokens"] == decode["completion_tokens"]).all()
    assert (decode["reasoning_tokens"] > 0).all() and (decode["answer_tokens"] > 0).all()
    assert (decode["answer_ttft_s"] > decode["reasoning_ttft_s"]).all(), "the answer starts after the thinking"
    assert decode["reasoning_tok_s"].notna().all() and decode["answer_tok_s"].notna().all()
    for cell_id, row in decode.iterrows():
        expected = (f"generated tokens {row['completion_tokens']:g} (reasoning {row['reasoning_tokens']:g} + answer "
                    f"{row['answer_tokens']:g}) = server")
        assert expected in row["reconciliation_message"], (cell_id, row["reconciliation_message"])
    prefill = cells[cells["kind"] == "prefill"]
    assert prefill["reasoning_split"].isna().all(), "a completion of a token prompt is not a reasoning stream"
    requests = record.table("requests")
    thought = requests[requests["reasoning_chunks"] > 0]
    assert len(thought) == int(decode["requests"].sum()) and (thought["reasoning_source"] == source).all()
    chunks = record.table("chunks")
    assert set(chunks["phase"].dropna()) == {"reasoning", "answer"}
    verification = record.manifest.engine.verification
    assert claim_text(verification.claims["knobs.reasoning"]) == "verified: reasoning parser qwen3"


def test_an_effort_moves_the_split_and_thinking_off_leaves_only_the_answer(tmp_path):
    _, low = completed(thinking("vllm", {"parser": "qwen3", "effort": "low"}, name="low"), tmp_path / "low")
    _, high = completed(thinking("vllm", {"parser": "qwen3", "effort": "high"}, name="high"), tmp_path / "high")
    cell = "decode-prose-c1"
    assert low.loc[cell, "reasoning_tokens"] < high.loc[cell, "reasoning_tokens"]
    _, off = completed(thinking("vllm", {"parser": "qwen3", "mode": "off"}, name="off"), tmp_path / "off")
    assert off["reasoning_split"].isna().all() and off.loc[cell, "answer_ttft_s"] > 0
    assert "reasoning" not in off.loc[cell, "reconciliation_message"]


def test_a_stream_whose_reasoning_count_is_unknown_is_reconciled_on_the_total_only(tmp_path):
    # llama.cpp streams reasoning_content but counts no reasoning tokens and sends usage only at the end
    record, cells = completed(thinking("llamacpp", {"mode": "on", "format": "deepseek"}), tmp_path)
    decode = cells[cells["kind"] == "decode"]
    assert (decode["reasoning_split"] == "total_only").all()
    assert decode["reasoning_tokens"].isna().all() and decode["answer_ttft_s"].notna().all()
    assert decode["reconciliation_message"].str.endswith(
        "reasoning and answer not told apart in every stream: reconciled on their total only").all()
    requests = record.table("requests")
    assert requests.loc[requests["reasoning_chunks"] > 0, "reasoning_tokens"].isna().all()
