"""GPU-engine paths through servebook's simulator: clean runs reconcile under each engine's
counter semantics, and every injected fault ends as a failed run, an invalid cell or a rejected
verdict with the right cause, never as a published number."""

import json
import subprocess
import sys

import pytest

from servebook.config import Candidate, Plan, VerdictRules
from servebook.config.plan import ReusePlan, SteadyWarmup
from servebook.journal import Journal
from servebook.launch.process import free_port
from servebook.present.claims import claim_text
from servebook.run import run_candidate
from servebook.verdicts import judge_run
from tests.helpers.candidates import QUIET, simulated
from tests.helpers.processes import wait_healthy

pytestmark = pytest.mark.simulator
PLAN = Plan.model_validate({"decode": {"concurrency": [1, 4], "categories": ["prose"], "output_tokens": 24,
                                       "rounds": 2},
                            "prefill": {"prompt_tokens": [512], "requests": 2}, "warmup_requests": 1,
                            "max_foreign_cpu_cores": 4})


@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp"])
def test_clean_run_reconciles_for_every_flavor(engine, tmp_path):
    record = run_candidate(simulated(engine, chunk_size=2048), PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    assert cells["valid"].all(), cells["invalid_reasons"].tolist()
    assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].tolist()
    assert (cells["within_se_pct"] > 0).all(), "each cell records its figure's error from its own requests"
    assert record.manifest.environment.simulated is True
    assert record.manifest.candidate["launch"]["simulator"] is True
    # the simulator reports its model as its engine does, and servebook's own check agrees (the llama.cpp flavour's
    # was once contradicted by its own name: python's -m read as llama.cpp's)
    claims = record.manifest.engine.verification.claims
    assert claims["model"].status == "verified", claims["model"]
    assert not [name for name, claim in claims.items() if claim.status == "contradicted"], claims
    # the baseline scrape of SGLang comes after readiness, so its counted warmup stays out of every cell
    scrapes = record.table("scrapes")
    assert not scrapes.empty


@pytest.mark.parametrize("engine,fault,cause", [
    ("sglang", "never_ready", "timeout"),
    ("vllm", "never_ready", "timeout"),
    ("llamacpp", "never_ready", "timeout"),
    ("sglang", "oom_warmup", "out_of_memory"),
    ("vllm", "oom_warmup", "out_of_memory"),
    ("vllm", "crash_mid_stream", "crash"),
    ("sglang", "crash_mid_stream", "crash"),
])
def test_faults_end_as_failed_runs_with_their_cause(engine, fault, cause, tmp_path):
    record = run_candidate(simulated(engine, fault), PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "failed"
    assert record.manifest.failure.cause == cause, record.manifest.failure
    assert record.table("cells") is None and record.manifest.summary is None


@pytest.mark.parametrize("engine", ["sglang", "vllm", "llamacpp"])
def test_wrong_usage_counts_make_cells_invalid(engine, tmp_path):
    record = run_candidate(simulated(engine, "wrong_usage"), PLAN, Journal(tmp_path), reporter=QUIET)
    cells = record.table("cells")
    assert not cells["valid"].any()
    assert (cells["reconciliation"] == "mismatch").all()
    assert cells["invalid_reasons"].str.contains("counters disagree").all()
    verdict = judge_run(record.manifest, cells, None, VerdictRules(), is_baseline=True)
    assert verdict.outcome == "rejected"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_compilation_inside_a_cell_invalidates_that_cell(engine, tmp_path):
    # the fault logs its compilation after the third measured request; without realism probes (requests after a
    # cell's counters, which a compilation may land in without touching a cell) that request is inside c4's cell
    plan = PLAN.model_copy(update={"decode": PLAN.decode.model_copy(update={"realism_probes": 0})})
    record = run_candidate(simulated(engine, "compile_in_cell"), plan, Journal(tmp_path), reporter=QUIET)
    cells = record.table("cells").set_index("cell_id")
    reasons = cells["invalid_reasons"]
    compiled = reasons[reasons.str.contains("compilation inside the measured interval")]
    assert len(compiled) == 1, reasons.to_dict()
    assert cells.loc[compiled.index[0], "valid"] == False  # noqa: E712
    assert cells["valid"].sum() == len(cells) - 1


def test_nullable_argument_as_string_is_a_rejected_run(tmp_path):
    plan = PLAN.model_copy(update={"gates": ["nullable_argument", "json_schema"], "prefill": None})
    clean = run_candidate(simulated("sglang"), plan, Journal(tmp_path / "a"), reporter=QUIET)
    assert clean.manifest.summary.gates["nullable_argument"].model_dump() == {"passed": 3, "cases": 3, "first_failure": None}
    broken = run_candidate(simulated("sglang", "null_string_argument"), plan, Journal(tmp_path / "b"), reporter=QUIET)
    gates = broken.table("gates")
    assert not gates[gates.gate == "nullable_argument"]["passed"].any()
    verdict = judge_run(broken.manifest, broken.table("cells"), None, VerdictRules(), is_baseline=True)
    assert verdict.outcome == "rejected"
    assert 'gate nullable_argument 0/3: the nullable argument came back as the string "null"' in verdict.reasons


def test_openai_engine_attaches_and_does_not_fake_reconciliation(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "servebook.simulator", "--flavor", "vllm", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, 20)
        candidate = Candidate.model_validate({"name": "attached", "engine": "openai", "model": {"id": "model"},
                                              "launch": {"mode": "attach", "url": f"http://127.0.0.1:{port}"}})
        record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    finally:
        server.terminate()
        server.wait(10)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    assert (cells["reconciliation"] == "not_available").all()
    assert not record.table("scrapes").empty, "whatever /metrics exposes is still recorded"
    verdict = judge_run(record.manifest, cells, None, VerdictRules(), is_baseline=True)
    assert verdict.outcome == "rejected"
    assert any("counters not available, so not reconciled" in r for r in verdict.reasons)
    # servebook cannot know how an unknown server forces the output length, so it sends nothing
    # engine-specific; the length is then checked against usage, and here the server stopped early.
    assert any("tokens instead of 24" in r for r in verdict.reasons)


def test_request_extras_let_an_unknown_server_force_the_length(tmp_path):
    candidate = Candidate.model_validate({
        "name": "templated", "engine": "openai", "model": {"id": "model"}, "request_extras": {"ignore_eos": True},
        # as on a real vLLM: without --enable-prompt-tokens-details, usage has no cached tokens to verify a cold cell
        "launch": {"command": [sys.executable, "-m", "servebook.simulator", "--flavor", "vllm", "--",
                               "--port", "{port}", "--enable-prompt-tokens-details"],
                   "ready_timeout_s": 20}})
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    cells = record.table("cells")
    assert cells["valid"].all(), cells["invalid_reasons"].tolist()  # lengths forced and checked
    assert (cells["reconciliation"] == "not_available").all()


def test_openai_engine_launches_a_command_template(tmp_path):
    candidate = Candidate.model_validate({
        "name": "templated", "engine": "openai", "model": {"id": "model"},
        # as on a real vLLM: without --enable-prompt-tokens-details, usage has no cached tokens to verify a cold cell
        "launch": {"command": [sys.executable, "-m", "servebook.simulator", "--flavor", "vllm", "--",
                               "--port", "{port}", "--enable-prompt-tokens-details"],
                   "ready_timeout_s": 20}})
    record = run_candidate(candidate, PLAN.model_copy(update={"prefill": None}), Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    assert record.manifest.engine.argv[:3] == [sys.executable, "-m", "servebook.simulator"]


def test_multi_token_chunks_are_counted_where_the_engine_reports_usage_per_chunk(tmp_path):
    candidate = Candidate.model_validate({
        "name": "drafting", "engine": "vllm", "model": {"id": "org/model"},
        "knobs": {"max_running_requests": 4, "drafter": {"kind": "ngram", "max_draft_tokens": 4}},
        "launch": {"simulator": True}})
    record = run_candidate(candidate, PLAN.model_copy(update={"prefill": None}), Journal(tmp_path), reporter=QUIET)
    chunks, requests = record.table("chunks"), record.table("requests")
    assert chunks["tokens"].notna().all()
    assert (chunks["tokens"] > 1).any(), "an accepted draft run arrives as one chunk of several tokens"
    per_request = chunks.groupby("request_id")["tokens"].sum()
    assert (per_request == requests.set_index("request_id").loc[per_request.index, "completion_tokens"]).all()


def test_a_router_serving_two_models_needs_served_name(tmp_path):
    """A multi-model endpoint (an SGLang router, say): servebook measures the named model, never the first listed."""
    router = ["--sim-models", "big-model,small-model"]
    unnamed = simulated("sglang").model_copy(update={"extra_args": router})
    record = run_candidate(unnamed, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "failed" and record.manifest.failure.cause == "model_not_served"
    assert "serves 3 models (org/model, big-model, small-model); name the one" in record.manifest.failure.message
    named = Candidate.model_validate({**unnamed.model_dump(), "model": {"id": "org/model", "served_name": "tuned"}})
    named = named.model_copy(update={"extra_args": router})
    record = run_candidate(named, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    assert record.manifest.engine.served_model == "tuned"


def test_attach_refuses_a_server_that_contradicts_the_candidate(tmp_path):
    from servebook.config.errors import InputError

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "servebook.simulator", "--flavor", "sglang", "--",
                               "sglang", "serve", "--model-path", "org/model", "--port",
                               str(port), "--max-running-requests", "8", "--chunked-prefill-size", "4096",
                               "--enable-metrics"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_healthy(port, 30)
        attach = {"mode": "attach", "url": f"http://127.0.0.1:{port}"}
        claims_16 = Candidate.model_validate({"engine": "sglang", "model": {"id": "org/model"}, "launch": attach,
                                              "knobs": {"max_running_requests": 16, "chunk_size": 4096}})
        with pytest.raises(InputError, match="max_running_requests: the candidate says 16, the server reports 8"):
            run_candidate(claims_16, PLAN, Journal(tmp_path), reporter=QUIET)
        honest = claims_16.model_copy(update={"knobs": claims_16.knobs.model_copy(update={"max_running_requests": 8})})
        record = run_candidate(honest, PLAN, Journal(tmp_path), reporter=QUIET)
    finally:
        server.kill()
        server.wait(10)
    assert record.status == "completed", record.manifest.failure
    claims = {name: claim_text(c) for name, c in record.manifest.engine.verification.claims.items()}
    assert claims["knobs.chunk_size"] == "verified: 4096" and claims["knobs.max_running_requests"] == "verified: 8"


GATE_PLAN = Plan.model_validate({"decode": None, "prefill": None, "warmup_requests": 1, "gate_cases": 2,
                                 "gates": ["agent_protocol", "needle"], "needle_tokens": [1024, 4096]})


def test_the_agent_protocol_and_needle_gates_pass_on_a_capable_server(tmp_path):
    record = run_candidate(simulated("vllm"), GATE_PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    gates = record.manifest.summary.gates
    assert gates["agent_protocol"].passed == gates["agent_protocol"].cases == 5
    assert gates["needle@1024"].passed == 2 and gates["needle@4096"].passed == 2


@pytest.mark.parametrize("fault, gate, reason, failing", [
    # an empty reply breaks both cases that expect text
    ("empty_reply", "agent_protocol", "ordinary_text: an empty answer", 2),
    ("no_parallel_tool_calls", "agent_protocol", "parallel_tool_calls: 1 tool call(s) for two cities", 1),
    ("wrong_tool", "agent_protocol", "tool_selection: chose book_table", 1),
    ("history_rejected", "agent_protocol", "reasoning_and_tool_result: request failed: BadRequestError", 1),
    ("null_string_argument", "agent_protocol", 'nullable_argument: the nullable argument came back as the string', 1),
    ("lost_needle", "needle@1024", "depth 25%: answered 'I do not know.'", 4),
])
def test_each_gate_fault_fails_its_case_with_the_right_reason(tmp_path, fault, gate, reason, failing):
    record = run_candidate(simulated("sglang", fault), GATE_PLAN, Journal(tmp_path), reporter=QUIET)
    gates = record.manifest.summary.gates
    assert gates[gate].passed < gates[gate].cases
    assert gates[gate].first_failure.startswith(reason), gates[gate].first_failure
    assert (~record.table("gates")["passed"]).sum() == failing  # the other cases still pass


def test_output_equivalence_catches_a_batch_variant_engine(tmp_path):
    plan = Plan.model_validate({"decode": None, "prefill": None, "warmup_requests": 1,
                                "equivalence": {"prompts": 3, "output_tokens": 24, "prompt_tokens": 64}})
    clean = run_candidate(simulated("vllm"), plan, Journal(tmp_path / "a"), reporter=QUIET)
    assert clean.manifest.summary.batch_invariance["diverged"] == []
    assert clean.manifest.summary.batch_invariance["identical_share"] == 1.0
    broken = run_candidate(simulated("vllm", "batch_variant"), plan, Journal(tmp_path / "b"), reporter=QUIET)
    result = broken.manifest.summary.batch_invariance
    assert result["identical_share"] < 1.0 and result["diverged"]
    assert all(d["first_difference"] >= 5 for d in result["diverged"])


def test_a_plan_that_needs_a_tokenizer_is_refused_before_anything_is_recorded(tmp_path):
    """Attached to a server without /tokenize, prefill cells cannot be built: one InputError naming the plan
    sections, before the run exists (it used to escape as a RuntimeError mid-run and leave it incomplete)."""
    from servebook.util.errors import InputError

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "servebook.simulator", "--flavor", "vllm",
                               "--fault=no_tokenizer", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = Journal(tmp_path)
    try:
        wait_healthy(port, 20)
        candidate = Candidate.model_validate({"name": "attached", "engine": "openai", "model": {"id": "model"},
                                              "launch": {"mode": "attach", "url": f"http://127.0.0.1:{port}"}})
        with pytest.raises(InputError, match="prefill build prompts of exact token length"):
            run_candidate(candidate, PLAN, journal, reporter=QUIET)
        assert journal.run_ids() == []
        decode_only = PLAN.model_copy(update={"prefill": None})
        record = run_candidate(candidate, decode_only, journal, reporter=QUIET)
    finally:
        server.terminate()
        server.wait(10)
    assert record.status == "completed", "a plan without such cells runs against the same server"


def test_warm_up_until_steady_is_recorded_and_stays_out_of_the_cells(tmp_path):
    plan = PLAN.model_copy(update={"warmup_until_steady": SteadyWarmup(within_pct=50, max_bursts=6, output_tokens=16)})
    plan = Plan.model_validate(plan.model_dump())
    record = run_candidate(simulated("vllm"), plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    summary = record.manifest.summary
    assert summary is not None and 2 <= len(summary.warmup_tok_s) <= 6
    assert summary.warmup_steady is True
    cells = record.table("cells")
    assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].tolist()
    assert not (record.table("requests")["cell_id"] == "warmup").any()


def test_vllm_time_to_first_token_splits_into_queue_prompt_and_the_rest(tmp_path):
    """vLLM reports queueing and prefill per request as histograms: a wave beyond the slots waits in the engine's
    queue, and the split adds up to the client's mean TTFT; llama.cpp reports no queue, so none is made up."""
    plan = Plan.model_validate({"decode": None, "prefill": {"prompt_tokens": [512], "requests": 2},
                                "waves": {"concurrency": [8], "waves": 1, "output_tokens": 8, "prompt_tokens": 128},
                                "warmup_requests": 1, "max_foreign_cpu_cores": 4})
    record = run_candidate(simulated("vllm", max_running_requests=2), plan, Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells").set_index("cell_id")
    wave, prefill = cells.loc["wave-c8"], cells.loc["prefill-512"]
    assert wave["engine_queue_s"] > 0.01 > prefill["engine_queue_s"] >= 0
    assert prefill["engine_prompt_s"] > 0 and prefill["ttft_outside_engine_s"] > -0.005
    llama = run_candidate(simulated("llamacpp"), plan, Journal(tmp_path / "llama"), reporter=QUIET)
    assert llama.table("cells")["engine_queue_s"].isna().all()


def test_an_engine_that_reports_another_version_than_the_pinned_one_fails_the_run(tmp_path):
    candidate = simulated("vllm").with_overrides({"pins.engine_version": "1.2", "extra_args": ["--sim-version", "1.1"]})
    record = run_candidate(candidate, PLAN, Journal(tmp_path), reporter=QUIET)
    assert record.status == "failed" and record.manifest.failure.cause == "version_mismatch"
    assert "'1.2'" in record.manifest.failure.message and "'1.1'" in record.manifest.failure.message
    pinned = simulated("vllm").with_overrides({"pins.engine_version": 1.1, "extra_args": ["--sim-version", "1.1"]})
    assert pinned.pins.engine_version == "1.1"  # YAML's number, taken as the version it names
    record = run_candidate(pinned, PLAN, Journal(tmp_path / "ok"), reporter=QUIET)
    assert record.status == "completed" and record.manifest.environment.engine_version == "1.1"


def test_a_launched_vllm_reports_every_knob_back_and_its_drafter_acceptance(tmp_path):
    """servebook starts vLLM in development mode, so /server_info gives the resolved configuration (the simulator
    answers in the shape vLLM 0.26 gave on an H200); the drafter's acceptance comes from the spec_decode counters."""
    candidate = Candidate.model_validate({
        "name": "drafting", "engine": "vllm", "model": {"id": "org/model"},
        "knobs": {"max_running_requests": 4, "chunk_size": 1024, "kv_dtype": "fp8", "prefix_caching": False,
                  "context_length": 8192, "drafter": {"kind": "ngram", "max_draft_tokens": 4}},
        "launch": {"simulator": True}})
    record = run_candidate(candidate, PLAN.model_copy(update={"prefill": None}), Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    claims = {name: claim_text(c) for name, c in record.manifest.engine.verification.claims.items()}
    assert claims["knobs.max_running_requests"] == "verified: 4" and claims["knobs.chunk_size"] == "verified: 1024"
    assert claims["knobs.kv_dtype"] == "verified: fp8" and claims["knobs.prefix_caching"] == "verified: False"
    assert claims["knobs.drafter"] == "verified: a drafter" and claims["knobs.context_length"] == "verified: 8192"
    cells = record.table("cells")
    assert (cells["draft_acceptance"].between(0.05, 1.0)).all(), cells["draft_acceptance"].tolist()
    assert (cells["draft_tokens"] > 0).all(), "the drafted tokens, from the spec_decode counters per cell"
    # the raw answers stay with the run, so a claim can be read again later
    assert "vllm_config" in json.loads((record.dir / "self_report.json").read_text())["/server_info?config_format=json"]


def test_a_launched_sglang_drafter_shows_its_acceptance_from_the_verify_passes(tmp_path):
    """SGLang counts verify passes, not drafts (spec_verify_calls_total); the drafted and accepted tokens of a cell
    follow from them, the draft width SGLang exports, and the generated tokens, as on the H100 (2026-12-05)."""
    candidate = Candidate.model_validate({
        "name": "drafting", "engine": "sglang", "model": {"id": "org/model"},
        "knobs": {"max_running_requests": 4, "context_length": 8192,
                  "drafter": {"kind": "ngram", "max_draft_tokens": 4}},
        "launch": {"simulator": True}})
    record = run_candidate(candidate, PLAN.model_copy(update={"prefill": None}), Journal(tmp_path), reporter=QUIET)
    assert record.status == "completed", record.manifest.failure
    cells = record.table("cells")
    assert (cells["reconciliation"] == "ok").all(), cells["reconciliation_message"].tolist()
    assert (cells["draft_tokens"] > 0).all() and cells["draft_acceptance"].between(0.05, 1.0).all(), \
        cells[["draft_tokens", "draft_acceptance"]].to_dict("records")


def test_prefix_caching_off_leaves_every_turn_uncached(tmp_path):
    plan = PLAN.model_copy(update={"prefill": None, "decode": None, "reuse": ReusePlan(
        conversations=1, turns=3, first_prompt_tokens=256, turn_tokens=64, output_tokens=4)})
    on = run_candidate(simulated("vllm"), plan, Journal(tmp_path / "on"), reporter=QUIET)
    off = simulated("vllm").model_copy(update={"knobs": simulated("vllm").knobs.model_copy(update={"prefix_caching": False})})
    off = run_candidate(Candidate.model_validate(off.model_dump()), plan, Journal(tmp_path / "off"), reporter=QUIET)
    shares = [r.table("cells").set_index("cell_id").loc["reuse", "cached_share"] for r in (on, off)]
    assert shares[0] > 0.5 and shares[1] == 0, shares
    assert off.table("cells")["valid"].all() and off.table("cells")["reconciliation"].eq("ok").all()
