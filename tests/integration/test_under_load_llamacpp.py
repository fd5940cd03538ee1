"""Latency under load on the real llama-server: the decode cells' ITL, the engine's gauges sampled while each cell
runs (gauges.parquet and the cell row), and interference probes beside a long prefill, which show the decode stall a
prefill chunk size causes. llama.cpp's chunk_size is its batch (-b and -ub): with 2,048 a 1,024-token prompt is one
batch, and a decode running beside it waits for all of it; with 64 it is 16 batches, each carrying the decode's
next token."""

import pandas as pd
import pytest

from servebook.config import Plan
from servebook.journal import Journal
from servebook.run import run_candidate
from tests.helpers.candidates import QUIET, TOLERANT_CORES, tiny_candidate

pytestmark = pytest.mark.integration

PROMPT = 1024
PROBES = {"interval_ms": 40, "output_tokens": 16, "prompt_tokens": 64, "max_in_flight": 2}
PLAN = Plan.model_validate({
    "decode": {"concurrency": [3], "categories": ["prose"], "output_tokens": 24, "rounds": 1},
    "prefill": {"prompt_tokens": [PROMPT], "requests": 1, "probes": PROBES},
    "warmup_requests": 1, "max_foreign_cpu_cores": TOLERANT_CORES, "remeasure_disturbed": 0,
    "gauge_interval_ms": 50})


def _run(journal, chunk, plan):
    candidate = tiny_candidate(name=f"tiny-chunk-{chunk}",
                               knobs={"chunk_size": chunk, "max_running_requests": 4, "context_length": 8192})
    record = run_candidate(candidate, plan, journal, reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    return record


def _check_probes(record):
    cells = record.table("cells").set_index("cell_id")
    prefill = cells.loc[f"prefill-{PROMPT}"]
    assert prefill["reconciliation"] == "ok", prefill["reconciliation_message"]  # the probes' tokens counted too
    assert prefill["valid"], prefill["invalid_reasons"]
    requests = record.table("requests")
    own = requests[(requests.cell_id == f"prefill-{PROMPT}")]
    probes = own[own["probe"]]
    # the prefill figure is the prefill's own requests', never the probes'
    assert prefill["requests"] == 1 and prefill["prompt_tokens"] == PROMPT
    assert prefill["probe_requests"] == len(probes) >= 2
    assert (probes["completion_tokens"] == 16).all() and (probes["cached_tokens"] == 0).all()
    # the first probe was decoding when the prefill left
    assert probes["t_first"].min() <= own[~own["probe"]]["t_send"].min()
    chunks = record.table("chunks")
    # each content chunk a token or a few (llama.cpp holds back a token that ends inside a UTF-8 character)
    assert 0 < chunks["request_id"].isin(set(probes["request_id"])).sum() <= 16 * len(probes)
    assert prefill["probe_itl_max_s"] >= prefill["probe_itl_p99_s"] >= prefill["probe_itl_p50_s"] > 0
    return prefill


def test_gauges_itl_and_the_decode_stall_of_a_large_prefill_chunk(llama_install, tmp_path):
    journal = Journal(tmp_path)
    large = _run(journal, 2048, PLAN)
    small = _run(journal, 64, PLAN.model_copy(update={"decode": None}))

    cells = large.table("cells").set_index("cell_id")
    decode = cells.loc["decode-prose-c3"]
    assert decode["valid"], decode["invalid_reasons"]
    assert decode["itl_max_s"] >= decode["itl_p99_s"] >= decode["itl_p95_s"] >= decode["itl_p50_s"] > 0
    assert decode["itl_tokens_per_chunk"] == pytest.approx(1.0, abs=0.05)  # no drafter: a token per chunk, nearly
    # llama.cpp exports its running and deferred requests, no KV use, and never preempts
    gauges = large.table("gauges")
    assert set(gauges["name"]) == {"running", "waiting"}
    assert set(gauges["cell_id"]) == set(cells.index)
    assert decode["gauge_samples"] == (gauges.cell_id == "decode-prose-c3").sum() / 2 >= 2
    assert 1 <= decode["running_peak"] <= 3 and decode["waiting_peak"] == 0
    assert pd.isna(decode["kv_usage_peak"]) and pd.isna(decode["preemptions"])  # not exported

    big, chunked = _check_probes(large), _check_probes(small)
    print(f"probes beside a {PROMPT}-token prefill, chunk 2048 vs 64: longest gap {1000 * big['probe_itl_max_s']:.0f} "
          f"vs {1000 * chunked['probe_itl_max_s']:.0f} ms, ITL p99 {1000 * big['probe_itl_p99_s']:.0f} vs "
          f"{1000 * chunked['probe_itl_p99_s']:.0f} ms, TTFT p95 {1000 * big['probe_ttft_p95_s']:.0f} vs "
          f"{1000 * chunked['probe_ttft_p95_s']:.0f} ms; prefill TTFT {1000 * big['ttft_s']:.0f} vs "
          f"{1000 * chunked['ttft_s']:.0f} ms")
    # One batch holds the decode running beside it for the whole prompt: its stall is about the engine's own prompt
    # time for that batch (about 0.7-1.0 of it in five pairs on a busy 2-core host; a third at least, whatever the
    # host's pace, where 16 batches of 64 would give a sixteenth). In 64-token batches its next token rides in each
    # one, but this host stalls for about a second with no prefill running at all, so how much shorter its longest
    # gap is cannot be asserted here (printed: 762, 1051, 1710, 1605, 1644 ms against 1829, 2205, 1590, 2081, 1081).
    assert big["probe_itl_max_s"] >= big["engine_prompt_s"] / 3
