"""SGLang 0.5.17 as it answered on a lent H100 (tests/fixtures/sglang-0.5.17, recorded 2026-12-05 by
tools/gpu-host/gpu-host.sh: `failures`, and one resident round of data/studies/h200-sglang-1b-sliced.yaml): the settings it
reports back, its counters against the client's counts and the recorded contract, its drafter's evidence, and the
failures it was provoked into, each classified from its own log."""

import json
from pathlib import Path

import pandas as pd
import pytest

from servebook.config import load_study
from servebook.engines import get_engine
from servebook.engines.contracts import recorded_contracts
from servebook.engines.counters import Scrape
from servebook.launch.verify import SelfReport, verify_claims
from servebook.measure.observers.reconcile import ClientCounts, reconcile
from servebook.models.random_models import model_file_name
from servebook.util.paths import repo_data_dir
from tests.helpers.recorded_logs import failure_from_log
from tests.helpers.scrapes import recorded_scrapes

RECORDED = Path(__file__).parents[2] / "fixtures" / "sglang-0.5.17"
STUDY = repo_data_dir() / "studies" / "h200-sglang-1b-sliced.yaml"
SGLANG = get_engine("sglang")
LIVE = ["baseline", "running-8", "chunk-2048", "draft-model", "kv-fp8", "no-radix-cache"]


def entries():
    return {entry.name: entry.candidate for entry in load_study(STUDY).expand()}


def scrapes(name: str, cell: str) -> tuple[Scrape, Scrape]:
    return recorded_scrapes(RECORDED / f"scrapes-{name}.parquet", cell)


@pytest.mark.parametrize("name", LIVE)
def test_every_knob_of_the_study_is_read_back_from_server_info_and_verified(name):
    bodies = json.loads((RECORDED / f"self-report-{name}.json").read_text())
    settings = SGLANG.reported_settings(bodies)
    candidate = entries()[name]
    report = SelfReport([m["id"] for m in bodies["/v1/models"]["data"]], settings)
    found, wrong = verify_claims(candidate, report, model_file_name(candidate.model.path, SGLANG.model_format))
    assert wrong == [], wrong
    for claim in ("model", "knobs.max_running_requests", "knobs.chunk_size", "knobs.context_length",
                  "knobs.drafter", "knobs.tensor_parallel_size"):
        assert found[claim].status == "verified", (claim, found)
    knobs = candidate.knobs
    if knobs.kv_dtype:
        assert (found["knobs.kv_dtype"].status, found["knobs.kv_dtype"].value) == ("verified", "fp8_e4m3")
    else:
        assert settings["kv_dtype"] == "auto"  # SGLang 0.5.17 reports the flag as given, not the dtype it chose
    assert settings["prefix_caching"] is (knobs.prefix_caching is not False)
    assert settings["drafter_active"] == (knobs.drafter.kind != "none")
    # the scheduler ran as many requests as asked: the 98,304-token pool holds 32 of the study's largest
    assert settings["effective_max_running_requests"] == knobs.max_running_requests
    # every engine's pool is the study's --max-total-tokens, whatever memory the seven engines left each other
    assert bodies["/server_info"]["max_total_num_tokens"] == 98304


@pytest.mark.parametrize("name, cause, words", [
    ("refused-flag", "bad_flag", "argument --dtype: invalid choice: 'float8'"),
    ("missing-model", "model_load", "LocalEntryNotFoundError: Cannot find the requested files in the disk cache"),
    ("no-memory-for-kv", "out_of_memory", "leave no GPU memory for the KV cache under --mem-fraction-static=0.01"),
    # the n-gram candidate, started last of seven on an 80 GB H100 at the study's 0.5, saw too little left
    ("ngram-beside-six", "out_of_memory", "Raise --mem-fraction-static above 0.564"),
])
def test_each_provoked_failure_is_classified_from_the_engines_own_line(tmp_path, name, cause, words):
    failure, text = failure_from_log(RECORDED / f"engine-{name}.log", "sglang", ["sglang", "serve"], tmp_path)
    assert failure.cause == cause
    assert words in failure.message, failure.message
    assert failure.message in text
    # the statement of the error, not a traceback's echo of the code that raised it
    assert not failure.message.startswith("raise ")


def test_an_engine_killed_mid_cell_is_a_crash_not_a_diagnosis_from_its_log():
    diagnosis = SGLANG.classify_failure((RECORDED / "engine-killed-mid-cell.log").read_text(), -9)
    assert diagnosis.cause == "crash" and diagnosis.message == "engine killed by signal 9"


def test_cuda_graph_capture_is_seen_and_ends_before_the_server_serves():
    lines = (RECORDED / "engine-killed-mid-cell.log").read_text().splitlines()
    ready = next(i for i, text in enumerate(lines) if "The server is fired up" in text)
    captured = [i for i, text in enumerate(lines) if SGLANG.compile_pattern.search(text)]
    assert any("Capture target decode CUDA graph begin" in lines[i] for i in captured)
    assert captured and max(captured) < ready, "no capture inside the measured cells that followed"


def test_the_counters_reconcile_with_the_clients_counts_in_every_cell():
    """The live baseline's requests against SGLang's own counters over each cell: prompt and generated tokens, and
    cached tokens, which SGLang's usage leaves out when nothing was cached (the run was recorded before servebook
    knew, so its requests hold None there: read as SGLang means it, 0)."""
    requests = pd.read_parquet(RECORDED / "requests-baseline.parquet")
    assert SGLANG.usage_omits_zero_cached
    for cell, rows in requests.groupby("cell_id"):
        counts = SGLANG.server_counts(*scrapes("baseline", cell))
        client = ClientCounts(prompt_tokens=int(rows.prompt_tokens.sum()),
                              cached_tokens=int(rows.cached_tokens.fillna(0).sum()),
                              completion_tokens=int(rows.completion_tokens.sum()))
        result = reconcile(client, counts)
        assert result.status == "ok", (cell, result.message)
        if cell == "reuse":
            assert counts.cached_tokens == 41472  # nine later turns served their history from the radix cache
        elif cell == "decode-prose-c16":
            assert counts.cached_tokens == 1  # one opener token matched an earlier prompt, as the request said
        else:
            assert counts.cached_tokens == 0


def test_the_drafters_evidence_comes_from_sglangs_verify_passes():
    # the random 2-layer draft agrees with the random 1B target by chance only: SGLang's log said "accept len:
    # 1.00, accept rate: 0.00"; its counters say each of 508 passes proposed 3 tokens and none was taken
    counts = SGLANG.server_counts(*scrapes("draft-model", "decode-prose-c1"))
    assert (counts.verify_passes, counts.draft_tokens, counts.accepted_tokens) == (508, 1524, 0)
    assert counts.generation_tokens == counts.verify_passes + 4  # four requests, each one token from its prefill
    wave = SGLANG.server_counts(*scrapes("draft-model", "wave-c48"))
    assert wave.draft_tokens == 3 * wave.verify_passes and 0 < wave.accepted_tokens < 0.01 * wave.draft_tokens
    # no drafter: no verify pass and no drafted tokens, which is no evidence either way
    plain = SGLANG.server_counts(*scrapes("baseline", "decode-prose-c1"))
    assert plain.verify_passes == 0 and plain.draft_tokens is None


def test_the_live_server_exports_what_the_contract_recorded_from_the_installed_package():
    """/metrics before and after every cell of six live engines, and /server_info, against
    data/engine-contracts/sglang-0.5.17.json (recorded from the same release's code, with no GPU)."""
    contract = recorded_contracts()[("sglang", "0.5.17")]
    seen: dict[str, set] = {}
    for name in LIVE:
        frame = pd.read_parquet(RECORDED / f"scrapes-{name}.parquet")
        for metric, labels in frame[["name", "labels"]].drop_duplicates().itertuples(index=False):
            if not metric.endswith(("_bucket", "_created")):
                seen.setdefault(metric, set()).add(tuple(sorted(json.loads(labels))))
    recorded = {m.name for m in contract.metrics}
    assert set(seen) <= recorded, sorted(set(seen) - recorded)
    # the speculative ones exist only beside a drafter, the rest in every live engine
    assert {"sglang:spec_verify_calls_total", "sglang:spec_num_draft_tokens"} <= set(seen)
    # the labels as recorded, and a `pid` on the gauges SGLang's multi-process collector exports per process
    # (num_retracted_reqs and num_paused_reqs: prometheus_client's default mode, "all")
    for metric, labels in seen.items():
        assert labels == {contract.metric(metric).live_labels}, metric
    assert "pid" in contract.metric("sglang:num_retracted_reqs").live_labels
    assert "pid" not in contract.metric("sglang:token_usage").live_labels
    for read in ("sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:cached_tokens_total",
                 "sglang:num_requests_total", "sglang:token_usage", "sglang:num_running_reqs",
                 "sglang:num_queue_reqs"):
        assert read in seen, read
    info = json.loads((RECORDED / "self-report-baseline.json").read_text())["/server_info"]
    assert set(info) <= set(contract.server_info_fields), sorted(set(info) - set(contract.server_info_fields))
    assert info["version"] == "0.5.17"


def test_sglangs_own_prompt_time_and_first_token_are_read_beside_the_clients():
    """SGLang's per-request prefill forward (one observation per request, every chunk of it), queue time and time
    to first token, as cell means: at 8K and 32K tokens the client's first token comes a little after the engine's
    own prompt time and first token (the stream's way out), never before."""
    from servebook.engines.counters import histogram_mean

    requests = pd.read_parquet(RECORDED / "requests-baseline.parquet")
    for cell in ("prefill-8192", "prefill-32768"):
        before, after = scrapes("baseline", cell)
        prompt, queued, engine_ttft = (histogram_mean(before, after, name) for name in (
            SGLANG.prefill_histogram, SGLANG.queue_histogram, SGLANG.ttft_histogram))
        measured = requests[(requests.cell_id == cell) & requests.measured]
        client_ttft = (measured.t_first - measured.t_send).mean()
        assert prompt is not None and queued is not None and engine_ttft is not None
        assert queued < prompt < engine_ttft < client_ttft, (cell, queued, prompt, engine_ttft, client_ttft)
    # the selector took the prefill stage alone: both stages summed would halve the mean
    both = histogram_mean(before, after, "sglang:per_stage_req_latency_seconds")
    assert both is not None and both < 0.6 * prompt


def test_idle_seats_held_to_the_measured_engines_cpus_took_two_thirds_of_its_decode():
    """Resident rounds of the SGLang study on one lent H100 (2026-12-06), interleaved: every engine held to CPUs 5-7
    (rounds 1, 4 and a fifth of four baselines), then none held (rounds 2 and 3). Held, the six seats not measuring
    kept 2-2.9 of the three CPUs busy, and the baseline decoded at a third of its unpinned speed; the one run held
    to CPUs 5-7 with no other seat (chunk-2048, made again alone) decoded at the unpinned speed. The study pins
    nothing since, and servebook calls such cells disturbed (seats_contend)."""
    rounds = pd.read_parquet(RECORDED / "pinned-and-unpinned-rounds.parquet")
    resident = rounds[rounds.round_id.notna()]
    held, free = resident[resident.held_to == "5,6,7"], resident[resident.held_to.isna()]
    assert held.run_id.nunique() == 6 and free.run_id.nunique() == 2
    assert (held.seated_cpu_cores >= 2.0).all() and (held.seated_cpu_cores <= 3.0).all()
    assert (free.seated_cpu_cores > 6.0).all()  # about a core per idle seat, free to spread over 16 CPUs

    def decode_at_one(frame):
        return frame[frame.cell_id == "decode-prose-c1"].aggregate_tok_s

    assert decode_at_one(held).max() < 0.4 * decode_at_one(free).min()
    alone = rounds[rounds.round_id.isna()]
    assert alone.entry.unique().tolist() == ["chunk-2048"] and alone.held_to.unique().tolist() == ["5,6,7"]
    assert decode_at_one(alone).iloc[0] > 0.95 * decode_at_one(free).min()
