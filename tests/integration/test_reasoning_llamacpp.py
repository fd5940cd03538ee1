"""knobs.reasoning on the real llama-server: its --reasoning and --reasoning-format flags exist in the build servebook
makes, and with a chat template that opens a thinking block (DeepSeek-R1's, shipped in the sdist) the tiny model's
chat streams arrive as reasoning_content, which the client counts as reasoning and reconciles with the engine's
token counter; with thinking off the template closes the block and every token is answer."""

import pandas as pd
import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, TOLERANT_CORES, tiny_candidate

pytestmark = pytest.mark.integration

OUTPUT = 12
PLAN = Plan.model_validate({"decode": {"concurrency": [1, 2], "categories": ["prose"], "output_tokens": OUTPUT,
                                       "rounds": 1},
                            "prefill": {"prompt_tokens": [256], "requests": 1}, "warmup_requests": 1,
                            "max_foreign_cpu_cores": TOLERANT_CORES})
TEMPLATE = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"


def _run(llama_install, tmp_path, mode: str):
    candidate = tiny_candidate(name=f"tiny-thinking-{mode}",
                               knobs={"chunk_size": 256, "max_running_requests": 2, "context_length": 8192,
                                      "reasoning": {"mode": mode, "format": "deepseek"}},
                               extra_args=["--chat-template-file", str(llama_install.templates_dir / TEMPLATE)])
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells").set_index("cell_id")
    assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].to_dict()
    return record, cells


def test_thinking_on_is_all_reasoning_and_reconciled_and_off_is_all_answer(llama_install, tmp_path):
    record, cells = _run(llama_install, tmp_path, "on")
    decode = cells[cells["kind"] == "decode"]
    # a random model never closes the block: every token it streams is thinking, so the split is known
    assert (decode["reasoning_split"] == "split").all()
    assert (decode["reasoning_tokens"] == decode["completion_tokens"]).all() and (decode["answer_tokens"] == 0).all()
    assert decode["answer_ttft_s"].isna().all() and decode["reasoning_ttft_s"].notna().all()
    assert decode["reconciliation_message"].str.contains(r"\(reasoning \d+ \+ answer 0\) = server").all()
    requests = record.table("requests")
    chat = requests[requests["cell_id"].str.startswith("decode")]
    assert (chat["reasoning_source"] == "stream").all() and (chat["reasoning_chunks"] > 0).all()
    assert pd.isna(cells.loc["prefill-256", "reasoning_split"]), "a completion of a token prompt is never split"

    _, off = _run(llama_install, tmp_path, "off")
    decode_off = off[off["kind"] == "decode"]
    assert decode_off["reasoning_split"].isna().all() and decode_off["answer_ttft_s"].notna().all()
