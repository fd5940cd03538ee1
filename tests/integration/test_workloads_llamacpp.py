"""The qualification workloads on the real llama-server (tiny random-weight models): prompts that share no
prefix, the structured category, prompt reuse across turns, waves beyond the slot count, and greedy output
equivalence of drafters against the baseline."""

import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.measure.equivalence import compare_outputs
from servebook.measure.validity import DISTURBANCES
from servebook.run import run_candidate
from servebook.util.progress import Reporter
from tests.helpers.candidates import tiny_candidate

pytestmark = pytest.mark.integration
QUIET = Reporter(quiet=True)

WORKLOADS = Plan.model_validate({
    "decode": {"concurrency": [2], "categories": ["prose", "structured"], "output_tokens": 24, "rounds": 2,
               "prompt_tokens": 160},
    "prefill": None,
    "reuse": {"conversations": 2, "turns": 3, "first_prompt_tokens": 512, "turn_tokens": 128, "output_tokens": 8},
    "waves": {"concurrency": [4], "waves": 2, "output_tokens": 24, "prompt_tokens": 128},
    "warmup_requests": 1, "max_foreign_cpu_cores": 4})


def test_reuse_waves_and_prompts_without_shared_prefix(llama_install, tmp_path):
    journal = Journal(tmp_path)
    four = run_candidate(tiny_candidate(knobs={"max_running_requests": 4, "context_length": 8192}), WORKLOADS,
                         journal, reporter=QUIET)
    one = run_candidate(tiny_candidate(knobs={"max_running_requests": 1, "context_length": 8192}), WORKLOADS,
                        journal, reporter=QUIET)
    for record in (four, one):
        assert record.status == "completed", record.manifest.failure
        cells = record.table("cells").set_index("cell_id")
        # Every cell valid, but for disturbances of this shared host (a client stall is one: the cell then
        # leaves a verdict's statistics, it is no fault of the engine or of the prompts).
        faults = {cell: codes for cell, codes in cells["invalid_codes"].items()
                  if codes and not set(codes.split(",")) <= DISTURBANCES}
        assert not faults, cells["invalid_reasons"].to_dict()
        assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].to_dict()
        # prompts of exact length that share no prefix: nothing came from the cache, by the engine's own count
        assert cells.loc["decode-prose-c2", "cached_tokens"] == 0
        requests = record.table("requests")
        assert (requests.loc[requests.cell_id == "decode-prose-c2", "prompt_tokens"] == 160).all()
        # each token prompt keeps the length of the opening that makes it unique (opener and the run's tag): a
        # cache hit within it matched an opener, not content (measure.validity)
        unique = requests[requests.cell_id.isin(["decode-prose-c2", "wave-c4"])]
        assert (unique["opening_tokens"] > 1).all() and (unique["opening_tokens"] < 40).all(), unique
        # each next turn reads the previous turns from the cache
        reuse = requests[requests.cell_id == "reuse"]
        later = reuse[reuse.turn > 1]
        assert (later["cached_tokens"] >= later["prompt_tokens"] - 128 - 8).all(), later
        assert cells.loc["reuse", "cached_share"] > 0.7
    waves_four = four.table("cells").set_index("cell_id").loc["wave-c4"]
    waves_one = one.table("cells").set_index("cell_id").loc["wave-c4"]
    assert (waves_four["slots"], waves_four["queued"]) == (4, 0)
    assert (waves_one["slots"], waves_one["queued"]) == (1, 3)
    # with one slot the other three wait for the first: the queue shows in the tail of TTFT
    assert waves_one["ttft_p90_s"] > 2 * waves_four["ttft_p90_s"]


EQUIVALENCE = Plan.model_validate({"decode": None, "prefill": None, "warmup_requests": 1,
                                   "equivalence": {"prompts": 3, "output_tokens": 32, "prompt_tokens": 96}})


def test_drafters_keep_greedy_output_identical_to_the_baseline(llama_install, tmp_path):
    journal = Journal(tmp_path)
    baseline = run_candidate(tiny_candidate(), EQUIVALENCE, journal, reporter=QUIET)
    assert baseline.manifest.summary.batch_invariance["diverged"] == []
    for drafter in ({"kind": "ngram", "max_draft_tokens": 8},
                    {"kind": "draft_model", "model": "tiny:draft", "max_draft_tokens": 4}):
        record = run_candidate(tiny_candidate(knobs={"chunk_size": 256, "max_running_requests": 2,
                                                     "context_length": 8192, "drafter": drafter}),
                               EQUIVALENCE, journal, reporter=QUIET)
        assert record.status == "completed", record.manifest.failure
        result = compare_outputs(baseline.table("outputs").to_dict("records"),
                                 record.table("outputs").to_dict("records"))
        assert result["prompts"] == 3
        assert result["diverged"] == [], result  # a drafter changes speed, never the greedy output
